"""Production queries for a live collection (``queries:`` / ``lab_queries:`` of a live spec).

- ``{log: FILE}``: ``.npy`` (float32 (n, dim)), ``.jsonl`` (one object a line: ``vector`` or
  ``text``, optional ``id``, ``ts``) or ``.parquet`` (the same columns); texts are embedded with
  ``model`` (:mod:`retrieval.embed`; default the packaged MiniLM);
- ``{otlp: DIR}``: OTLP JSON trace exports (``*.json`` / ``*.jsonl`` in DIR, or one file; an
  ``ExportTraceServiceRequest`` object a line, or a whole file): the text of every span with one
  of ``attributes`` (default :data:`~retrieval.live.spec.OTLP_ATTRIBUTES`: the OpenTelemetry
  GenAI retrieval span's ``gen_ai.retrieval.query.text``, OpenInference's ``input.value`` on
  spans whose ``openinference.span.kind`` is ``RETRIEVER``), in file then span order;
- ``{sample: N}``: N vectors drawn (seeded) from the collection itself through its snapshot:
  NOT production traffic (``not_production`` is True and every output says so).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import ConfigError, DataError, param_error
from retrieval.indexes.live import LiveCollection, SupportsSnapshot
from retrieval.live.spec import OTLP_ATTRIBUTES, QueriesSpec

log = logging.getLogger(__name__)

#: the label every output carries for queries sampled from the collection
NOT_PRODUCTION = "not production traffic (queries sampled from the collection itself)"


@dataclass(frozen=True)
class LiveQueries:
    """Query vectors float32 (n, dim) with the log's ``ids`` (str; the log's ``id`` or the line
    number) and ``ts`` (None where the log has none); ``source`` describes where they came
    from; ``not_production``: sampled from the collection itself."""

    vectors: np.ndarray
    ids: list[str]
    source: str
    not_production: bool = False
    ts: list[Any] = field(default_factory=list)
    texts: int = 0

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "n": int(self.vectors.shape[0]),
                               "not_production_traffic": self.not_production,
                               "embedded_texts": self.texts}
        if self.not_production:
            out["label"] = NOT_PRODUCTION
        return out


def resolve(path: str, base: Path | None) -> Path:
    """``path`` relative to the spec's folder (absolute paths as they are)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() or base is None else base / p


def _records_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: line {n} is not JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise DataError(f"{path}: line {n} must be an object with 'vector' or 'text'")
            obj.setdefault("id", str(n))
            out.append(obj)
    return out


def _records_parquet(path: Path) -> list[dict[str, Any]]:
    import pandas as pd

    frame = pd.read_parquet(path)
    rows = frame.to_dict("records")
    for n, r in enumerate(rows, 1):
        if r.get("id") is None:
            r["id"] = str(n)
    return rows


def _embed(texts: list[str], model: str | None) -> np.ndarray:
    from retrieval.embed.cache import get_embedder

    return np.asarray(get_embedder(model).embed(texts), dtype=np.float32)


def _from_records(rows: list[dict[str, Any]], path: Path, model: str | None
                  ) -> tuple[np.ndarray, list[str], list[Any], int]:
    if not rows:
        raise DataError(f"{path}: no queries in the log")
    has_vec = [r.get("vector") is not None for r in rows]
    has_text = [isinstance(r.get("text"), str) for r in rows]
    if all(has_vec):
        vecs = np.asarray([np.asarray(r["vector"], dtype=np.float32) for r in rows])
        texts = 0
    elif all(has_text):
        vecs = _embed([str(r["text"]) for r in rows], model)
        texts = len(rows)
    else:
        bad = next(i for i, (v, t) in enumerate(zip(has_vec, has_text)) if not (v or t))
        raise DataError(f"{path}: record {bad + 1} has neither 'vector' nor 'text' (every "
                        f"record needs one, all of the same kind)")
    return vecs, [str(r["id"]) for r in rows], [r.get("ts") for r in rows], texts


def _attr_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key in value:
            return value[key]
    return None


def _spans(doc: Any) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = []
    for rs in (doc or {}).get("resourceSpans", []) or []:
        for ss in (rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []):
            spans.extend(ss.get("spans", []) or [])
    return spans


