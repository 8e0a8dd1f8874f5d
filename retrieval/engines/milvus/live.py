"""Attach read-only to a user's Milvus collection (``live: {engine: milvus, uri, collection,
vector_field, id_field}``; :mod:`retrieval.indexes.live`).

``uri``: a Milvus Lite database path (an existing one: a missing path is refused, since
``MilvusClient`` would create it) or a server URI (``http://host:19530``; optional ``token``,
e.g. ``${RWB_MILVUS_TOKEN}``, never shown). Milvus Lite locks a path per process: a database
another process holds open is refused as not reachable; serve it with ``milvus-lite server``
and attach by URI instead.

Read-only: only ``describe_collection``, ``list_indexes``, ``describe_index``,
``get_load_state``, ``query`` (``count(*)``, ``query_iterator``) and ``search``. Never
``flush`` (a write: it seals segments), ``compact``, ``create_index``, ``insert`` / ``delete``
or ``drop``. Searching needs the collection loaded: when it is not, rwb calls
``load_collection`` (it reads the segments and index files into memory and changes no data,
no index and no file) and ``release_collection`` when the last handle of this process that
relies on that load closes, so the load state is as it found it; a loaded collection is left
loaded.

Segments (``describe().segments``, what a topology run's comparison uses; how it was counted
or why there is none in ``details['segments_source']``): a server's
``list_persistent_segments`` (sealed segments; a read); Milvus Lite implements no segment RPC
(``list_persistent_segments`` / ``list_loaded_segments`` / ``get_query_segment_info`` answer
UNIMPLEMENTED and ``get_collection_stats`` has only ``row_count``), so for a Lite database path
rwb counts the collection's sealed data segment files (``partitions/*/data/*.parquet``, one
per flushed segment) and for a Lite server URI the count is unavailable.

Rows: ``query(output_fields=["count(*)"])`` (every visible row, flushed or not). Knobs: ``ef``
for HNSW kinds (``[1, 4096]``; searched with ``max(ef, k)``, Milvus refuses ef < k on a
server), ``nprobe`` for IVF kinds (``[1, nlist]``); none for FLAT. Distances: ``L2`` (squared)
as rwb's; ``IP`` and ``COSINE`` similarities become ``-ip`` and ``1 - cos``.

Exact: Milvus has no per-request exact switch, so ``search_exact`` is rwb's own brute force
over the snapshot (:func:`~retrieval.indexes.live_util.exact_from_snapshot`). Snapshot:
``query_iterator`` over ``(id_field, vector_field)`` (primary-key order), rows before ``start``
skipped.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.engines.milvus.common import install_call_filter, quiet_pymilvus
from retrieval.errors import BackendError, ConfigError, NotReachable, RwbError, param_error
from retrieval.indexes.base import SearchResult
from retrieval.indexes.live import LiveDescription, LiveKnob
from retrieval.indexes.live_util import (
    LiveSection,
    check_expected,
    check_k,
    check_queries,
    check_search_params,
    exact_from_snapshot,
    label,
    one_line,
    pack_hits,
    parse_section,
)
from retrieval.redact import redact_uri

log = logging.getLogger(__name__)

METRIC = {"L2": "l2", "IP": "ip", "COSINE": "cosine"}
EF_MAX = 4096
#: queries per search call (Milvus costs a few ms per call)
QUERY_BATCH = 256
#: (uri, collection) -> handles of this process relying on a load rwb made (released by the
#: last one to close)
_LOADED: dict[tuple[str, str], int] = {}
_LOAD_LOCK = threading.RLock()


class MilvusLive(LiveSection):
    """``live:`` keys of a Milvus collection: ``uri`` (Milvus Lite path or server URI),
    ``collection``, ``vector_field``, ``id_field`` (INT64), optional ``token`` (a server's)."""

    uri: str
    collection: str
    vector_field: str
    id_field: str
    token: str | None = None


def _is_server(uri: str) -> bool:
    return re.match(r"^(https?|tcp|grpc|unix)://", uri) is not None


class MilvusLiveCollection:
    """A read-only handle on a Milvus collection (see the module docstring)."""

    def __init__(self, spec: MilvusLive, where: str | None) -> None:
        self.spec, self.where = spec, label(where, "milvus")
        self._params: dict[str, int] = {}
        self._loaded_here = False
        self._client = self._connect(spec)
        try:
            self._inspect(spec, where)
            check_expected(spec, self._dim, self.metric, spec.collection, where)
            self._ensure_loaded()
        except BaseException:
            self.close()
            raise

    # --- attach -----------------------------------------------------------------------------
    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            with quiet_pymilvus():
                return fn(*args, **kw)
        except RwbError:
            raise
        except Exception as exc:
            raise BackendError(f"{self.where}: Milvus {what} failed: "
                               f"{one_line(exc, self.spec.token)}") from None

    def _connect(self, spec: MilvusLive) -> Any:
        from pymilvus import MilvusClient

        install_call_filter()
        shown = redact_uri(spec.uri)
        if not _is_server(spec.uri) and not Path(spec.uri).exists():
            raise NotReachable(f"{self.where}: no Milvus Lite database at {shown!r} "
                               f"(live.uri); rwb does not create one")
        try:
            with quiet_pymilvus():
                if _is_server(spec.uri):
                    return MilvusClient(uri=spec.uri, token=spec.token or "", timeout=10,
                                        dedicated=True)
                return MilvusClient(str(Path(spec.uri)), timeout=10)
        except Exception as exc:
            hint = ("" if _is_server(spec.uri) else "; Milvus Lite locks a database per "
                    "process: serve it with `milvus-lite server` and attach by URI")
            raise NotReachable(f"{self.where}: cannot connect to Milvus at {shown!r}: "
                               f"{one_line(exc, spec.token)}{hint}") from None

    def _inspect(self, spec: MilvusLive, where: str | None) -> None:
        c = self._client
        names = self._call("list_collections", c.list_collections)
        if spec.collection not in names:
            raise param_error("live.collection", f"a collection at the URI "
                              f"({', '.join(sorted(names)) or 'none'})", spec.collection,
                              where=where)
        info = self._call("describe_collection", c.describe_collection, spec.collection)
        fields = {f["name"]: f for f in info.get("fields", [])}
        for key, name in (("live.vector_field", spec.vector_field),
                          ("live.id_field", spec.id_field)):
            if name not in fields:
                raise param_error(key, f"a field of '{spec.collection}' "
                                  f"({', '.join(fields)})", name, where=where)
        vtype = str(getattr(fields[spec.vector_field]["type"], "name",
                            fields[spec.vector_field]["type"]))
        if vtype != "FLOAT_VECTOR":
            raise param_error("live.vector_field", "a FLOAT_VECTOR field",
                              f"{spec.vector_field} ({vtype})", where=where)
        itype = str(getattr(fields[spec.id_field]["type"], "name", fields[spec.id_field]["type"]))
        if itype != "INT64":
            raise param_error("live.id_field", "an INT64 field (rwb needs int64 ids)",
                              f"{spec.id_field} ({itype})", where=where)
        self._dim = int(fields[spec.vector_field]["params"]["dim"])
        self._info = info
        self._index: dict[str, Any] | None = None
        names = self._call("list_indexes", c.list_indexes, spec.collection,
                           field_name=spec.vector_field)
        if names:
            self._index = dict(self._call("describe_index", c.describe_index, spec.collection,
                                          names[0]))
        mt = str((self._index or {}).get("metric_type", "L2")).upper()
        if mt not in METRIC:
            raise ConfigError(f"{self.where}: metric_type {mt!r} of '{spec.collection}' is "
                              f"not one rwb measures ({', '.join(METRIC)})")
        self.metric = METRIC[mt]

    def _ensure_loaded(self) -> None:
        """Load the collection when it is not; handles of this process share that load (the
        last one to close releases it)."""
        key = (self.spec.uri, self.spec.collection)
        with _LOAD_LOCK:
            if key in _LOADED:  # loaded by another handle of this process: share it
                _LOADED[key] += 1
                self._loaded_here = True
                return
            state = self._call("get_load_state", self._client.get_load_state,
                               self.spec.collection)
            if "NotLoad" in str(state.get("state")):
                log.info("%s: loading '%s' to search it (released again at close)",
                         self.where, self.spec.collection)
                self._call("load_collection", self._client.load_collection,
                           self.spec.collection)
                _LOADED[key] = 1
                self._loaded_here = True

    def _release(self, client: Any) -> None:
        key = (self.spec.uri, self.spec.collection)
        with _LOAD_LOCK:
            _LOADED[key] = _LOADED.get(key, 1) - 1
            if _LOADED[key] > 0:
                return
            del _LOADED[key]
            client.release_collection(self.spec.collection)

    # --- LiveCollection ---------------------------------------------------------------------
    def _kind(self) -> str:
        return str((self._index or {}).get("index_type", "")).upper()

    def describe(self) -> LiveDescription:
        """The collection as Milvus reports it (see the module docstring)."""
        got = self._call("query", self._client.query, self.spec.collection, filter="",
                         output_fields=["count(*)"])
        rows = int(got[0]["count(*)"])
        idx = self._index or {}
        build = {k: v for k, v in idx.items() if k not in {
            "index_type", "metric_type", "field_name", "index_name", "total_rows",
            "indexed_rows", "pending_index_rows", "state"}}
        segments, source = self._segments()
        details = {"uri": redact_uri(self.spec.uri),
                   "mode": "server" if _is_server(self.spec.uri) else "milvus-lite",
                   "metric_type": idx.get("metric_type"),
                   "indexed_rows": idx.get("indexed_rows"),
                   "pending_index_rows": idx.get("pending_index_rows"),
                   "loaded_by_rwb": self._loaded_here}
        return LiveDescription(engine="milvus", name=self.spec.collection, dim=self._dim,
                               metric=self.metric, index_kind=self._kind() or None,
                               build_params=build, rows=rows,
                               segments=segments,
                               details={**details, "partitions": self._info.get("num_partitions"),
                                        "segments_source": source})

    def _segments(self) -> tuple[int | None, str]:
        """(sealed segment count or None, how it was counted / why it is unavailable)."""
        if not _is_server(self.spec.uri):
            from retrieval.engines.milvus.lite import collection_dir, lite_files

            data, _ = lite_files(Path(self.spec.uri), self.spec.collection)
            if collection_dir(Path(self.spec.uri), self.spec.collection) is None:
                return None, (f"unavailable: Milvus Lite implements no segment RPC and no "
                              f"folder of '{self.spec.collection}' was found in the database")
            return len(data), ("Milvus Lite data segment files (partitions/*/data/*.parquet: "
                               "one per sealed segment; Lite implements no segment RPC)")
        try:
            with quiet_pymilvus():
                got = self._client.list_persistent_segments(self.spec.collection)
        except Exception as exc:
            why = one_line(exc, self.spec.token)
            if "UNIMPLEMENTED" in why.upper() or "not implemented" in why.lower():
                why = ("the server implements no segment RPC (Milvus Lite served by URI: "
                       "list_persistent_segments is UNIMPLEMENTED; attach the Lite database "
                       "path to count its segment files)")
            return None, f"unavailable: {why}"
        return len(got), "list_persistent_segments (sealed segments the server reports)"

    def knobs(self) -> tuple[LiveKnob, ...]:
        """``ef`` (HNSW kinds) or ``nprobe`` (IVF kinds, up to ``nlist``); none for FLAT."""
        kind = self._kind()
        if kind.startswith("HNSW") or kind == "AUTOINDEX":
            return (LiveKnob("ef", "ef", 1, EF_MAX, None),)
        if kind.startswith("IVF"):
            nlist = int((self._index or {}).get("nlist", 65536))
            return (LiveKnob("nprobe", "nprobe", 1, nlist, 8),)
        return ()

    def set_search_params(self, **params: Any) -> None:
        """Set knobs (names from :meth:`knobs`); an unknown or out-of-range one: ConfigError."""
        self._params.update(check_search_params(self.knobs(), params, self.where))

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        """Top-k with the current knobs as Milvus search params, ``QUERY_BATCH`` per call."""
        k = check_k(k, self.where)
        x = check_queries(queries, self._dim, self.where)
        params = dict(self._params)
        if "ef" in params:
            params["ef"] = max(params["ef"], k)
        hits: list[tuple[list[int], list[float]]] = []
        for s in range(0, len(x), QUERY_BATCH):
            res = self._call("search", self._client.search, collection_name=self.spec.collection,
                             data=x[s:s + QUERY_BATCH], limit=k,
                             anns_field=self.spec.vector_field,
                             output_fields=[self.spec.id_field],
                             search_params={"params": params})
            for row in res:
                sim = np.array([h["distance"] for h in row], dtype=np.float64)
                d = sim if self.metric == "l2" else (-sim if self.metric == "ip" else 1.0 - sim)
                hits.append(([int(h["entity"].get(self.spec.id_field, h.get("id")))
                              for h in row], d.tolist()))
        return pack_hits(hits, len(x), k)

    def search_exact(self, queries: np.ndarray, k: int) -> SearchResult:
        """rwb's brute force over the snapshot (Milvus has no per-request exact path)."""
        k = check_k(k, self.where)
        x = check_queries(queries, self._dim, self.where)
        return exact_from_snapshot(self, x, k, self.metric)  # type: ignore[arg-type]

    def iter_vectors(self, batch: int = 10_000, start: int = 0
                     ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(ids int64, vectors float32)`` batches from ``query_iterator``, from row ``start``."""
        if batch < 1 or start < 0:
            raise ConfigError(f"{self.where}: iter_vectors needs batch >= 1 and start >= 0; "
                              f"received batch={batch}, start={start}")
        it = self._call("query_iterator", self._client.query_iterator, self.spec.collection,
                        batch_size=min(batch, 16384), filter="",
                        output_fields=[self.spec.id_field, self.spec.vector_field])
        skip = start
        try:
            while True:
                rows = self._call("query_iterator.next", it.next)
                if not rows:
                    return
                if skip >= len(rows):
                    skip -= len(rows)
                    continue
                rows = rows[skip:]
                skip = 0
                ids = np.array([r[self.spec.id_field] for r in rows], dtype=np.int64)
                vecs = np.array([r[self.spec.vector_field] for r in rows], dtype=np.float32)
                yield ids, vecs.reshape(len(ids), self._dim)
        finally:
            with quiet_pymilvus():
                it.close()

    def close(self) -> None:
        """Release the collection if rwb loaded it, close the client."""
        c, self._client = getattr(self, "_client", None), None
        if c is None:
            return
        try:
            with quiet_pymilvus():
                if self._loaded_here:
                    self._release(c)
                c.close()
        except Exception as exc:  # closing is best effort
            log.debug("milvus live close: %s", one_line(exc, self.spec.token))


def attach(section: Mapping[str, Any], where: str | None = None) -> MilvusLiveCollection:
    """The engine descriptor's ``attach`` hook for Milvus."""
    return MilvusLiveCollection(parse_section(MilvusLive, section, where), where)


__all__ = ["MilvusLive", "MilvusLiveCollection", "attach"]
