"""The live pipeline of ``rwb profile``: the stages built from rwb's own pieces and one request
run through them, timed per stage.

- embed: an uncached embedder (:func:`retrieval.embed.make_embedder`), one ``embed([query])``;
- cache: :class:`retrieval.cache.live.SemanticCache` (Redis), lookup before the retrieval; a
  miss's final list is stored after the request has ended (off the request's clock);
- retrieve + fuse: the fan-out bench's :class:`~retrieval.bench.fanout.retriever.FanOut` over the
  collections' indexes (built by its :func:`~retrieval.bench.fanout.prepare.build_members`),
  serial or threads, per-collection deadline; fusion timed on its own;
- bm25: :class:`retrieval.rerank.bm25.BM25Index` over one collection's texts, used when the dense
  path returns fewer than ``min_results`` results;
- rerank: :class:`retrieval.rerank.rerankers.CrossEncoderReranker` over the fused top-``depth``.

Collection spans: the fan-out reports each collection's call time; in serial mode the calls ran
one after another from the stage's start, in threads mode all from the stage's start (the
submission takes microseconds). Times: ``perf_counter_ns``; durations in ms.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bench.fanout.retriever import CollectionAnswer, FanOut, Member
from retrieval.data import normalize_rows
from retrieval.errors import ConfigError, DataError
from retrieval.profiling.spec import ProfileCollection, ProfileSpec
from retrieval.profiling.stats import RequestRecord, SpanRecord
from retrieval.profiling.trace import Tracing

log = logging.getLogger(__name__)

OP = "gen_ai.operation.name"


class TimedFanOut(FanOut):
    """The fan-out with its fusion timed (``fuse_ns``: start and end of the last fusion)."""

    fuse_ns: tuple[int, int] = (0, 0)

    def fuse(self, answers: Mapping[str, CollectionAnswer]) -> list[tuple[str, float]]:
        t0 = time.perf_counter_ns()
        out = super().fuse(answers)
        self.fuse_ns = (t0, time.perf_counter_ns())
        return out


@dataclass(frozen=True)
class Query:
    id: str
    text: str


@dataclass(frozen=True)
class QuerySet:
    """The requests: queries in order, and the relevant doc keys per query id (qrels, keyed like
    the fused lists: ``<namespace>/<doc id>``) when known."""

    queries: tuple[Query, ...]
    relevant: dict[str, dict[str, int]] | None
    origin: str


def read_queries_file(path: Path | str) -> list[Query]:
    """Logged queries: ``.jsonl`` (one ``{"id": ..., "text": ...}`` per line; ``query`` is
    accepted for ``text``) or plain text (one query per line). Per-query filters are refused:
    the profile's retrieval stage does not apply filters yet."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--queries '{p}': no such file")
    out: list[Query] = []
    lines = p.read_text(encoding="utf-8").splitlines()
    if p.suffix == ".jsonl":
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{p}:{n}: not JSON ({exc.msg})") from None
            text = row.get("text", row.get("query")) if isinstance(row, dict) else None
            if not isinstance(text, str) or not text.strip():
                raise DataError(f"{p}:{n}: field 'text' must be a non-empty string; "
                                f"received {text!r}")
            if row.get("filter") is not None:
                raise ConfigError(f"{p}:{n}: field 'filter': per-query filters are not "
                                  f"supported by rwb profile yet; remove them")
            out.append(Query(str(row.get("id", n)), text))
    else:
        out = [Query(str(n), t) for n, t in enumerate(lines, 1) if t.strip()]
    if not out:
        raise DataError(f"--queries '{p}': no queries")
    return out


def load_queries(spec: ProfileSpec, queries_file: Path | str | None) -> QuerySet:
    """The queries file, or ``spec.queries`` (a built-in text collection's queries, sampled with
    the spec's seed, with its qrels for the collections that hold its corpus)."""
    if queries_file is not None:
        return QuerySet(tuple(read_queries_file(queries_file)), None, str(queries_file))
    from retrieval.bench.fanout.spec import ALIASES
    from retrieval.loaders.catalog import load_text_collection

    qs = spec.queries
    coll = load_text_collection(ALIASES.get(qs.source, qs.source), split=qs.split)
    items = [(q, t) for q, t in coll.queries.items() if t.strip()]
    if not items:
        raise ConfigError(f"{spec.source}: field 'queries.source': '{coll.name}' has no queries")
    if qs.n is not None and qs.n > len(items):
        raise ConfigError(f"{spec.source}: field 'queries.n' must be <= {len(items)} (queries "
                          f"of '{coll.name}'); received {qs.n}")
    pick = np.arange(len(items))  # the fan-out bench's sample: seed + 1, order kept
    if qs.n is not None and qs.n < len(items):
        pick = np.sort(np.random.default_rng(spec.seed + 1).choice(len(items), size=qs.n,
                                                                   replace=False))
    chosen = tuple(Query(items[i][0], items[i][1]) for i in pick)
    src = ALIASES.get(qs.source, qs.source)
    holders = [c.namespace or c.name for c in spec.retrieval.collections
               if ALIASES.get(c.source, c.source) == src]
    relevant = None
    if holders:
        relevant = {q.id: {f"{h}/{d}": g for h in dict.fromkeys(holders)
                           for d, g in coll.qrels.get(q.id, {}).items() if g > 0}
                    for q in chosen}
    return QuerySet(chosen, relevant, f"{coll.name}:{qs.split}")


