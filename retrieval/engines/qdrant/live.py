"""Attach read-only to a user's Qdrant collection (``live: {engine: qdrant, path | url,
collection}``; :mod:`retrieval.indexes.live`).

Two ways in:

- ``path``: a qdrant-edge shard folder (``EdgeShard``, Qdrant's engine in this process).
  Opening a shard WRITES into its folder (``EdgeShard.load`` rewrites ``edge_config.json``,
  segment files and the WAL, checked on qdrant-edge-py 0.9.0), so rwb never opens the user's
  folder: it copies it (reading only) into a temporary folder of its own, opens the copy and
  removes it at :meth:`close`; the user's folder stays byte-identical. The copy is what rwb
  measures: points written to the folder after the attach are not seen (re-attach).
  ``collection`` is optional here (a label).
- ``url``: a Qdrant server through ``qdrant-client`` (``pip install qdrant-client``; optional
  ``api_key``, e.g. ``${QDRANT_API_KEY}``, never shown). No Qdrant server can run on the
  machine where rwb is developed, so this path is NOT tested: the description says so in its
  ``untested`` field.

Description: the vector params (size, distance; the one vector, or ``vector_name`` among
several), the HNSW config, the quantization config, points, segments and indexed vectors
(edge: ``edge_config.json`` of the copy, ``ShardInfo``, each segment's index type; server:
``get_collection``). Knobs: ``hnsw_ef`` (``[1, 4096]``) and, when the collection is quantized,
``oversampling`` (``[1, 16]``, rescored). Distances: Qdrant Euclid (unsquared) becomes rwb's
squared l2, Dot ``-ip``, Cosine ``1 - cos``.

Exact: ``SearchParams(exact=True)`` (Qdrant's own full scan). Snapshot: ``scroll`` with vectors
(id order), rows before ``start`` skipped. Point ids must be integers (a UUID id is refused).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import model_validator

from retrieval.errors import BackendError, ConfigError, NotReachable, RwbError, param_error
from retrieval.indexes.base import SearchResult
from retrieval.indexes.live import LiveDescription, LiveKnob
from retrieval.indexes.live_util import (
    LiveSection,
    check_expected,
    check_k,
    check_queries,
    check_search_params,
    label,
    one_line,
    pack_hits,
    parse_section,
)
from retrieval.redact import redact_uri

log = logging.getLogger(__name__)

METRIC = {"euclid": "l2", "dot": "ip", "cosine": "cosine"}
EF_MAX = 4096
OVERSAMPLING_MAX = 16
UNTESTED = ("a Qdrant server by URL (qdrant-client) is not tested here: no Qdrant server can "
            "run where rwb is developed")


class QdrantLive(LiveSection):
    """``live:`` keys of a Qdrant collection: ``path`` (a qdrant-edge shard folder) or ``url``
    (a server), ``collection`` (required with ``url``), optional ``vector_name`` (a named
    vector) and ``api_key`` (a server's)."""

    path: str | None = None
    url: str | None = None
    collection: str | None = None
    vector_name: str | None = None
    api_key: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> QdrantLive:
        if (self.path is None) == (self.url is None):
            raise ValueError("give exactly one of 'path' (a qdrant-edge shard folder) and "
                             "'url' (a Qdrant server)")
        if self.url is not None and not self.collection:
            raise ValueError("'collection' is required with 'url'")
        return self


def _id(pid: Any, where: str) -> int:
    if isinstance(pid, bool) or not isinstance(pid, int | np.integer):
        raise ConfigError(f"{where}: point id {pid!r} is not an integer; rwb needs integer ids")
    return int(pid)


class _Edge:
    """The qdrant-edge side: a read-only copy of the shard folder, opened in this process."""

    def __init__(self, spec: QdrantLive, where: str) -> None:
        import qdrant_edge as q

        src = Path(str(spec.path))
        if not src.is_dir():
            raise NotReachable(f"{where}: no qdrant-edge shard folder at {str(src)!r} "
                               f"(live.path)")
        if not (src / "edge_config.json").is_file():
            raise ConfigError(f"{where}: field 'live.path' must be a qdrant-edge shard folder "
                              f"(with edge_config.json); received {str(src)!r}")
        self.tmp = Path(tempfile.mkdtemp(prefix="rwb-qdrant-live-"))
        copy = self.tmp / "shard"
        try:
            shutil.copytree(src, copy, ignore=shutil.ignore_patterns("*.lock"))
            self.config = json.loads((copy / "edge_config.json").read_text())
            self.segment_kinds = sorted(
                str(v.get("index", {}).get("type"))
                for seg in (copy / "segments").glob("*/segment.json")
                for v in json.loads(seg.read_text())["config"]["vector_data"].values())
            self.shard: Any = q.EdgeShard.load(str(copy))
        except Exception as exc:
            self.close()
            raise BackendError(f"{where}: qdrant-edge could not open a copy of the shard: "
                               f"{one_line(exc)}") from None

    def vectors(self) -> dict[str, dict[str, Any]]:
        return {str(k): {"size": int(v["size"]), "distance": str(v["distance"])}
                for k, v in self.config.get("vectors", {}).items()}

    def facts(self) -> dict[str, Any]:
        info = self.shard.info()
        return {"points": int(info.points_count), "segments": int(info.segments_count),
                "indexed_vectors": int(info.indexed_vectors_count),
                "hnsw_config": self.config.get("hnsw_config") or {},
                "quantization_config": self.config.get("quantization_config"),
                "segment_index_types": self.segment_kinds}

    def query(self, x: np.ndarray, k: int, using: str | None, ef: int | None, exact: bool,
              oversampling: int | None) -> list[list[tuple[Any, float]]]:
        import qdrant_edge as q

        quant = (q.QuantizationSearchParams(rescore=True, oversampling=float(oversampling))
                 if oversampling is not None else None)
        params = q.SearchParams(hnsw_ef=ef, exact=exact, quantization=quant)
        reqs = [q.QueryRequest(limit=k, query=q.Query.Nearest(row, using=using),
                               params=params) for row in x]
        hits = self.shard.query_batch(q.QueryBatchRequest(reqs))
        return [[(p.id, float(p.score)) for p in row] for row in hits]

    def scroll(self, offset: Any, limit: int, using: str | None
               ) -> tuple[list[tuple[Any, Any]], Any]:
        import qdrant_edge as q

        recs, nxt = self.shard.scroll(q.ScrollRequest(offset=offset, limit=limit,
                                                      with_vector=True, with_payload=False))
        return [(r.id, r.vector) for r in recs], nxt

    def close(self) -> None:
        shard, self.shard = getattr(self, "shard", None), None
        if shard is not None:
            shard.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class _Server:
    """The qdrant-client side (a Qdrant server by URL; untested here, see the module)."""

    def __init__(self, spec: QdrantLive, where: str) -> None:
        try:
            from qdrant_client import QdrantClient  # type: ignore[import-not-found]
        except ImportError:
            raise ConfigError(f"{where}: live.url needs qdrant-client (pip install "
                              f"qdrant-client); a shard folder needs live.path") from None
        self.name, shown = str(spec.collection), redact_uri(str(spec.url))
        try:
            self.client = QdrantClient(url=spec.url, api_key=spec.api_key, timeout=30)
            names = [c.name for c in self.client.get_collections().collections]
        except Exception as exc:
            raise NotReachable(f"{where}: cannot reach Qdrant at {shown!r}: "
                               f"{one_line(exc, spec.api_key)}") from None
        if self.name not in names:
            raise param_error("live.collection", f"a collection at the URL "
                              f"({', '.join(sorted(names)) or 'none'})", self.name, where=where)
        self.info = self.client.get_collection(self.name)

    def vectors(self) -> dict[str, dict[str, Any]]:
        vp = self.info.config.params.vectors
        items = vp.items() if isinstance(vp, dict) else [("", vp)]
        return {k: {"size": int(v.size), "distance": str(getattr(v.distance, "value",
                                                                   v.distance))}
                for k, v in items}

    def facts(self) -> dict[str, Any]:
        info = self.client.get_collection(self.name)

        def dump(o: Any) -> Any:
            return o.model_dump(exclude_none=True) if o is not None else None

        return {"points": int(info.points_count or 0), "segments": int(info.segments_count),
                "indexed_vectors": int(info.indexed_vectors_count or 0),
                "hnsw_config": dump(info.config.hnsw_config) or {},
                "quantization_config": dump(info.config.quantization_config)}

    def query(self, x: np.ndarray, k: int, using: str | None, ef: int | None, exact: bool,
              oversampling: int | None) -> list[list[tuple[Any, float]]]:
        from qdrant_client import models

        quant = (models.QuantizationSearchParams(rescore=True, oversampling=float(oversampling))
                 if oversampling is not None else None)
        params = models.SearchParams(hnsw_ef=ef, exact=exact, quantization=quant)
        out = []
        for row in x:
            res = self.client.query_points(self.name, query=row.tolist(), using=using or None,
                                           limit=k, search_params=params, with_payload=False)
            out.append([(p.id, float(p.score)) for p in res.points])
        return out

    def scroll(self, offset: Any, limit: int, using: str | None
               ) -> tuple[list[tuple[Any, Any]], Any]:
        recs, nxt = self.client.scroll(self.name, limit=limit, offset=offset,
                                       with_vectors=True, with_payload=False)
        return [(r.id, r.vector) for r in recs], nxt

    def close(self) -> None:
        self.client.close()


class QdrantLiveCollection:
    """A read-only handle on a Qdrant collection (see the module docstring)."""

    def __init__(self, spec: QdrantLive, where: str | None) -> None:
        self.spec, self.where = spec, label(where, "qdrant")
        self._params: dict[str, int] = {}
        self._side: _Edge | _Server = (_Edge(spec, self.where) if spec.path is not None
                                       else _Server(spec, self.where))
        try:
            vectors = self._side.vectors()
            if spec.vector_name is not None and spec.vector_name not in vectors:
                raise param_error("live.vector_name", f"a vector of the collection "
                                  f"({', '.join(map(repr, vectors))})", spec.vector_name,
                                  where=where)
            if spec.vector_name is None and len(vectors) != 1:
                raise param_error("live.vector_name", f"one of {', '.join(map(repr, vectors))}"
                                  f" (the collection has {len(vectors)} vectors)", None,
                                  where=where)
            self._using = spec.vector_name if spec.vector_name is not None else next(
                iter(vectors))
            vp = vectors[self._using]
            dist = vp["distance"].lower()
            if dist not in METRIC:
                raise ConfigError(f"{self.where}: distance {vp['distance']} is not one rwb "
                                  f"measures (Euclid, Dot, Cosine)")
            self._dim, self.metric = vp["size"], METRIC[dist]
            self._facts = self._side.facts()
            check_expected(spec, self._dim, self.metric, self._name(), where)
        except BaseException:
            self.close()
            raise

    def _name(self) -> str:
        return self.spec.collection or Path(str(self.spec.path)).name

    # --- LiveCollection ---------------------------------------------------------------------
    def describe(self) -> LiveDescription:
        """The collection as Qdrant reports it (see the module docstring)."""
        f = self._side.facts()
        hnsw = dict(f["hnsw_config"] or {})
        kinds = f.get("segment_index_types")
        kind = "hnsw" if f["indexed_vectors"] or (kinds and "hnsw" in kinds) else "plain"
        details = {"mode": "edge (a read-only copy of the shard folder)" if self.spec.path
                   else "server", "indexed_vectors": f["indexed_vectors"],
                   "quantization_config": f["quantization_config"], "vector_name": self._using}
        if kinds is not None:
            details["segment_index_types"] = kinds
        if self.spec.url:
            details["url"] = redact_uri(self.spec.url)
        return LiveDescription(engine="qdrant", name=self._name(), dim=self._dim,
                               metric=self.metric, index_kind=kind, build_params=hnsw,
                               rows=f["points"], segments=f["segments"], details=details,
                               untested=UNTESTED if self.spec.url else None)

    def knobs(self) -> tuple[LiveKnob, ...]:
        """``hnsw_ef`` (default: Qdrant's, ``ef_construct``), and ``oversampling`` when
        quantized."""
        ef_construct = (self._facts["hnsw_config"] or {}).get("ef_construct")
        out = [LiveKnob("hnsw_ef", "hnsw_ef", 1, EF_MAX,
                        int(ef_construct) if ef_construct else None)]
        if self._facts["quantization_config"]:
            out.append(LiveKnob("oversampling", "oversampling", 1, OVERSAMPLING_MAX, 1))
        return tuple(out)

    def set_search_params(self, **params: Any) -> None:
        """Set knobs (names from :meth:`knobs`); an unknown or out-of-range one: ConfigError."""
        self._params.update(check_search_params(self.knobs(), params, self.where))

    def _run(self, queries: np.ndarray, k: int, exact: bool) -> SearchResult:
        k = check_k(k, self.where)
        x = check_queries(queries, self._dim, self.where)
        try:
            rows = self._side.query(x, k, self._using or None, self._params.get("hnsw_ef"),
                                    exact, self._params.get("oversampling"))
        except RwbError:
            raise
        except Exception as exc:
            raise BackendError(f"{self.where}: Qdrant query failed: "
                               f"{one_line(exc, self.spec.api_key)}") from None
        hits = []
        for row in rows:
            s = np.array([sc for _, sc in row], dtype=np.float64)
            d = s * s if self.metric == "l2" else (-s if self.metric == "ip" else 1.0 - s)
            hits.append(([_id(pid, self.where) for pid, _ in row], d.tolist()))
        return pack_hits(hits, len(x), k)

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k through the HNSW index with the current knobs."""
        return self._run(queries, k, exact=False)

    def search_exact(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k by Qdrant's own full scan (``SearchParams(exact=True)``)."""
        return self._run(queries, k, exact=True)

    def iter_vectors(self, batch: int = 10_000, start: int = 0
                     ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(ids int64, vectors float32)`` batches of ``scroll`` (id order), from row
        ``start``."""
        if batch < 1 or start < 0:
            raise ConfigError(f"{self.where}: iter_vectors needs batch >= 1 and start >= 0; "
                              f"received batch={batch}, start={start}")
        offset, skip = None, start
        while True:
            recs, offset = self._side.scroll(offset, batch, self._using)
            if skip >= len(recs):
                skip -= len(recs)
            else:
                recs, skip = recs[skip:], 0
                ids = np.array([_id(pid, self.where) for pid, _ in recs], dtype=np.int64)
                vecs = np.array([v[self._using] if isinstance(v, dict) else v
                                 for _, v in recs], dtype=np.float32)
                yield ids, vecs.reshape(len(ids), self._dim)
            if offset is None:
                return

    def close(self) -> None:
        """Close the shard (and remove rwb's copy) or the client."""
        side = getattr(self, "_side", None)
        if side is not None:
            side.close()
            self._side = None  # type: ignore[assignment]


def attach(section: Mapping[str, Any], where: str | None = None) -> QdrantLiveCollection:
    """The engine descriptor's ``attach`` hook for Qdrant."""
    return QdrantLiveCollection(parse_section(QdrantLive, section, where), where)


__all__ = ["QdrantLive", "QdrantLiveCollection", "attach"]
