"""Semantic-cache lookups as a load target (``cache:`` section of a ``rwb bench load`` spec).

A real Redis (``$REDIS_URL`` or ``--redis-url``, else a private server rwb starts) holds a
redisvl ``SemanticCache`` filled with ``entries`` base vectors of the spec's dataset (unit-norm);
each request looks up one query vector (vector given: embedding is not part of the lookup). The
answer's score is 1.0 when it equals what an unloaded sequential pass got for that query (hit key
or miss), else 0.0: load must not change answers. Built here (the cache layer) and handed to the
load harness by the CLI, since bench and cache are sibling layers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from retrieval.cache.redis import IndexParams
from retrieval.cache.thresholds import ThresholdSpec
from retrieval.data import VectorDataset, normalize_rows
from retrieval.params import Params
from retrieval.specfile import validate_model


class CacheLoad(Params):
    """``entries``: base vectors stored; ``threshold``: the lookup threshold (cosine distance
    unless ``unit`` says otherwise); ``index``: the cache's vector index; ``name``: its key
    prefix and index name (dropped at the end)."""

    entries: int = Field(2000, ge=1, le=10_000_000)
    threshold: ThresholdSpec = ThresholdSpec(value=0.2)
    index: IndexParams = IndexParams()
    name: str = Field("rwb-load-cache", pattern=r"^[A-Za-z0-9_.-]+$")


def parse_cache_load(data: Any, source: str) -> CacheLoad:
    """The ``cache`` section validated (errors name the file and ``cache.<field>``)."""
    return validate_model(CacheLoad, dict(data or {}), source=source, prefix="cache.")


@dataclass(frozen=True)
class LookupTarget:
    """What the load clients call: ``call(qi)`` one lookup, ``score(qi, raw)`` its agreement."""

    name: str
    nq: int
    call: Callable[[int], Any]
    score: Callable[[int, Any], float]
    acall: None = None


def _wait_indexed(cache: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = cache.call("the fill", cache._index.info)
        if int(info.get("indexing", 0)) == 0 and float(info.get("percent_indexed", 1)) >= 1:
            return
        time.sleep(0.05)


@contextlib.contextmanager
def lookup_target(cfg: CacheLoad, ds: VectorDataset, n_queries: int | None,
                  redis_url: str | None) -> Iterator[tuple[LookupTarget, dict[str, Any]]]:
    """A filled cache on the real Redis as a load target (see the module docstring); the
    cache's index and entries are dropped at the end."""
    from retrieval.cache.live import SemanticCache
    from retrieval.cache.run import redis_for_run

    n = min(cfg.entries, ds.n_base)
    base = normalize_rows(np.ascontiguousarray(ds.base[:n], dtype=np.float32))
    m = ds.n_queries if n_queries is None else min(n_queries, ds.n_queries)
    queries = normalize_rows(np.ascontiguousarray(ds.queries[:m], dtype=np.float32))
    thr = cfg.threshold.threshold()
    with redis_for_run(redis_url) as (url, redis_facts):
        cache = SemanticCache(url, thr, dim=ds.dim, name=cfg.name, index=cfg.index,
                              exclusive=True, on_outage="raise")
        try:
            stored = cache.store_many([f"doc-{i}" for i in range(n)],
                                      [f"r{i}" for i in range(n)], base,
                                      ids=[str(i) for i in range(n)])
            _wait_indexed(cache)
            baseline = [cache.lookup("", vector=q).key for q in queries]

            def call(qi: int) -> Any:
                return cache.lookup("", vector=queries[qi])

            def score(qi: int, raw: Any) -> float:
                return 1.0 if raw.key == baseline[qi] else 0.0

            label = f"semantic-cache ({cfg.index.algorithm}, {stored} entries)"
            facts = {"label": label, "backend": "redis-semantic-cache", "server": True,
                     "entries": stored, "threshold": thr.to_dict(),
                     "index": cfg.index.model_dump(mode="json"), "queries": m,
                     "redis": redis_facts,
                     "hit_fraction_unloaded": float(np.mean([b is not None for b in baseline])),
                     "recall_definition": "answer agreement with an unloaded sequential pass"}
            yield LookupTarget(label, m, call, score), facts
        finally:
            with contextlib.suppress(Exception):
                cache.drop()
            cache.close()


__all__ = ["CacheLoad", "LookupTarget", "lookup_target", "parse_cache_load"]