def resolve_exports(spec: ProfileSpec, dim: int) -> list[ProfileCollection]:
    """The collections with ``export: FILE`` replaced by the backend + build + search that the
    file's engine config means (the engine's inverse, as ``rwb verify`` reads it)."""
    out = []
    for i, c in enumerate(spec.retrieval.collections):
        if c.export is None:
            out.append(c)
            continue
        rb = rebuilt_from_export(spec, c.export, dim, f"retrieval.collections[{i}].export")
        out.append(c.model_copy(update={"backend": rb.backend, "build": rb.build,
                                        "search": rb.search}))
    return out


def rebuilt_from_export(spec: ProfileSpec, path: str, dim: int, field_name: str) -> Any:
    from retrieval.exporting.files import read_config
    from retrieval.exporting.inverse import inverse_for

    p = spec.resolve(path)
    if not p.is_file():
        raise ConfigError(f"{spec.source}: field '{field_name}': no such file '{p}'")
    doc = read_config(p)
    engine = doc.get("engine")
    inv = inverse_for(str(engine))
    if inv is None or not isinstance(doc.get("config"), Mapping):
        raise ConfigError(f"{p}: engine {engine!r} is not one rwb runs (or no 'config' "
                          f"mapping); profile needs a config of an engine rwb can build")
    return inv(doc["config"], "cosine", dim, spec.k, str(p))


