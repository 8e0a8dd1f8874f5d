"""``rwb profile``: the pipeline run one request at a time (per-stage percentiles, shares of the
end-to-end percentiles, tail attribution, quality, p99 exemplars), at open-loop rates (the load
bench's coordinated-omission-corrected percentiles), and with ``remedies`` after each remedy,
cumulatively (the measured waterfall); and its run directory.

Run directory: spec.yaml, manifest.json, summary.json (``stages``, ``tail``, ``quality``,
``cache``, ``exemplars``, ``load``, ``remedies``, ``compare``), spans.parquet (every span's
duration: pass, request, query, trace id, stage, parent, start offset and ms), requests.parquet
(one row per request and pass). Durations in ms.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.paths import rwb_tempdir
from retrieval.profiling.pipeline import Built, Pipeline, QuerySet, build_pipeline, load_queries
from retrieval.profiling.spec import ProfileSpec
from retrieval.profiling.stats import (
    RequestRecord,
    cache_figures,
    exemplars,
    percentiles,
    stage_rows,
    tail_attribution,
    waterfall,
)
from retrieval.profiling.trace import Tracing, start_tracing

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


@dataclass
class ProfileResult:
    summary: dict[str, Any]
    passes: dict[str, list[RequestRecord]] = field(default_factory=dict)


# --------------------------------------------------------------------------- passes


def one_at_a_time(pipe: Pipeline, qs: QuerySet, warmup: int) -> list[RequestRecord]:
    """Every query in turn (after ``warmup`` untimed ones, cycled from the start)."""
    qq = qs.queries
    tracing, pipe.tracing = pipe.tracing, None
    try:
        for i in range(warmup):
            q = qq[i % len(qq)]
            pipe.request(-1, q.id, q.text)
    finally:
        pipe.tracing = tracing
    if pipe.cache is not None:
        pipe.cache.clear()  # warm-up entries are not the pass's
    b = pipe.embed_batch
    if b <= 1:
        return [pipe.request(i, q.id, q.text) for i, q in enumerate(qq)]
    out: list[RequestRecord] = []
    for g in range(0, len(qq), b):  # b requests arrive together: one embedding call
        group = qq[g: g + b]
        vecs, took = pipe.embed_batch_of([q.text for q in group])
        out += [pipe.request(g + j, q.id, q.text, pre=(vecs[j], took, len(group)))
                for j, q in enumerate(group)]
    return out


def open_loop(pipe: Pipeline, qs: QuerySet, rate: float, duration_s: float, workers: int,
              arrival: str, seed: int) -> dict[str, Any]:
    """The pipeline at ``rate`` queries/s for ``duration_s`` (queries cycled), ``workers``
    requests in flight at most; P50/P95/P99 corrected for coordinated omission (from the
    intended send time, HDR histogram) and uncorrected (from the actual send), and the stages'
    percentiles under this load."""
    import concurrent.futures as cf

    from retrieval.bench.load.stats import histogram, percentiles_ms, schedule_offsets_ns

    offs = schedule_offsets_ns(rate, duration_s, arrival, seed)  # type: ignore[arg-type]
    n = len(offs)
    intended = np.zeros(n, np.int64)
    sent = np.zeros(n, np.int64)
    done = np.zeros(n, np.int64)
    recs: list[RequestRecord | None] = [None] * n
    free = threading.Semaphore(workers)
    qq = qs.queries
    tracing, pipe.tracing = pipe.tracing, None  # load passes are not traced

    def job(i: int) -> None:
        try:
            sent[i] = time.perf_counter_ns()
            q = qq[i % len(qq)]
            recs[i] = pipe.request(i, q.id, q.text)
            done[i] = time.perf_counter_ns()
        finally:
            free.release()

    try:
        with cf.ThreadPoolExecutor(workers, thread_name_prefix="rwb-profile") as pool:
            t0 = time.perf_counter_ns()
            for i, off in enumerate(offs.tolist()):
                intended[i] = t0 + off
                wait = (intended[i] - time.perf_counter_ns()) / 1e9
                if wait > 0:
                    time.sleep(wait)
                free.acquire()  # a request waiting for a worker is charged that wait
                pool.submit(job, i)
    finally:
        pipe.tracing = tracing
    ok = [r for r in recs if r is not None]
    corrected = histogram((done - intended) // 1000)
    uncorrected = histogram((done - sent) // 1000)
    rows = stage_rows(ok)
    return {"rate_qps": rate, "requests": n, "duration_s": duration_s, "workers": workers,
            "arrival": arrival, **percentiles_ms(corrected),
            **percentiles_ms(uncorrected, suffix="_uncorrected"),
            "achieved_qps": n / max((done.max() - intended.min()) / 1e9, 1e-9),
            "stages": [{k: r[k] for k in ("name", "p50_ms", "p95_ms", "p99_ms")} for r in rows]}


def quality(records: Sequence[RequestRecord], qs: QuerySet, k: int) -> dict[str, Any] | None:
    """nDCG@k and recall@k of the final lists (ranx via :mod:`retrieval.stats.irmetrics`), when the
    queries have qrels for the collections."""
    if qs.relevant is None or not any(qs.relevant.values()):
        return None
    from retrieval.stats.irmetrics import evaluate_rankings

    ranking = {r.query_id: list(r.ranked) for r in records}
    metrics = [f"ndcg@{k}", f"recall@{k}"]
    scores = evaluate_rankings(qs.relevant, ranking, metrics)
    return {**{m: float(v) for m, v in scores.means.items()}, "n_queries": scores.n_queries,
            "qrels": qs.origin}


def _pass_summary(records: Sequence[RequestRecord], qs: QuerySet, k: int) -> dict[str, Any]:
    relevant = ({q: set(d) for q, d in qs.relevant.items()} if qs.relevant else None)
    e2e = percentiles([r.ms for r in records])
    return {"requests": len(records), **e2e, "quality": quality(records, qs, k),
            "cache": cache_figures(records, relevant),
            "fallbacks": sum(r.fallback for r in records)}


# --------------------------------------------------------------------------- remedies


def _knob_step(built: Built, spec: ProfileSpec) -> str | None:
    """Apply the tuned search knobs; a note of what changed, None when nothing applies."""
    from retrieval.indexes.entry import apply_search, check_entry
    from retrieval.profiling.pipeline import rebuilt_from_export

    done = []
    pipe = built.pipeline
    for i, c in enumerate(built.collections):
        kr = spec.remedies.knobs.get(c.name)
        if kr is None:
            continue
        search = dict(kr.search or {})
        if kr.export is not None:
            rb = rebuilt_from_export(spec, kr.export, int(pipe.embedder.dim),
                                     f"remedies.knobs.{c.name}.export")
            if rb.backend != c.backend:
                log.warning("profile: %s: the export is for %s, the collection runs %s; only "
                            "its search params are used", c.name, rb.backend, c.backend)
            search = {**rb.search, **search}
        entry = c.model_copy(update={"search": search})
        ce = check_entry(entry, pipe.fan.k, where=spec.source,
                         field=f"remedies.knobs.{c.name}")
        (bp,) = ce.builds()
        apply_search(built.members[i].index, ce.configs(bp)[0])
        pipe.knobs[c.name] = {**pipe.knobs.get(c.name, {}), **search}
        done.append(f"{c.name}: {search}")
    return "; ".join(done) or None


#: the stage each remedy acts on: its credited gain is at most that stage's P95 (ms) before it
REMEDY_STAGE = {"parallel collections": "retrieve", "tuned knobs": "retrieve",
                "batched query embedding": "embed", "smaller rerank depth": "rerank"}


#: passes of every remedy, interleaved with the setting before it: before (the previous step's
#: pass), after, before, after ... this many passes of each
INTERLEAVE_ROUNDS = 2
#: the pipeline attributes the remedies change (besides the collections' search knobs)
_SWITCHED = ("mode", "embed_batch", "rerank_depth", "cache", "cache_threshold", "bm25")


@dataclass(frozen=True)
class Setting:
    """The pipeline's remedy-controlled state at one moment: its switched attributes, the
    per-collection deadline (s) and the tuned search knobs applied per collection."""

    attrs: dict[str, Any]
    timeout_s: float
    knobs: dict[str, dict[str, Any]]


def setting_of(pipe: Pipeline) -> Setting:
    """What :func:`restore` puts back: the state every remedy changes."""
    return Setting({a: getattr(pipe, a) for a in _SWITCHED}, pipe.fan.timeout_s,
                   {name: dict(v) for name, v in pipe.knobs.items()})


def restore(built: Built, spec: ProfileSpec, to: Setting) -> None:
    """Put the pipeline back in setting ``to`` (a remedy switched off or on again, so that
    its passes interleave with those of the setting before it); the collections' search
    knobs are applied again only when they differ."""
    pipe = built.pipeline
    for name, value in to.attrs.items():
        setattr(pipe, name, value)
    pipe.fan.timeout_s = to.timeout_s
    if pipe.knobs == to.knobs:
        return
    from retrieval.indexes.entry import apply_search, check_entry

    for i, c in enumerate(built.collections):
        if pipe.knobs.get(c.name) == to.knobs.get(c.name):
            continue
        search = {**dict(c.search or {}), **to.knobs.get(c.name, {})}
        ce = check_entry(c.model_copy(update={"search": search}), pipe.fan.k, where=spec.source,
                         field=f"remedies.knobs.{c.name}")
        (bp,) = ce.builds()
        apply_search(built.members[i].index, ce.configs(bp)[0])
    pipe.knobs = {name: dict(v) for name, v in to.knobs.items()}


def remedy_steps(spec: ProfileSpec) -> list[tuple[str, str]]:
    """The candidate steps in order: (key, label)."""
    return [("parallel", "parallel collections"), ("knobs", "tuned knobs"),
            ("embed_batch", "batched query embedding"),
            ("rerank_depth", "smaller rerank depth"), ("cache", "cache at tuned threshold"),
            ("bm25_fallback", "BM25 fallback")]


def apply_remedy(key: str, built: Built, spec: ProfileSpec,
                 stack: contextlib.ExitStack) -> tuple[bool, str]:
    """Apply one remedy to the live pipeline (cumulative); (applied, what or why not)."""
    pipe, rem = built.pipeline, spec.remedies
    if key == "parallel":
        if not rem.parallel:
            return False, "not asked (remedies.parallel: false)"
        if pipe.mode != "serial" or len(built.members) < 2:
            return False, "already parallel" if pipe.mode != "serial" else "one collection"
        pipe.mode = "threads"
        return True, f"{len(built.members)} collections on a thread pool"
    if key == "knobs":
        if not rem.knobs:
            return False, "no tuned knobs given (remedies.knobs)"
        note = _knob_step(built, spec)
        return (note is not None), note or "nothing to change"
    if key == "embed_batch":
        if rem.embed_batch is None:
            return False, "no batch size given (remedies.embed_batch)"
        pipe.embed_batch = rem.embed_batch
        return True, (f"queries embedded {rem.embed_batch} at a time (one call per batch; "
                      f"each request pays its batch's call)")
    if key == "rerank_depth":
        if rem.rerank_depth is None:
            return False, "no depth given (remedies.rerank_depth)"
        if pipe.reranker is None:
            return False, "the pipeline has no rerank stage"
        if rem.rerank_depth >= pipe.rerank_depth:
            return False, f"depth {rem.rerank_depth} is not below {pipe.rerank_depth}"
        before, pipe.rerank_depth = pipe.rerank_depth, rem.rerank_depth
        return True, f"rerank top-{before} -> top-{rem.rerank_depth}"
    if key == "cache":
        if rem.cache_threshold is None:
            return False, "no threshold given (remedies.cache_threshold)"
        if pipe.cache is None:
            import os

            from retrieval.profiling.pipeline import open_cache

            url = spec.cache.redis_url if spec.cache else None
            if not (url or os.environ.get("REDIS_URL")):
                return False, "no Redis (set REDIS_URL)"
            pipe.cache = stack.enter_context(open_cache(url, int(pipe.embedder.dim), spec.name))
        old_thr, pipe.cache_threshold = pipe.cache_threshold, rem.cache_threshold
        return True, (f"cache threshold {old_thr} -> {rem.cache_threshold}" if old_thr is not None
                      else f"semantic cache at cosine distance {rem.cache_threshold}")
    if key == "bm25_fallback":
        fb = rem.bm25_fallback
        if fb is None:
            return False, "no fallback given (remedies.bm25_fallback)"
        from retrieval.profiling.pipeline import make_bm25

        texts_by = {c.name: [pipe.texts[f"{c.namespace or c.name}/{d}"] for d in m.doc_ids]
                    for c, m in zip(built.collections, built.members)}
        prepared = [_Prep(c, m.doc_ids) for c, m in zip(built.collections, built.members)]
        pipe.bm25 = make_bm25(fb.collection, built.collections, prepared, texts_by,
                              fb.min_results)
        note = f"BM25 over {fb.collection} when fewer than {fb.min_results} results"
        if rem.fallback_timeout_s is not None:
            pipe.fan.timeout_s = rem.fallback_timeout_s
            note += f"; per-collection deadline {rem.fallback_timeout_s:g} s"
        return True, note
    raise ValueError(key)


@dataclass(frozen=True)
class _Prep:
    spec: Any
    doc_ids: Sequence[str]


# --------------------------------------------------------------------------- the run


def run_profile(spec: ProfileSpec, *, queries_file: Path | str | None = None,
                otlp_dir: Path | None = None, remedies: bool = False,
                workdir: Path | None = None, progress: Progress | None = None,
                trace_endpoint: bool | None = None) -> ProfileResult:
    """Profile the pipeline (see the module docstring). Tracing: ``otlp_dir`` and/or the OTLP
    endpoint of the environment (``trace_endpoint`` None: when OTEL_EXPORTER_OTLP_ENDPOINT is
    set); only the one-at-a-time pass is traced."""
    note = progress or (lambda s: None)
    qs = load_queries(spec, queries_file)
    tracing: Tracing | None = start_tracing(otlp_dir, service="rwb-profile", run_name=spec.name,
                                            endpoint=trace_endpoint)
    passes: dict[str, list[RequestRecord]] = {}
    with contextlib.ExitStack() as stack:
        if tracing is not None:
            stack.callback(tracing.close)
        base = workdir or stack.enter_context(rwb_tempdir("rwb-pr-"))
        note("building the pipeline")
        built = stack.enter_context(build_pipeline(spec, base, tracing))
        pipe = built.pipeline
        note(f"{len(qs.queries)} requests, one at a time")
        base_recs = one_at_a_time(pipe, qs, spec.warmup)
        passes["baseline"] = base_recs
        rows = stage_rows(base_recs)
        summary: dict[str, Any] = {
            "kind": "profile", "name": spec.name, "queries": qs.origin,
            "mode": spec.retrieval.mode, "k": spec.k,
            "collections": built.facts, "stages": rows,
            "end_to_end": percentiles([r.ms for r in base_recs]),
            "overhead": percentiles([r.overhead_ms() for r in base_recs]),
            "tail": tail_attribution(base_recs),
            "exemplars": exemplars(base_recs),
            **{k: v for k, v in _pass_summary(base_recs, qs, spec.k).items()
               if k in ("quality", "cache", "fallbacks")},
            "traced": tracing is not None,
            "otlp_files": [str(p) for p in tracing.files] if tracing else [],
            "otlp_endpoint": bool(tracing and tracing.endpoint),
        }
        if spec.load is not None and spec.load.rates:
            summary["load"] = []
            for rate in spec.load.rates:
                note(f"open loop at {rate:g} q/s")
                summary["load"].append(open_loop(pipe, qs, rate, spec.load.duration_s,
                                                 spec.load.workers, spec.load.arrival,
                                                 spec.seed))
        if remedies:
            summary["remedies"] = _remedies(built, spec, qs, base_recs, stack, note, passes)
    return ProfileResult(summary, passes)


def _remedies(built: Built, spec: ProfileSpec, qs: QuerySet, base: list[RequestRecord],
              stack: contextlib.ExitStack, note: Progress,
              passes: dict[str, list[RequestRecord]]) -> dict[str, Any]:
    pipe = built.pipeline
    pipe.tracing = None  # remedy passes are not traced
    steps: list[dict[str, Any]] = []

    def row(step: str, what: str, recs: Sequence[RequestRecord] | None) -> dict[str, Any]:
        r: dict[str, Any] = {"step": step, "what": what, "applied": recs is not None}
        if recs is not None:
            s = _pass_summary(recs, qs, spec.k)
            q = s["quality"] or {}
            r.update({k: s[k] for k in ("p50_ms", "p95_ms", "p99_ms")})
            r[f"ndcg@{spec.k}"] = q.get(f"ndcg@{spec.k}")
            r[f"recall@{spec.k}"] = q.get(f"recall@{spec.k}")
            r["cache_hit_rate"] = (s["cache"] or {}).get("hit_rate")
            r["fallbacks"] = s["fallbacks"]
            r["stages"] = {x["name"]: x["p95_ms"] for x in stage_rows(recs)}
            r["embed_ms_per_query"] = _embed_per_query(recs)
            r["request_ms"] = [x.ms for x in recs]  # the noise band (not kept in the summary)
            if step in REMEDY_STAGE:
                r["stage"] = REMEDY_STAGE[step]
        return r

    steps.append(row("baseline", f"as specified ({pipe.mode})", base))
    for key, label in remedy_steps(spec):
        before = setting_of(pipe)
        applied, what = apply_remedy(key, built, spec, stack)
        if not applied:
            steps.append(row(label, what, None))
            continue
        note(f"remedy: {label}")
        recs = one_at_a_time(pipe, qs, spec.warmup)
        passes[label] = recs
        prev_ms = next(s for s in reversed(steps) if s["applied"])["request_ms"]
        before_passes: list[list[float]] = [list(prev_ms[-len(qs.queries):])]
        after_passes: list[list[float]] = [[x.ms for x in recs]]
        after = setting_of(pipe)  # interleaved: before, after, before, after ...
        for _ in range(INTERLEAVE_ROUNDS - 1):
            restore(built, spec, before)
            before_passes.append([x.ms for x in one_at_a_time(pipe, qs, spec.warmup)])
            restore(built, spec, after)
            again = one_at_a_time(pipe, qs, spec.warmup)
            after_passes.append([x.ms for x in again])
            recs = recs + again
        r = row(label, what, recs)
        if len(before_passes) > 1:
            r["before_ms"] = [ms for p in before_passes for ms in p]
            r["before_passes"], r["after_passes"] = before_passes, after_passes
            r["passes"] = INTERLEAVE_ROUNDS
        steps.append(r)
    has_q = any(s.get(f"ndcg@{spec.k}") is not None for s in steps)
    return waterfall(steps, f"ndcg@{spec.k}" if has_q else None)


def _embed_per_query(recs: Sequence[RequestRecord]) -> float | None:
    """Mean embedding time per query (ms): each embed span divided by its batch size (a
    batched call counted once per batch, not once per request)."""
    per = [s.ms / float(s.attrs.get("rwb.embed.batch", 1) or 1)
           for r in recs for s in r.spans if s.stage == "embed"]
    return float(np.mean(per)) if per else None


def span_rows(passes: dict[str, list[RequestRecord]]) -> list[dict[str, Any]]:
    """One row per span (and one per request, stage ``request``) of every pass."""
    out = []
    for name, recs in passes.items():
        for r in recs:
            out.append({"pass": name, "request": r.index, "query_id": r.query_id,
                        "trace_id": r.trace_id, "stage": "request", "parent": None,
                        "span": "rwb.request", "start_ms": 0.0, "ms": r.ms})
            for s in r.spans:
                out.append({"pass": name, "request": r.index, "query_id": r.query_id,
                            "trace_id": r.trace_id, "stage": s.stage, "parent": s.parent,
                            "span": s.name, "start_ms": (s.start_ns - r.start_ns) / 1e6,
                            "ms": s.ms})
    return out


def write_profile_run(spec: ProfileSpec, result: ProfileResult, out: str | Path | None, *,
                      force: bool = False) -> Any:
    """The run directory (see the module docstring); a non-empty ``out`` is refused unless
    ``force``."""
    from retrieval.runs import RunDir

    run = RunDir.create(out, f"profile-{spec.name}", force=force)
    with run.recording():
        run.write_yaml("spec.yaml", spec.model_dump(mode="json"))
        run.write_manifest(kind="profile", spec_source=spec.source,
                           seeds={"queries": spec.seed + 1, "index": spec.seed},
                           index_threads=spec.threads)
        run.write_table("spans.parquet", span_rows(result.passes))
        run.write_table("requests.parquet", [
            {"pass": p, "request": r.index, "query_id": r.query_id, "trace_id": r.trace_id,
             "ms": r.ms, "overhead_ms": r.overhead_ms(), "cache_hit": r.cache_hit,
             "fallback": r.fallback, **{f"{k}_ms": v for k, v in r.top_level().items()}}
            for p, recs in result.passes.items() for r in recs])
        run.write_json("summary.json", _jsonable(result.summary))
    return run


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and math.isinf(obj):
        return "inf"
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


__all__ = ["ProfileResult", "run_profile", "span_rows", "write_profile_run"]
