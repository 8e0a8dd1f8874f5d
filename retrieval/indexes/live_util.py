"""Helpers shared by the engines' live attach adapters (``retrieval/engines/<e>/live.py``).

- :class:`LiveSection`: the base pydantic model of a ``live:`` section (``extra="forbid"``;
  ``engine`` plus the optional expectations ``dim`` / ``metric``: a collection that differs is
  refused in one line before any other work);
- :func:`parse_section`: one ConfigError line naming ``live.<field>`` (passwords redacted);
- :func:`check_expected`, :func:`check_queries`, :func:`check_search_params`;
- :func:`exact_from_snapshot`: the exact top-k computed by rwb from a snapshot stream (for the
  engines without a per-request exact path: Milvus, Redis), in float64 with rwb's tie rule
  (ascending distance, then ascending id; :mod:`retrieval.groundtruth.live`);
- :func:`pack_hits`: per-query ``(ids, distances)`` lists as a padded :class:`SearchResult`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from retrieval.data import Metric, as_matrix
from retrieval.errors import ConfigError, RwbError, param_error, unknown_name_error
from retrieval.groundtruth.live import brute_force_live
from retrieval.indexes.base import SearchResult
from retrieval.indexes.live import LiveDescription, LiveKnob, SupportsSnapshot
from retrieval.params import validate_params
from retrieval.redact import redact_text

M = TypeVar("M", bound="LiveSection")


class LiveSection(BaseModel):
    """Keys every engine's ``live:`` section takes: ``engine``, and optionally the ``dim`` and
    ``metric`` (``l2`` | ``ip`` | ``cosine``) the user expects (checked against the engine's own
    description; a mismatch is a ConfigError)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str
    dim: int | None = None
    metric: Literal["l2", "ip", "cosine"] | None = None


def parse_section(model: type[M], section: Mapping[str, Any], where: str | None) -> M:
    """``section`` validated by ``model``; a one-line ConfigError (``live.<field>``, secrets
    redacted) otherwise."""
    try:
        return validate_params(model, section, where=where, prefix="live.")
    except ConfigError as exc:
        raise ConfigError(redact_text(str(exc))) from None


def label(where: str | None, engine: str) -> str:
    """The message prefix of an attached collection: ``<spec>: live (<engine>)``."""
    return f"{where}: live ({engine})" if where else f"live ({engine})"


def check_expected(spec: LiveSection, dim: int, metric: str, name: str,
                   where: str | None) -> None:
    """Refuse a collection whose dimension / metric differs from what the section expects."""
    if spec.dim is not None and spec.dim != dim:
        raise param_error("live.dim", f"{dim} (the dimension of '{name}')", spec.dim,
                          where=where)
    if spec.metric is not None and spec.metric != metric:
        raise param_error("live.metric", f"'{metric}' (the metric of '{name}')", spec.metric,
                          where=where)


def check_queries(queries: np.ndarray, dim: int, what: str) -> np.ndarray:
    """Queries as float32 (nq, dim); a wrong dimension is a ConfigError naming both."""
    q = np.asarray(queries)
    if q.ndim == 1:
        q = q[None, :]
    if q.ndim == 2 and q.shape[1] != dim:
        raise ConfigError(f"{what}: queries have dimension {q.shape[1]}; the collection's "
                          f"vectors have {dim}")
    return np.ascontiguousarray(as_matrix(q, f"{what} queries", dim=dim), dtype=np.float32)


def check_k(k: int, what: str) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise param_error("k", "an integer >= 1", k, where=what)
    return int(k)


def check_search_params(knobs: Sequence[LiveKnob], params: Mapping[str, Any],
                        what: str) -> dict[str, int]:
    """Search params as integers within each knob's range; an unknown name lists the knobs."""
    by_name = {kb.name: kb for kb in knobs}
    out: dict[str, int] = {}
    for name, value in params.items():
        kb = by_name.get(name)
        if kb is None:
            if not by_name:
                raise ConfigError(f"{what}: search param '{name}' received, but this "
                                  f"collection has no search-time knob")
            raise unknown_name_error("search param", name, by_name, where=what)
        if (isinstance(value, bool) or not isinstance(value, int | np.integer)
                or not kb.low <= int(value) <= kb.high):
            raise param_error(name, f"an integer in [{kb.low}, {kb.high}]", value, where=what)
        out[name] = int(value)
    return out


def pack_hits(hits: Iterable[tuple[Sequence[int], Sequence[float]]], nq: int,
              k: int) -> SearchResult:
    """Per-query ``(ids, rwb distances)`` (already ascending) as (nq, k) arrays: ids -1 and
    distances +inf past what the engine returned."""
    ids = np.full((nq, k), -1, dtype=np.int64)
    dist = np.full((nq, k), np.inf, dtype=np.float32)
    for r, (i, d) in enumerate(hits):
        m = min(len(i), k)
        if m:
            ids[r, :m] = np.asarray(i[:m], dtype=np.int64)
            dist[r, :m] = np.asarray(d[:m], dtype=np.float64)
    return SearchResult(ids=ids, distances=dist)


def exact_from_snapshot(snap: SupportsSnapshot, queries: np.ndarray, k: int, metric: Metric,
                        batch: int = 20_000) -> SearchResult:
    """The exact top-k of ``queries`` (float32 (nq, dim)) over every vector the snapshot streams,
    in rwb's distances (lower is closer; float64 inside) with ties broken by ascending id. Holds
    one batch and nq x 2k candidates in memory."""
    nq = queries.shape[0]
    best_d = np.full((nq, 0), np.inf)
    best_i = np.full((nq, 0), -1, dtype=np.int64)
    for ids, vecs in snap.iter_vectors(batch=batch):
        if len(ids) == 0:
            continue
        gt = brute_force_live(queries, vecs, ids, metric, k)
        d = np.hstack([best_d, gt.distances.astype(np.float64)])
        i = np.hstack([best_i, gt.ids])
        d = np.where(i < 0, np.inf, d)
        i = np.where(i < 0, np.iinfo(np.int64).max, i)
        order = np.lexsort((i, d), axis=-1)[:, :k]
        best_d, best_i = np.take_along_axis(d, order, 1), np.take_along_axis(i, order, 1)
        best_i = np.where(np.isinf(best_d), -1, best_i)
    return pack_hits(((best_i[r][best_i[r] >= 0], best_d[r][best_i[r] >= 0])
                      for r in range(nq)), nq, k)


def described(desc: LiveDescription) -> dict[str, Any]:
    """A description as a JSON-safe mapping (for logs and reports)."""
    return {"engine": desc.engine, "name": desc.name, "dim": desc.dim, "metric": desc.metric,
            "index_kind": desc.index_kind, "build_params": dict(desc.build_params),
            "rows": desc.rows, "segments": desc.segments, "details": dict(desc.details),
            "untested": desc.untested}


def one_line(exc: BaseException, *secrets: str | None) -> str:
    """An engine client's error as one short line, with any secret text masked."""
    text = " ".join(str(exc).split())[:300]
    if isinstance(exc, RwbError):
        return redact_text(text)
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return redact_text(f"{type(exc).__name__}: {text}")


__all__ = ["LiveSection", "check_expected", "check_k", "check_queries", "check_search_params",
           "described", "exact_from_snapshot", "label", "one_line", "pack_hits",
           "parse_section"]