@dataclass
class Pipeline:
    """The built stages; :meth:`request` runs one query through them."""

    spec: ProfileSpec
    embedder: Any
    fan: TimedFanOut
    texts: dict[str, str]
    mode: str
    k: int
    reranker: Any = None
    rerank_depth: int = 0
    bm25: Any = None  # (BM25Index, keys, min_results)
    cache: Any = None
    cache_threshold: float | None = None
    tracing: Tracing | None = None
    backends: dict[str, str] = field(default_factory=dict)
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: queries embedded together (the batched-embedding remedy; 1: one call per request)
    embed_batch: int = 1

    def _vector(self, text: str) -> np.ndarray:
        return normalize_rows(self.embedder.embed([text], batch_size=1))[0]

    def embed_batch_of(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """The vectors of ``texts`` from one embedding call, and that call's duration (ns)."""
        a = time.perf_counter_ns()
        vecs = normalize_rows(self.embedder.embed(list(texts), batch_size=len(texts)))
        return vecs, time.perf_counter_ns() - a

    def request(self, index: int, qid: str, text: str,
                pre: tuple[np.ndarray, int, int] | None = None) -> RequestRecord:
        """One request end to end, each stage timed (``perf_counter_ns``). ``pre``: the query's
        vector from a batched embedding call, that call's duration (ns) and its batch size: the
        request starts when its batch's embedding started, so it pays the whole call (the
        embed span is the call), and its later stages run as usual."""
        now = time.perf_counter_ns
        spans: list[SpanRecord] = []
        if pre is None:
            t0 = now()
            vec = self._vector(text)
            t1 = now()
            batch = 1
        else:
            vec, took, batch = pre
            t1 = now()
            t0 = t1 - took
        spans.append(SpanRecord("embed", f"embeddings {self.embedder.model_id}", t0, t1, None,
                                {OP: "embeddings", "gen_ai.request.model":
                                 self.embedder.model_id,
                                 "gen_ai.embeddings.dimension.count": int(vec.shape[0]),
                                 "rwb.embed.batch": batch}))
        ranked: list[str] | None = None
        hit: bool | None = None
        cached_from = None
        if self.cache is not None:
            from retrieval.cache.thresholds import Threshold

            a = now()
            lk = self.cache.lookup(text, vector=vec,
                                   threshold=Threshold(float(self.cache_threshold or 0.0)))
            b = now()
            hit = bool(lk.hit)
            attrs: dict[str, Any] = {"rwb.cache.hit": hit,
                                     "rwb.cache.threshold": float(self.cache_threshold or 0)}
            if lk.hit and lk.response:
                got = json.loads(lk.response)
                ranked, cached_from = list(got["ranked"]), got.get("qid")
                attrs["rwb.cache.distance"] = float(lk.distance or 0.0)
            spans.append(SpanRecord("cache", "rwb.cache.lookup", a, b, None, attrs))
        fallback = False
        if ranked is None:
            ranked, fallback = self._retrieve(text, vec, spans)
        end = now()
        rec_trace = None
        if self.tracing is not None:
            rec_trace, end = self.tracing.emit(
                "rwb.request", t0, spans,
                {"rwb.query.id": qid, "rwb.request.index": index, "rwb.mode": self.mode,
                 "gen_ai.request.top_k": self.k, "rwb.cache.hit": bool(hit)})
        final = tuple(ranked[: self.k])
        if self.cache is not None and not hit:
            self.cache.store(text, json.dumps({"ranked": list(final), "qid": qid}), vector=vec)
        return RequestRecord(index, qid, t0, end, tuple(spans), final, rec_trace, hit,
                             cached_from, fallback)

    def _retrieve(self, text: str, vec: np.ndarray,
                  spans: list[SpanRecord]) -> tuple[list[str], bool]:
        now = time.perf_counter_ns
        a = now()
        ans = self.fan.search(vec, self.mode)  # type: ignore[arg-type]
        f0, f1 = self.fan.fuse_ns
        spans.append(SpanRecord("retrieve", "retrieval", a, f0, None,
                                {OP: "retrieval", "gen_ai.request.top_k": self.fan.k,
                                 "rwb.mode": self.mode,
                                 "rwb.collections": len(self.fan.members)}))
        start = a
        for m in self.fan.members:
            ca = ans.answers[m.name]
            s0 = start if self.mode == "serial" else a
            s1 = s0 + int(ca.ms * 1e6)
            attrs: dict[str, Any] = {OP: "retrieval", "gen_ai.data_source.id": m.name,
                                     "gen_ai.request.top_k": self.fan.k,
                                     "rwb.backend": self.backends.get(m.name, m.backend),
                                     "rwb.results": len(ca.ranked)}
            for key, val in self.knobs.get(m.name, {}).items():
                attrs[f"rwb.knob.{key}"] = val
            if ca.error is not None:
                attrs["rwb.error"] = ca.error
                attrs["rwb.timed_out"] = ca.timed_out
            spans.append(SpanRecord(f"retrieve/{m.name}", f"retrieval {m.name}", s0, s1,
                                    "retrieve", attrs))
            start = s1
        spans.append(SpanRecord("fuse", "rwb.fuse", f0, f1, None,
                                {"rwb.fusion.method": self.fan.fusion,
                                 "rwb.results": len(ans.fused)}))
        ranked = [d for d, _ in ans.fused]
        fallback = False
        if self.bm25 is not None and len(ranked) < self.bm25[2]:
            idx, keys, _ = self.bm25
            b0 = now()
            hits = idx.search([text], self.fan.k)
            ranked = [keys[int(j)] for j in hits.doc_idx[0] if j >= 0]
            b1 = now()
            fallback = True
            spans.append(SpanRecord("bm25", "retrieval bm25", b0, b1, None,
                                    {OP: "retrieval", "gen_ai.data_source.id": "bm25",
                                     "rwb.fallback": True, "rwb.results": len(ranked)}))
        if self.reranker is not None and ranked:
            from retrieval.rerank.rerankers import score_passages

            r0 = now()
            cand = ranked[: self.rerank_depth]
            scores = score_passages(self.reranker, text, [self.texts.get(c, "") or " "
                                                          for c in cand])
            order = np.argsort(-scores, kind="stable")
            ranked = [cand[int(i)] for i in order] + ranked[self.rerank_depth:]
            r1 = now()
            spans.append(SpanRecord("rerank", "rwb.rerank", r0, r1, None,
                                    {"gen_ai.request.model": getattr(self.reranker, "name", ""),
                                     "rwb.rerank.depth": self.rerank_depth,
                                     "rwb.rerank.candidates": len(cand)}))
        return ranked, fallback


@dataclass
class Built:
    """What :func:`build_pipeline` made, for remedies to change: the pipeline, the members and
    the collections' facts."""

    pipeline: Pipeline
    members: list[Member]
    facts: list[dict[str, Any]]
    collections: list[ProfileCollection]


@contextlib.contextmanager
def build_pipeline(spec: ProfileSpec, workdir: Path,
                   tracing: Tracing | None = None) -> Iterator[Built]:
    """Embed and index the collections (through the fan-out bench's preparation), load the
    embedder, reranker, BM25 and cache; close everything after."""
    from retrieval.bench.fanout.prepare import build_members, prepare_collections
    from retrieval.bench.fanout.spec import ALIASES, FanoutSpec, validate_fanout_spec
    from retrieval.embed import make_embedder
    from retrieval.loaders.catalog import load_text_collection

    embedder = make_embedder(spec.embed.model, spec.embed.runtime)
    dim = int(embedder.dim)
    cols = resolve_exports(spec, dim)
    k_retrieve = max(spec.k, spec.rerank.depth if spec.rerank else 0,
                     spec.remedies.rerank_depth or 0)
    fs = FanoutSpec(name=spec.name, model=spec.embed.model, k=k_retrieve, seed=spec.seed,
                    threads=spec.threads, modes=[spec.retrieval.mode], warmup=0,
                    timeout_s=spec.retrieval.timeout_s, fusion=spec.fusion.method,
                    rrf_k=spec.fusion.rrf_k,
                    collections=[c.model_dump(exclude={"export"}) for c in cols],
                    source=spec.source)
    fs = validate_fanout_spec(fs)
    prepared = prepare_collections(fs)
    texts: dict[str, str] = {}
    corpora: dict[str, list[str]] = {}
    for p in prepared:
        corpus = load_text_collection(ALIASES.get(p.spec.source, p.spec.source)).corpus
        prefix = f"{p.spec.namespace or p.spec.name}/"
        corpora[p.spec.name] = [corpus[d] for d in p.doc_ids]
        for d in p.doc_ids:
            texts[prefix + d] = corpus[d]
    with contextlib.ExitStack() as stack:
        members, facts = stack.enter_context(build_members(fs, prepared, workdir))
        fan = TimedFanOut(members, k_retrieve, timeout_s=spec.retrieval.timeout_s,
                          fusion=spec.fusion.method, rrf_k=spec.fusion.rrf_k)
        stack.callback(fan.close)
        pipe = Pipeline(spec, embedder, fan, texts, spec.retrieval.mode, spec.k,
                        tracing=tracing,
                        backends={c.name: c.backend for c in cols},
                        knobs={c.name: dict(c.search) for c in cols})
        if spec.rerank is not None:
            pipe.reranker = make_reranker(spec.rerank.model, workdir, spec.rerank.batch_size)
            pipe.rerank_depth = spec.rerank.depth
        if spec.bm25 is not None:
            pipe.bm25 = make_bm25(spec.bm25.collection, cols, prepared, corpora,
                                  spec.bm25.min_results)
        if spec.cache is not None:
            pipe.cache = stack.enter_context(open_cache(spec.cache.redis_url, dim, spec.name))
            pipe.cache_threshold = spec.cache.threshold
        yield Built(pipe, members, facts, cols)


def make_reranker(model: str, workdir: Path, batch_size: int) -> Any:
    from retrieval.rerank.rerankers import CrossEncoderReranker

    path: str | Path = model
    if model == "tiny":
        from retrieval.testing.tiny_reranker import make_tiny_cross_encoder

        path = make_tiny_cross_encoder(workdir / "tiny-cross-encoder")
    rr = CrossEncoderReranker(path, batch_size=batch_size)
    rr.score("warm up", ["load the model now"])  # loading is not a request's cost
    return rr


def make_bm25(name: str, cols: Sequence[ProfileCollection], prepared: Sequence[Any],
              corpora: Mapping[str, list[str]], min_results: int) -> tuple[Any, list[str], int]:
    from retrieval.rerank.bm25 import BM25Index

    col = next(c for c in cols if c.name == name)
    prep = next(p for p in prepared if p.spec.name == name)
    idx = BM25Index().build(corpora[name])
    keys = [f"{col.namespace or col.name}/{d}" for d in prep.doc_ids]
    return idx, keys, min_results


@contextlib.contextmanager
def open_cache(redis_url: str | None, dim: int, run_name: str) -> Iterator[Any]:
    """A fresh semantic cache of this run (an exclusive name; dropped after)."""
    import os
    import uuid

    from retrieval.cache.live import SemanticCache
    from retrieval.cache.thresholds import Threshold

    url = redis_url or os.environ.get("REDIS_URL")
    if not url:
        raise ConfigError("the pipeline's cache stage needs Redis with vector search: set "
                          "cache.redis_url or REDIS_URL (python -m retrieval.services."
                          "redis_server start prints one)")
    name = f"rwb-profile-{uuid.uuid4().hex[:10]}"
    cache = SemanticCache(url, Threshold(0.1), dim=dim, name=name, exclusive=True)
    try:
        yield cache
    finally:
        try:
            cache.drop()
        finally:
            cache.close()


__all__ = ["Built", "Pipeline", "Query", "QuerySet", "TimedFanOut", "build_pipeline",
           "load_queries", "open_cache", "read_queries_file"]
