"""What the fan-out benchmark computes from its runs (pure): latency and CPU accounting per mode,
the where-does-the-time-go verdict, speedups over rounds, and the quality of the fused lists
against each single collection where qrels exist (ranx). Latencies in ms, times in s."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from retrieval.bench.fanout.prepare import PreparedQueries
from retrieval.bench.fanout.retriever import FanoutRun, Member
from retrieval.bench.fanout.spec import ALIASES, FanoutSpec
from retrieval.fusion import rrf, rrf_ranx, score_merge
from retrieval.stats.metrics import latency_summary

QUALITY_METRICS = ("ndcg@10", "recall@10", "mrr@10")


def _per_s(x: float, wall_s: float) -> float:
    """Seconds of CPU (or wait) per second of wall time = cores busy (or waiting)."""
    return x / wall_s if wall_s > 0 and math.isfinite(x) else math.nan


def _nz(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def mode_summary(run: FanoutRun, serial: FanoutRun | None) -> dict[str, Any]:
    """Latency percentiles (ms), QPS, speedup over serial (p50 and mean), CPU accounting."""
    lat = latency_summary(run.latency_ms)
    n = len(run.latency_ms)
    out: dict[str, Any] = {
        **lat,
        "n_queries": n,
        "qps": n / run.wall_s if run.wall_s > 0 else math.inf,
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "child_cpu_s": run.child_cpu_s,
        "cpu_cores": _per_s(run.cpu_s, run.wall_s),
        "runq_wait_cores": _per_s(run.wait_s, run.wall_s),
        "child_cpu_cores": _per_s(run.child_cpu_s, run.wall_s),
        "child_runq_wait_cores": _per_s(run.child_wait_s, run.wall_s),
        "member_p50_ms": {k: float(np.percentile(v, 50)) for k, v in run.member_ms.items()},
        "failures": run.failures(),
    }
    if serial is not None:
        base = latency_summary(serial.latency_ms)
        out["speedup_p50"] = base["p50_ms"] / lat["p50_ms"] if lat["p50_ms"] > 0 else None
        out["speedup_mean"] = base["mean_ms"] / lat["mean_ms"] if lat["mean_ms"] > 0 else None
    return out


def classify(modes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Where the time goes, from the CPU accounting (thresholds are rules of thumb).

    *Demand* is CPU time plus run-queue wait (time a thread was ready but had no core), per
    second of wall time, so a CPU-bound loop on a shared machine still reads as CPU-bound.

    - serial mode: this process demands >= 0.75 cores -> CPU-bound in this process; a child
      process (server) >= 0.5 -> CPU-bound in the server; otherwise waiting (I/O, RPC, sleeps);
    - threads/asyncio: speedup >= 1.3 -> parallel; no gain while the mode demanded >= 1.5
      cores (and 1.4x the serial demand) but was granted far fewer -> parallel-capable but
      starved by other processes; no gain while the process stayed near one core although
      serial was CPU-bound here -> serialised (GIL-bound, or one server thread); otherwise
      overheads (thread hand-offs cost about as much as the work) or contention.
    """
    serial = modes.get("serial")
    if serial is None:
        return {"serial": "not measured"}
    cores = _nz(serial["cpu_cores"])
    demand = cores + _nz(serial["runq_wait_cores"])
    child = _nz(serial["child_cpu_cores"]) + _nz(serial["child_runq_wait_cores"])
    if demand >= 0.75:
        where = (f"CPU-bound in this process ({cores:.2f} cores busy, {demand:.2f} demanded "
                 f"serially)")
    elif child >= 0.5:
        where = (f"CPU-bound in the server process ({child:.2f} server cores demanded, "
                 f"{cores:.2f} client cores busy): the client waits")
    else:
        where = (f"waiting ({demand:.2f} client cores, {child:.2f} server cores demanded): "
                 f"I/O, RPC or sleeps dominate")
    out = {"serial": where}
    for mode in ("threads", "asyncio"):
        m = modes.get(mode)
        if m is None:
            continue
        sp = m.get("speedup_p50") or 0.0
        used = _nz(m["cpu_cores"]) + _nz(m["child_cpu_cores"])
        wanted = _nz(m["cpu_cores"]) + _nz(m["runq_wait_cores"])
        if sp >= 1.3:
            why = f"parallel: {sp:.2f}x over serial with {used:.2f} cores busy"
        elif wanted >= 1.5 and wanted >= 1.4 * demand and _nz(m["cpu_cores"]) < 0.8 * wanted:
            why = (f"parallel-capable but starved ({sp:.2f}x): {wanted:.2f} cores demanded "
                   f"(the backend releases the GIL) and only {_nz(m['cpu_cores']):.2f} granted - "
                   f"other processes hold the cores; measure on a quiet machine")
        elif demand >= 0.75 and wanted < 1.3:
            why = (f"no gain ({sp:.2f}x): the work stays serialised (~1 core demanded) - "
                   f"GIL-bound, or one server thread")
        else:
            why = (f"no gain ({sp:.2f}x) with {used:.2f} cores busy: thread hand-offs cost "
                   f"about as much as the searches, or the cores are taken by others")
        out[mode] = why
    return out


