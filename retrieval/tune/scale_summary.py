"""The summary of a scale study (``workload: scale``): one ``builds`` entry per build config
(the four knob(N) models' predictions and transfer errors, the check at the full N), the
answer and its cost (s), the ``scale`` block."""

from __future__ import annotations

import math
from typing import Any

from retrieval.runs import WORKLOAD_SCALE
from retrieval.tune import scale as sc
from retrieval.tune import scale_trust as st
from retrieval.tune.cost import with_costs, with_costs_at
from retrieval.tune.decide import CHEAPEST_RULE, objective_value
from retrieval.tune.results import PointResult
from retrieval.tune.summary import SweepSummary, build_params

#: the knob(N) models each ``builds`` entry carries, by their keys (``scale.models``); ``start``:
#: the model whose knob the local search at the full N starts from
MODELS: dict[str, Any] = {
    "models": [
        {"model": "fitted knob", "predicted": "predicted", "transfer_error": "transfer_error",
         "fit": "fit"},
        {"model": "miss surface", "predicted": "predicted_surface",
         "transfer_error": "transfer_error_surface", "fit": "surface_fit"},
        {"model": "per-query difficulty", "predicted": "predicted_difficulty",
         "transfer_error": "transfer_error_difficulty", "fit": "difficulty_fit"},
        {"model": "coarse partition", "predicted": "predicted_partition",
         "transfer_error": "transfer_error_partition", "fit": "partition_fit"},
    ],
    "start": "predicted_difficulty",
    #: a build the partition model covers (IVF with exact vectors in its lists) starts from it
    "start_covered": "predicted_partition",
}


def used_model(fitted: dict[str, Any]) -> str:
    """The key of the model the study uses for one build (the local search at the full N
    starts from its knob; each entry's ``model_used``): the partition model where it
    predicted a knob, else ``scale.models.start``."""
    if fitted.get(MODELS["start_covered"]) is not None:
        return str(MODELS["start_covered"])
    return str(MODELS["start"])

#: the scale study (:class:`retrieval.tune.scale_run.Study`; not imported: no import cycle)
Study = Any

RULE_NOTE = (
    "knob(N) fitted on nested samples (log: a + b log2 N; power: c N^b), the model that best "
    "predicts the largest sample from the smaller ones; band: bootstrap over the tuning "
    "queries; transfer_error = (predicted - exact) / exact at the full N (transfer_error_surface: "
    "the same for predicted_surface, the miss-rate surface model; transfer_error_difficulty: for "
    "predicted_difficulty, the per-query difficulty model; transfer_error_partition: for "
    "predicted_partition, the coarse-partition model of IVF builds with exact vectors in their "
    "lists); ceiling: recall lower bound at the top of the knob range"
)


def _build_entry(study: Study, i: int, b: sc.BuildStudy, fitted: dict[str, Any] | None,
                 full: dict[str, Any] | None) -> dict[str, Any]:
    fitted, full = fitted or {}, full or {}
    exact = full.get("exact")
    predicted = fitted.get("predicted")
    trend = fitted.get("ceiling_trend") or {}
    ceiling = full.get("ceiling", trend.get("ceiling_at_full"))
    stop_row = next((r for r in b.samples if r.get("stopped")), None)
    ceiling_n = None
    if stop_row is not None and "ceiling" not in full:  # stopped by its ceiling at a sample
        ceiling, ceiling_n = stop_row["ceiling"], stop_row["n"]
    elif "ceiling" in full:
        ceiling_n = study.ds.n_base
    n = study.ds.n_base
    message = b.stopped
    if message is None and trend.get("n_stop") is not None and trend["n_stop"] <= n:
        message = (f"{b.label}: the ceiling trend predicts that no search setting reaches "
                   f"recall@{study.k} {study.target:g} beyond N = {trend['n_stop']:,.0f}")
    chosen: PointResult | None = full.get("chosen")
    entry: dict[str, Any] = {
        "label": b.label, "backend": b.backend, "build": b.build, "fixed": b.fixed,
        "knob": b.knob,
        "samples": b.samples,
        "fit": fitted.get("fit"),
        "fraction": fitted.get("fraction"),
        "predicted": predicted,
        "band": fitted.get("band"),
        "exact": exact,
        "transfer_error": sc.transfer_error(predicted, exact),
        "predicted_surface": fitted.get("predicted_surface"),
        "transfer_error_surface": sc.transfer_error(fitted.get("predicted_surface"), exact),
        "surface_fit": fitted.get("surface_fit"),
        "predicted_difficulty": fitted.get("predicted_difficulty"),
        "transfer_error_difficulty": sc.transfer_error(fitted.get("predicted_difficulty"), exact),
        "difficulty_fit": fitted.get("difficulty_fit"),
        "predicted_partition": fitted.get("predicted_partition"),
        "transfer_error_partition": sc.transfer_error(fitted.get("predicted_partition"), exact),
        "partition_fit": _partition_fit(fitted, full),
        "model_used": used_model(fitted) if fitted else None,
        "ceiling": ceiling,
        "ceiling_measured": "ceiling" in full or stop_row is not None,
        "ceiling_n": ceiling_n,
        "ceiling_recall": full.get("ceiling_recall"),
        "ceiling_trend": trend or None,
        "predicted_at": fitted.get("predicted_at"),
        "predicted_recall": full.get("predicted_recall"),
        "sample_knob": fitted.get("sample_knob"),
        "sample_knob_recall": full.get("sample_knob_recall"),
        "predicted_difficulty_recall": full.get("predicted_difficulty_recall"),
        "predicted_partition_recall": full.get("predicted_partition_recall"),
        "build_at_full": full.get("build_at_full"),
        "range_at_full": full.get("range"),
        "full_evaluations": full.get("evaluations"),
        "full_build_s": full.get("build_s"),
        "full_search_s": full.get("search_s"),
        "chosen": None if chosen is None else chosen.to_dict(),
        "stopped": b.stopped,
        "message": message,
    }
    if entry["predicted_at"]:  # one figure per size (the export's), and whether to trust it
        ranges = [study.bounds(b, int(p["n"]))[1:] for p in entry["predicted_at"]]
        entry["predicted_at"] = st.finish_predictions(
            entry["predicted_at"], sc.export_rule(entry, study.scale.build_rules), ranges,
            study.target, sc.rule_knob)
    return entry


