"""Filling a Redis semantic cache with labelled texts and their embeddings (shared by the
tuner, its verifier and the transfer check).

``embed_questions`` embeds the texts a design needs (cached on disk); ``fill_cache`` stores every
design text in load order, timing lookups at each ``latency.sizes`` on the way, and checks that
the index holds every entry written (a restart from a snapshot would lose some).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.cache.live import SemanticCache, time_lookups
from retrieval.cache.redis import RedisLost
from retrieval.cache.spec import CacheTuneSpec
from retrieval.cache.tune import ProbeDesign, QQPLabels
from retrieval.errors import BackendError

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class QidVectors:
    """Embeddings for a subset of question ids (rows looked up by qid)."""

    vectors: np.ndarray
    row_of: np.ndarray
    model_id: str

    def __getitem__(self, qids: np.ndarray) -> np.ndarray:
        rows = self.row_of[qids]
        if (rows < 0).any():
            raise KeyError("question ids without embeddings")
        return self.vectors[rows]

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])


def embed_questions(labels: QQPLabels, qids: np.ndarray, spec: CacheTuneSpec,
                    embedder: Any = None) -> QidVectors:
    """Embed the questions ``qids`` need. All of them: the canonical qid order (one cache entry
    shared by every run); a subset: sorted qids (cached per subset)."""
    from retrieval.embed import get_embedder

    emb = embedder or get_embedder(spec.embedder.model)
    need = np.unique(qids)
    if len(need) == labels.n_questions or _all_cached(emb, labels.questions):
        need = np.arange(labels.n_questions)
    vecs = emb.embed([labels.questions[i] for i in need], batch_size=spec.embedder.batch_size)
    norms = np.linalg.norm(vecs, axis=1)
    if not np.allclose(norms, 1.0, atol=1e-3):
        log.warning("embedder %s returns non-unit vectors; normalising", emb.model_id)
        vecs = vecs / np.maximum(norms[:, None], 1e-12)
    row_of = np.full(labels.n_questions, -1, dtype=np.int64)
    row_of[need] = np.arange(len(need))
    return QidVectors(np.ascontiguousarray(vecs, dtype=np.float32), row_of, emb.model_id)


def _all_cached(emb: Any, texts: list[str]) -> bool:
    """Whether a CachedEmbedder already holds every chunk of the full canonical list (then a
    subset is read from it instead of being embedded again)."""
    from retrieval.embed import CachedEmbedder

    if not isinstance(emb, CachedEmbedder):
        return False
    step = emb.chunk_size
    return all(emb.path_for(texts[i: i + step]).is_file() for i in range(0, len(texts), step))


def _wait_indexed(cache: SemanticCache, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = cache.call("the fill", cache._index.info)
        if int(info.get("indexing", 0)) == 0 and float(info.get("percent_indexed", 1)) >= 1:
            return
        time.sleep(0.05)
    raise BackendError(f"Redis at {cache.url}: index still building after {timeout_s:g} s")


def fill_cache(cache: SemanticCache, labels: QQPLabels, design: ProbeDesign, vecs: QidVectors,
               spec: CacheTuneSpec, *, time_sizes: bool = True) -> tuple[float, dict[str, Any]]:
    """Store every design question (in load order); time lookups at each latency size.
    Returns (load seconds, latency per size). An outage (retries spent) or a restart is a
    :class:`RedisLost` of phase "the fill" with the entries written before it."""
    stored = design.stored
    lat = spec.latency
    stages = [s for s in lat.sizes if s <= len(stored)] if time_sizes else []
    latency: dict[str, Any] = {str(s): {"skipped": f"only {len(stored)} entries stored"}
                               for s in lat.sizes if s > len(stored) and time_sizes}
    load_s, done = 0.0, 0
    try:
        for stop in [*stages, len(stored)]:
            if stop > done:
                chunk = stored[done:stop]
                t0 = time.perf_counter()
                try:
                    n = cache.store_many([labels.questions[i] for i in chunk],
                                         [str(i) for i in chunk], vecs[chunk],
                                         ids=[str(i) for i in chunk],
                                         batch_size=spec.cache.load_batch)
                except RedisLost as exc:
                    exc.written = done + (exc.written or 0)
                    raise
                if n != len(chunk):
                    raise BackendError(f"Redis at {cache.url}: stored {n} of {len(chunk)} "
                                       f"entries")
                done = stop
                _wait_indexed(cache)
                load_s += time.perf_counter() - t0
            if stop in stages:
                pool = stored[stop: stop + lat.queries]
                source = "questions not yet stored"
                if len(pool) < min(lat.queries, 10):
                    pool, source = design.probes[: lat.queries], "probes (stored)"
                res = time_lookups(cache, vecs[pool], lat.warmup, lat.threshold.threshold())
                latency[str(stop)] = {**res, "entries": stop, "query_source": source,
                                      "index": cache.params.algorithm}
                log.info("lookup latency at %d entries: p50 %.3f ms, p99 %.3f ms", stop,
                         res["p50_ms"], res["p99_ms"])
        _check_kept(cache, done)
    except RedisLost as exc:
        exc.phase = "the fill"
        exc.written = done if exc.written is None else exc.written
        raise
    return load_s, latency


def _check_kept(cache: SemanticCache, written: int) -> None:
    """The index holds every entry written (a server that restarted from a snapshot in the
    middle could have kept the index but lost entries). Skipped with a TTL (entries expire)."""
    if cache.params.ttl_s is not None:
        return
    held = cache.size()
    if held != written:
        raise RedisLost(cache.url, "the fill", f"lost entries (the index holds {held:,} of "
                        f"the {written:,} written; restarted?)", written=written)


__all__ = ["QidVectors", "embed_questions", "fill_cache"]