def _qrels_for(spec: FanoutSpec, queries: PreparedQueries) -> dict[str, dict[str, int]]:
    """The query collection's qrels, doc ids prefixed with every member that holds that
    collection (judged docs absent from a sample are kept: they count as misses)."""
    holders = [c.namespace or c.name for c in spec.collections
               if ALIASES.get(c.source, c.source) == ALIASES.get(spec.queries.source,
                                                                spec.queries.source)]
    out: dict[str, dict[str, int]] = {}
    for qid in queries.ids:
        docs = queries.collection.qrels.get(qid, {})
        out[qid] = {f"{h}/{d}": g for h in dict.fromkeys(holders) for d, g in docs.items()}
    return out


def quality(spec: FanoutSpec, run: FanoutRun, queries: PreparedQueries,
            members: list[Member]) -> dict[str, Any]:
    """nDCG@10 / recall@10 / MRR@10 (ranx, via :mod:`retrieval.stats.irmetrics`) of each single
    collection's list and of the fused lists (RRF and score merge) against the query
    collection's qrels; plus whether RRF here agrees with ``ranx.fuse``."""
    from retrieval.stats.irmetrics import evaluate_rankings

    qrels = _qrels_for(spec, queries)
    if not any(qrels.values()):
        return {"available": False, "reason": f"'{spec.queries.source}' queries have no qrels "
                f"for any collection in this fan-out"}
    per_member: dict[str, dict[str, list[tuple[str, float]]]] = {m.name: {} for m in members}
    for qid, ans in zip(queries.ids, run.answers):
        for name, a in ans.answers.items():
            per_member[name][qid] = a.ranked
    weights = {m.name: m.weight for m in members}
    fused_rrf = {q: rrf({n: per_member[n][q] for n in per_member}, spec.k, rrf_k=spec.rrf_k,
                        weights=weights) for q in queries.ids}
    fused_score = {q: score_merge({n: per_member[n][q] for n in per_member}, spec.k)
                   for q in queries.ids}
    rankings: dict[str, dict[str, list[str]]] = {
        f"only {n}": {q: [d for d, _ in lst] for q, lst in per_member[n].items()}
        for n in per_member
    }
    rankings["fused rrf"] = {q: [d for d, _ in v] for q, v in fused_rrf.items()}
    rankings["fused score"] = {q: [d for d, _ in v] for q, v in fused_score.items()}
    rows = []
    for label, ranking in rankings.items():
        scores = evaluate_rankings(qrels, ranking, QUALITY_METRICS)
        spaces = list(dict.fromkeys(m.key_prefix[:-1] for m in members))
        share = _shares(ranking, spaces) if label.startswith("fused") else {}
        rows.append({"ranking": label, **scores.means, "n_queries": scores.n_queries,
                     "share": share})
    ranx_check = _ranx_agreement(per_member, fused_rrf, spec, weights)
    return {"available": True, "metrics": list(QUALITY_METRICS), "rows": rows,
            "qrels": f"{queries.collection.name} ({sum(map(len, qrels.values()))} judgments)",
            "ranx_rrf": ranx_check}


def _shares(ranking: Mapping[str, list[str]], names: list[str]) -> dict[str, float]:
    counts = dict.fromkeys(names, 0)
    total = 0
    for docs in ranking.values():
        for d in docs:
            counts[d.split("/", 1)[0]] += 1
            total += 1
    return {n: c / total for n, c in counts.items()} if total else {}