def _partition_fit(fitted: dict[str, Any], full: dict[str, Any]) -> dict[str, Any] | None:
    """The partition model's record, with whether the full-N build took its quantizer
    (``reused_by_full_build``: its k-means was then paid once, in ``seconds``)."""
    fit = fitted.get("partition_fit")
    if not fit or fit.get("reason") is not None:
        return fit
    return {**fit, "reused_by_full_build": full.get("shared_quantizer")}


def _answer(study: Study, builds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The answer build and what it cost: the samples plus its one build at the full N
    (ground truth, build and searches there), in seconds."""
    i = study.answer
    if i is None:
        return None
    b = builds[i]
    checked = b["full_build_s"] is not None
    t = study.timing
    return {
        "build": i, "label": b["label"], "backend": b["backend"], "params": b["build"],
        "chosen_by": "highest batch QPS at the cheapest knob on the largest sample",
        "checked_at_full": checked,
        "cost_s": t["samples_s"] + t["full_groundtruth_s"] + t.get("partition_s", 0.0)
        + (b["full_build_s"] or 0.0) + (b["full_search_s"] or 0.0) if checked else None,
    }


def scale_summary(study: Study, fits: dict[int, dict[str, Any]], full: dict[int, dict[str, Any]],
                  run_id: str, wall_s: float) -> dict[str, Any]:
    spec, ds = study.spec, study.ds
    builds = [_build_entry(study, i, b, fits.get(i), full.get(i))
              for i, b in enumerate(study.builds)]
    backends: dict[str, Any] = {}
    for i, b in enumerate(study.builds):
        f = full.get(i) or {}
        chosen: PointResult | None = f.get("chosen")
        cur = backends.get(b.label)
        cand = None
        if chosen is not None:
            held = f.get("heldout")
            given = f["build_at_full"]
            cand = {
                "backend": b.backend,
                "chosen": {**chosen.to_dict(), "build": given,
                           "build_params": build_params(b.backend, given)},
                "unit": f"scale#{i}", "evaluations": f.get("evaluations"),
                "heldout_recall": None if held is None else held.recall,
                "heldout_recall_lb": None if held is None else held.recall_lb,
                "heldout_meets": None if held is None else held.meets,
                "scale_build": i,
                "_cost": objective_value(chosen, spec.tune.objective),
            }
        if cur is None or (cand is not None and (cur["chosen"] is None
                                                  or cand["_cost"] < cur["_cost"])):
            backends[b.label] = cand or {"backend": b.backend, "chosen": None,
                                         "_cost": math.inf}
    for v in backends.values():
        v.pop("_cost", None)
    priced = with_costs(backends, spec.tune.cost, ds.n_base)
    backends = with_costs_at(priced, spec.tune.cost, ds.n_base, list(study.scale.predict_at))
    evaluations = sum(sum(r["evaluations"] for r in b["samples"]) + (b["full_evaluations"] or 0)
                      for b in builds)
    return {
        "kind": SweepSummary.KIND, "workload": WORKLOAD_SCALE, "run_id": run_id,
        "name": spec.name, "dataset": ds.name,
        "dataset_fingerprint": ds.fingerprint, "metric": ds.metric, "k": spec.k,
        "strategy": "target", "target_recall": spec.target_recall,
        "objective": spec.tune.objective, "confidence": spec.tune.confidence.model_dump(),
        "queries": study.split.describe(),
        "recall_definition": "recall@k: |returned top-k ∩ exact top-k| / k (by id)",
        "latency_unit": "ms", "cheapest_rule": CHEAPEST_RULE, "evaluations": evaluations,
        "backends": backends, "builds": builds, "rows": [], "pareto": [],
        "scale": {
            "sizes": study.sizes, "full_n": ds.n_base, "predict_at": study.scale.predict_at,
            "build_rules": study.scale.build_rules, "rule": RULE_NOTE,
            "cost_s": {**study.timing, "wall_s": wall_s},
            "check": study.scale.check,
            "sampling": study.scale.sampling,
            **({"neighbourhood": study.neighbourhood} if study.neighbourhood else {}),
            **({"cells": study.cells} if study.cells else {}),
            "models": MODELS,
            "answer": _answer(study, builds),
            "messages": [b["message"] for b in builds if b["message"]],
        },
    }


__all__ = ["RULE_NOTE", "scale_summary"]
