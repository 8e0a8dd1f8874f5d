"""Run the cross-layer study end to end and write its run directory.

1. Retrieval leg (SciFact, or the collection the spec names): per-query quality and latency
   for every knob value x depth (:mod:`retrieval.study.retrieval_leg`).
2. Cache leg (QQP traffic, or the user's labelled pairs, on a live Redis): rates per threshold
   on both splits, lookup latency (:mod:`retrieval.study.cache_leg`).
3. Optuna multi-objective search on the tuning split with constraints
   (:mod:`retrieval.study.optimize`), the exhaustive front of the grid for comparison, the choice.
4. The chosen config and the untuned default on the held-out split, and a paired significance
   test (ranx) of the chosen config against the default (:mod:`retrieval.study.significance`).

Run directory: ``spec.yaml``, ``manifest.json`` (``kind: rag-study``), ``summary.json`` (with
``pareto_set``), ``trials.parquet`` (every Optuna trial), ``grid.parquet`` (every config of the
grid scored on the tuning split). The Optuna study lives in memory (trials are table lookups;
SQLite would cost more than the whole search) unless ``--storage URL`` names a storage.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.redact import redact_uri
from retrieval.runs import RunDir
from retrieval.study import combine
from retrieval.study.cache_leg import SERVER_KEY_OF_CACHE, CacheTables, measure_cache
from retrieval.study.combine import Config, Scorer
from retrieval.study.optimize import (
    DIRECTIONS,
    OBJECTIVE_NAMES,
    choose,
    config_of,
    exhaustive_front,
    optuna_front,
    run_optuna,
)
from retrieval.study.retrieval_leg import RetrievalTables, measure_retrieval
from retrieval.study.significance import compare_configs
from retrieval.study.spec import StudySpec
from retrieval.study.summary import StudySummary

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class StudyResult:
    run: RunDir
    summary: dict[str, Any]


def _model_notes(spec: StudySpec) -> dict[str, str]:
    c = spec.cache.cost
    coll, traffic = spec.retrieval.collection, spec.cache.data_name
    return {
        "quality": "ndcg_e2e = (1 - false_hit_rate) * ndcg_path: a miss or a correct hit is "
                   f"served by the retrieval path ({coll} per-query nDCG@k, ranx); a false hit "
                   "serves another question's answer and scores 0; hit/false-hit rates per "
                   f"probe from the {traffic} traffic",
        "latency": "hit = embed + lookup; miss = embed + lookup + index search + rerank call; "
                   "mixture by hit rate; search timed for every query, embed + rerank on the "
                   "timed sample queries, combined as independent draws; lookup = measured "
                   "mean; single query, ms",
        "cost": f"USD per 1,000 queries = 1000 * ((1 - hit_rate) * {c.usd_per_call:.6g} USD per "
                f"LLM call [{c.input_tokens_per_query:g} in x {c.usd_per_million_input_tokens:g}"
                f" + {c.output_tokens_per_query:g} out x {c.usd_per_million_output_tokens:g} "
                f"USD per 1M tokens] + mean end-to-end ms / 3.6e6 * "
                f"{spec.cost.usd_per_host_hour:g} USD per host hour) + "
                f"{c.usd_per_1k_lookups:g} USD per 1,000 lookups",
    }


def _trial_rows(study: Any, knob: str) -> list[dict[str, Any]]:
    from optuna.trial import TrialState

    rows = []
    for t in study.trials:
        if t.state != TrialState.COMPLETE:
            continue
        cfg = config_of(t, knob)
        rows.append({"trial": t.number, **cfg.as_dict(knob), **t.user_attrs})
    return rows


def summarise(spec: StudySpec, rt: RetrievalTables, ct: CacheTables, scorer: Scorer,
              study: Any, storage: str, timing: dict[str, float | None]) -> dict[str, Any]:
    knob = spec.retrieval.index.knob
    k = spec.retrieval.k
    front = optuna_front(study, spec, scorer)
    full, n_grid, n_feasible = exhaustive_front(spec, scorer)
    found = {p.config for p in front} & {p.config for p in full}
    chosen = choose(front, spec.choice.tolerance)
    default = Config(spec.default.knob, spec.default.depth, spec.default.threshold)
    heldout_ids = [q for q, t in zip(rt.query_ids, rt.tuning) if not t]

    def described(cfg: Config) -> dict[str, Any]:
        return {**cfg.as_dict(knob), "tuning": scorer.score(cfg, "tuning").as_dict(),
                "heldout": scorer.score(cfg, "heldout").as_dict()}

    significance = None
    if chosen is not None:
        s = spec.significance
        significance = compare_configs(
            rt.qrels, rt.rankings[(default.knob, default.depth)],
            rt.rankings[(chosen.config.knob, chosen.config.depth)], heldout_ids,
            metric=f"ndcg@{k}", test=s.test, n_permutations=s.n_permutations, alpha=s.alpha,
            seed=spec.seed,
        )
        significance["scope"] = ("retrieval path (index knob + rerank depth) on the held-out "
                                 f"{spec.retrieval.collection} queries; the cache changes "
                                 "quality by the factor "
                                 "(1 - false_hit_rate), compared as rates under 'chosen' and "
                                 "'default'")
    feasible_trials = sum(1 for r in _trial_rows(study, knob) if r.get("feasible"))
    return {
        "kind": StudySummary.KIND,
        "name": spec.name,
        "objectives": [
            {"name": "ndcg_e2e", "metric": f"end-to-end nDCG@{k}", "direction": DIRECTIONS[0],
             "unit": "0..1"},
            {"name": "p95_ms", "metric": "end-to-end p95 latency", "direction": DIRECTIONS[1],
             "unit": "ms"},
            {"name": "usd_per_1k", "metric": "cost per 1,000 queries",
             "direction": DIRECTIONS[2], "unit": "USD"},
        ],
        "constraints": {
            "target_recall": spec.constraints.target_recall,
            "recall_definition": f"recall@{k} by id of the final top-{k} against exact dense "
                                 f"search (same embeddings); {spec.constraints.confidence:.0%} "
                                 f"bootstrap lower bound over the tuning queries >= target",
            "max_false_hit": spec.cache.tuning.max_false_hit,
            "false_hit_definition": f"{spec.cache.tuning.bound} {spec.cache.tuning.confidence:.0%}"
                                    f" upper bound on false hits per probe (tuning) <= cap",
        },
        "target_recall": spec.constraints.target_recall,
        "models": _model_notes(spec),
        "knobs": {
            knob: spec.retrieval.index.values,
            "depth": spec.rerank.depths,
            "threshold": spec.thresholds,
            "threshold_unit": "cosine_distance",
        },
        "optuna": {
            "sampler": spec.optuna.sampler, "population_size": spec.optuna.population_size,
            "trials": len(study.trials), "feasible_trials": feasible_trials,
            "storage": redact_uri(storage), "study_name": study.study_name,
            "objective_names": list(OBJECTIVE_NAMES), "seed": spec.seed,
        },
        "pareto_set": [p.as_dict(knob) for p in front],
        "exhaustive": {
            "grid_size": n_grid, "feasible": n_feasible, "front_size": len(full),
            "front_found_by_optuna": len(found),
            "front": [p.as_dict(knob) for p in full],
        },
        "choice_rule": f"lowest cost, then p95, among Pareto points whose tuning end-to-end "
                       f"nDCG@{k} is within {spec.choice.tolerance} of the best",
        "chosen": None if chosen is None else {"trial": chosen.trial,
                                               **described(chosen.config)},
        "default": described(default),
        "significance": significance,
        "retrieval": rt.info,
        "cache": {**ct.info, "lookup_ms": ct.lookup_ms},
        "splits": {"retrieval": {"tuning": rt.info["n_tuning"], "heldout": rt.info["n_heldout"]},
                   "cache": {key: (ct.info.get("design") or {}).get(key)
                             for key in ("n_tuning", "n_heldout", "positive_fraction")}},
        "timing_s": timing,
    }


def run_study(
    spec: StudySpec,
    out: Path | str | None = None,
    *,
    storage: str | None = None,
    study_name: str | None = None,
    n_trials: int | None = None,
    redis_url: str | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> StudyResult:
    """Run ``spec``; write and return the run directory and its summary. A non-empty ``out``
    is refused unless ``force``; manifest.json records the run's status."""
    from retrieval.tune.storage import check_study_name

    if storage is not None:  # without a storage the study lives in memory: any name
        check_study_name(study_name or spec.name, storage)
    run = RunDir.create(out, spec.name, force=force)
    with run.recording():
        return _study_into(run, spec, storage, study_name, n_trials, redis_url, progress)