def _ranx_agreement(per_member: Mapping[str, Mapping[str, list[tuple[str, float]]]],
                    fused: Mapping[str, list[tuple[str, float]]], spec: FanoutSpec,
                    weights: Mapping[str, float]) -> dict[str, Any]:
    """Compare the hand-written RRF with ``ranx.fuse(method="rrf")`` on queries every member
    answered (ranx has no weights: checked only with equal weights)."""
    if len(set(weights.values())) > 1:
        return {"checked": False, "reason": "weighted RRF (ranx has no weights)"}
    qids = [q for q in fused if all(per_member[n].get(q) for n in per_member)]
    if not qids:
        return {"checked": False, "reason": "no query answered by every collection"}
    ref = rrf_ranx({n: {q: per_member[n][q] for q in qids} for n in per_member}, spec.k,
                   rrf_k=int(spec.rrf_k)) if float(spec.rrf_k).is_integer() else None
    if ref is None:
        return {"checked": False, "reason": "non-integer rrf_k"}
    w = next(iter(weights.values()), 1.0)
    same = sum(
        [d for d, _ in fused[q]] == [d for d, _ in ref[q]]
        and np.allclose([s for _, s in fused[q]], [w * s for _, s in ref[q]], rtol=1e-9)
        for q in qids
    )
    return {"checked": True, "queries": len(qids), "identical": same,
            "agrees": same == len(qids)}


def pool_runs(runs: list[FanoutRun]) -> FanoutRun:
    """Several rounds of one mode as one run: latencies concatenated, times summed; answers of
    the first round (every round answers the same queries)."""
    if len(runs) == 1:
        return runs[0]
    names = list(runs[0].member_ms)
    return FanoutRun(
        runs[0].mode, runs[0].answers, np.concatenate([r.latency_ms for r in runs]),
        sum(r.wall_s for r in runs), sum(r.cpu_s for r in runs),
        sum(r.child_cpu_s for r in runs),
        {n: np.concatenate([r.member_ms[n] for r in runs]) for n in names},
        wait_s=sum(r.wait_s for r in runs), child_wait_s=sum(r.child_wait_s for r in runs),
    )


def round_speedups(summary: dict[str, Any], per_round: Mapping[str, list[FanoutRun]]) -> None:
    """With several rounds, the speedup is the median over rounds of serial p50 / mode p50
    within the same round (modes interleaved, so a burst of load elsewhere hits all alike)."""
    serial = per_round.get("serial")
    if not serial:
        return
    for mode, runs in per_round.items():
        if mode == "serial":
            continue
        ratios = [float(np.percentile(s.latency_ms, 50) / np.percentile(r.latency_ms, 50))
                  for s, r in zip(serial, runs)]
        summary["modes"][mode]["speedup_p50_rounds"] = ratios
        summary["modes"][mode]["speedup_p50"] = float(np.median(ratios))
        summary["speedup"][mode] = float(np.median(ratios))
    summary["verdict"] = classify(summary["modes"])


def summarise(spec: FanoutSpec, facts: list[dict[str, Any]], runs: Mapping[str, FanoutRun],
               queries: PreparedQueries, members: list[Member]) -> dict[str, Any]:
    serial = runs.get("serial")
    modes = {m: mode_summary(r, serial) for m, r in runs.items()}
    first = next(iter(runs.values()))
    agree = {
        m: sum([d for d, _ in a.fused] == [d for d, _ in b.fused]
               for a, b in zip(first.answers, r.answers)) / len(r.answers)
        for m, r in runs.items()
    }
    return {
        "name": spec.name,
        "k": spec.k,
        "n_queries": len(queries.ids),
        "queries": f"{queries.collection.name} ({spec.queries.split})",
        "fusion": {"method": spec.fusion, "rrf_k": spec.rrf_k,
                   "weights": {m.name: m.weight for m in members}},
        "collections": facts,
        "modes": modes,
        "speedup": {m: s.get("speedup_p50") for m, s in modes.items() if m != "serial"},
        "verdict": classify(modes),
        "fused_identical_across_modes": agree,
        "quality": quality(spec, serial or first, queries, members),
    }



__all__ = [
    "QUALITY_METRICS",
    "classify",
    "mode_summary",
    "pool_runs",
    "quality",
    "round_speedups",
    "summarise",
]