def otlp_texts(path: Path, attributes: list[str] | None = None
               ) -> list[tuple[str, str, Any]]:
    """(span id, query text, start time ns) of every retrieval span in the OTLP JSON files at
    ``path`` (a folder or one file), in file and span order."""
    names = list(attributes or OTLP_ATTRIBUTES)
    files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl")) \
        if path.is_dir() else [path]
    out: list[tuple[str, str, Any]] = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        try:
            docs = [json.loads(text)]
        except json.JSONDecodeError:
            try:
                docs = [json.loads(line) for line in text.splitlines() if line.strip()]
            except json.JSONDecodeError as exc:
                raise DataError(f"{f}: not OTLP JSON (a whole-file object or one a line): "
                                f"{exc.msg}") from None
        for doc in docs:
            for span in _spans(doc):
                attrs = {a.get("key"): _attr_value(a.get("value"))
                         for a in span.get("attributes", []) or []}
                for name in names:
                    value = attrs.get(name)
                    if not isinstance(value, str) or not value:
                        continue
                    kind = attrs.get("openinference.span.kind")
                    if name == "input.value" and kind is not None and kind != "RETRIEVER":
                        continue  # OpenInference: only retriever spans carry a query
                    out.append((str(span.get("spanId", len(out))), value,
                                span.get("startTimeUnixNano")))
                    break
    return out


def sample_from(col: LiveCollection, n: int, seed: int, batch: int = 10_000) -> np.ndarray:
    """``n`` vectors of the collection at seeded positions of its snapshot order."""
    if not isinstance(col, SupportsSnapshot):
        raise ConfigError(f"queries.sample: the {col.describe().engine} adapter cannot stream "
                          f"its vectors; give a query log instead")
    rows = col.describe().rows
    if n > rows:
        raise param_error("queries.sample", f"<= the collection's rows ({rows})", n)
    want = np.sort(np.random.default_rng(seed).choice(rows, n, replace=False))
    out, at, j = [], 0, 0
    for _, vecs in col.iter_vectors(batch=batch):
        hi = at + vecs.shape[0]
        while j < n and want[j] < hi:
            out.append(vecs[want[j] - at])
            j += 1
        at = hi
        if j >= n:
            break
    return np.asarray(out, dtype=np.float32)


def load_queries(spec: QueriesSpec, col: LiveCollection, *, field: str = "queries",
                 base: Path | None = None, seed: int = 0) -> LiveQueries:
    """The queries ``spec`` names, checked against the collection's dimension (ConfigError
    naming the file otherwise)."""
    dim = col.describe().dim
    ts: list[Any] = []
    texts = 0
    if spec.sample is not None:
        vecs = sample_from(col, spec.sample, seed)
        ids = [f"sample-{i}" for i in range(vecs.shape[0])]
        source = f"sample of {spec.sample} from the collection"
    elif spec.otlp is not None:
        path = resolve(spec.otlp, base)
        if not path.exists():
            raise param_error(f"{field}.otlp", "an existing folder or file of OTLP JSON traces",
                              str(path))
        found = otlp_texts(path, spec.attributes)
        if not found:
            raise DataError(f"{path}: no span carries a query text (attributes tried: "
                            f"{', '.join(spec.attributes or OTLP_ATTRIBUTES)})")
        vecs = _embed([t for _, t, _ in found], spec.model)
        ids, ts, texts = [i for i, _, _ in found], [t for _, _, t in found], len(found)
        source = str(path)
    else:
        assert spec.log is not None
        path = resolve(spec.log, base)
        if not path.is_file():
            raise param_error(f"{field}.log", "an existing .npy, .jsonl or .parquet file",
                              str(path))
        suffix = path.suffix.lower()
        if suffix == ".npy":
            vecs = np.load(path, allow_pickle=False)
            ids = [str(i) for i in range(int(vecs.shape[0]))] if vecs.ndim == 2 else []
        elif suffix in (".jsonl", ".ndjson"):
            vecs, ids, ts, texts = _from_records(_records_jsonl(path), path, spec.model)
        elif suffix == ".parquet":
            vecs, ids, ts, texts = _from_records(_records_parquet(path), path, spec.model)
        else:
            raise param_error(f"{field}.log", "a .npy, .jsonl or .parquet file", str(path))
        source = str(path)
    vecs = np.asarray(vecs, dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape[1] != dim:
        raise ConfigError(f"{source}: field '{field}' must hold {dim}-dimensional vectors (the "
                          f"collection's dimension); received shape {tuple(vecs.shape)}")
    if not np.isfinite(vecs).all():
        raise DataError(f"{source}: query vectors contain NaN or inf")
    if spec.limit is not None:
        vecs, ids, ts = vecs[:spec.limit], ids[:spec.limit], ts[:spec.limit]
    return LiveQueries(vecs, ids, source, not_production=spec.not_production, ts=ts,
                       texts=texts)


__all__ = ["NOT_PRODUCTION", "LiveQueries", "load_queries", "otlp_texts", "resolve",
           "sample_from"]