def _study_into(run: RunDir, spec: StudySpec, storage: str | None, study_name: str | None,
                n_trials: int | None, redis_url: str | None,
                progress: Progress | None) -> StudyResult:
    note = progress or (lambda s: None)
    load_start = _load_avg()
    t0 = time.perf_counter()
    rt = measure_retrieval(spec, progress=note)
    t1 = time.perf_counter()
    note(f"cache leg: {spec.cache.data_name} traffic through the semantic cache (Redis)")
    ct = measure_cache(spec, redis_url)
    t2 = time.perf_counter()
    scorer = Scorer(spec, rt, ct)
    note("optuna")
    study = run_optuna(spec, scorer, storage=storage, study_name=study_name or spec.name,
                       n_trials=n_trials)
    url = storage or "in-memory (every trial in trials.parquet)"
    t3 = time.perf_counter()
    timing = {"retrieval_s": t1 - t0, "cache_s": t2 - t1, "optuna_s": t3 - t2,
              "load_avg_1m_start": load_start, "load_avg_1m_end": _load_avg()}
    summary = summarise(spec, rt, ct, scorer, study, url, timing)
    summary["timing_s"]["total_s"] = time.perf_counter() - t0
    summary["run_id"] = run.run_id
    run.write_yaml("spec.yaml", spec.model_dump(mode="json"))
    run.write_manifest(
        kind=StudySummary.KIND, spec_source=spec.source, seeds={"study": spec.seed},
        dataset={"retrieval": {k: rt.info[k] for k in ("collection", "fingerprint")},
                 "cache": {"name": spec.cache.data_name,
                           "fingerprint": (ct.info.get("design") or {}).get("fingerprint")}},
        embedder=rt.info["embedder"], reranker=rt.info["reranker"],
        redis=ct.info.get(SERVER_KEY_OF_CACHE), optuna={"storage": redact_uri(url),
                                            "study": study.study_name},
    )
    typed = StudySummary.model_validate(summary)
    run.write_summary(typed)
    run.write_table("trials.parquet", _trial_rows(study, spec.retrieval.index.knob))
    run.write_table("grid.parquet", grid_rows(spec, scorer))
    return StudyResult(run, typed.to_json_dict())


def _load_avg() -> float | None:
    """The host's 1-minute load average (latencies here are wall times on a shared host)."""
    try:
        return float(os.getloadavg()[0])
    except OSError:
        return None


def grid_rows(spec: StudySpec, scorer: Scorer) -> list[dict[str, Any]]:
    knob = spec.retrieval.index.knob
    rows = []
    for v in spec.retrieval.index.values:
        for d in spec.rerank.depths:
            for t in spec.thresholds:
                cfg = combine.Config(v, d, t)
                rows.append({**cfg.as_dict(knob), **scorer.score(cfg, "tuning").as_dict()})
    return rows


__all__ = ["StudyResult", "StudySummary", "grid_rows", "run_study", "summarise"]
