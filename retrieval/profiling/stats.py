"""Pure logic of ``rwb profile`` (numpy, no I/O): per-stage percentiles, each stage's share of the
end-to-end percentiles along the critical path, tail attribution, p99 exemplars, the remedy
waterfall and the lab-vs-production comparison.

Durations are **milliseconds**. A request is a :class:`RequestRecord`: its end-to-end time and
its spans. Top-level stages (children of the request) run one after another, so they lie on the
critical path; the collections under ``retrieve`` may overlap (parallel mode): they are reported
on their own (``retrieve/<name>``) and counted once, through ``retrieve``'s wall time, in the
shares. What the stages do not cover (hand-offs between them, span bookkeeping) is ``overhead``.

Percentiles are numpy's ``inverted_cdf`` (the smallest value with at least q% of the values at or
below it), the definition the load bench checks its HDR figures against.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

QS: tuple[float, ...] = (50.0, 95.0, 99.0)
OVERHEAD = "overhead"


@dataclass(frozen=True)
class SpanRecord:
    """One timed piece of a request. ``stage``: ``embed``, ``retrieve``, ``retrieve/<name>``, ...;
    ``parent``: the stage it sits under (None: directly under the request). Clock: the
    ``perf_counter_ns`` of the process, nanoseconds."""

    stage: str
    name: str
    start_ns: int
    end_ns: int
    parent: str | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclass(frozen=True)
class RequestRecord:
    """One request: ``ms`` end to end; ``spans`` its stages; ``trace_id`` (32 hex digits) when it
    was traced; ``ranked`` the final list (doc keys, best first)."""

    index: int
    query_id: str
    start_ns: int
    end_ns: int
    spans: tuple[SpanRecord, ...]
    ranked: tuple[str, ...] = ()
    trace_id: str | None = None
    cache_hit: bool | None = None
    cached_from: str | None = None  # query id whose entry answered a hit
    fallback: bool = False

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6

    def top_level(self) -> dict[str, float]:
        """Top-level stage -> ms (a stage met twice is summed)."""
        out: dict[str, float] = {}
        for s in self.spans:
            if s.parent is None:
                out[s.stage] = out.get(s.stage, 0.0) + s.ms
        return out

    def overhead_ms(self) -> float:
        """End to end minus the top-level stages: time no stage accounts for (>= 0 when the
        stages do not overlap)."""
        return self.ms - sum(self.top_level().values())


def pct(x: Sequence[float] | np.ndarray, q: float) -> float | None:
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        return None
    return float(np.percentile(a, q, method="inverted_cdf"))


def percentiles(x: Sequence[float] | np.ndarray) -> dict[str, float | None]:
    return {f"p{int(q)}_ms": pct(x, q) for q in QS}


def stage_order(records: Sequence[RequestRecord]) -> list[str]:
    """Stages in the order they first ran (top-level first, each followed by its children)."""
    seen: dict[str, None] = {}
    for r in records:
        for s in r.spans:
            if s.parent is None:
                seen.setdefault(s.stage)
    kids: dict[str, list[str]] = {}
    for r in records:
        for s in r.spans:
            if s.parent is not None and s.stage not in kids.setdefault(s.parent, []):
                kids[s.parent].append(s.stage)
    out: list[str] = []
    for st in seen:
        out.append(st)
        out.extend(kids.get(st, []))
    return out


def _matrix(records: Sequence[RequestRecord], stages: Sequence[str]) -> np.ndarray:
    """(n_requests, n_stages) ms of the top-level stages (0 where a stage did not run)."""
    m = np.zeros((len(records), len(stages)))
    col = {s: i for i, s in enumerate(stages)}
    for i, r in enumerate(records):
        for st, ms in r.top_level().items():
            m[i, col[st]] = ms
    return m


def shares(records: Sequence[RequestRecord], stages: Sequence[str]) -> dict[str, dict[str, float]]:
    """Each top-level stage's share of the end-to-end pXX (50/95/99): its part of the total time
    of the requests at or above the end-to-end pXX (the critical path: parallel collections are
    inside ``retrieve``'s wall time, counted once). ``overhead`` takes the rest; the shares of a
    percentile add up to 1."""
    e2e = np.array([r.ms for r in records])
    m = _matrix(records, stages)
    out: dict[str, dict[str, float]] = {s: {} for s in [*stages, OVERHEAD]}
    for q in QS:
        cut = pct(e2e, q)
        sel = e2e >= (cut if cut is not None else 0.0)
        total = float(e2e[sel].sum())
        key = f"p{int(q)}"
        for j, s in enumerate(stages):
            out[s][key] = float(m[sel, j].sum()) / total if total > 0 else 0.0
        out[OVERHEAD][key] = 1.0 - sum(out[s][key] for s in stages) if total > 0 else 0.0
    return out


def critical_child(r: RequestRecord, parent: str) -> str | None:
    """The child of ``parent`` that ended last (the one the parent waited for)."""
    kids = [s for s in r.spans if s.parent == parent]
    return max(kids, key=lambda s: s.end_ns).stage if kids else None


def stage_rows(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """The JSON ``stages``: one row per stage (children too) with n, p50/p95/p99 (ms, over the
    requests where it ran), mean and its shares of the end-to-end percentiles (top-level stages
    and ``overhead``; children get ``critical``: the fraction of requests it was the slowest
    child of its parent), then the end-to-end row ``request``."""
    order = stage_order(records)
    top = [s for s in order if "/" not in s]
    sh = shares(records, top)
    rows: list[dict[str, Any]] = []
    for st in order:
        vals = [s.ms for r in records for s in r.spans if s.stage == st]
        row: dict[str, Any] = {"name": st, "n": len(vals), **percentiles(vals),
                               "mean_ms": float(np.mean(vals)) if vals else None}
        if st in sh:
            row["shares"] = sh[st]
        else:
            parent = st.split("/", 1)[0]
            ran = [r for r in records if any(s.stage == parent for s in r.spans)]
            hits = sum(critical_child(r, parent) == st for r in ran)
            row["critical"] = hits / len(ran) if ran else 0.0
        rows.append(row)
    over = [r.overhead_ms() for r in records]
    rows.append({"name": OVERHEAD, "n": len(over), **percentiles(over),
                 "mean_ms": float(np.mean(over)) if over else None, "shares": sh[OVERHEAD]})
    e2e = [r.ms for r in records]
    rows.append({"name": "request", "n": len(e2e), **percentiles(e2e),
                 "mean_ms": float(np.mean(e2e)) if e2e else None,
                 "shares": dict.fromkeys((f"p{int(q)}" for q in QS), 1.0)})
    return rows


def tail_attribution(records: Sequence[RequestRecord], frac: float = 0.01) -> dict[str, Any]:
    """For the slowest ``frac`` of requests (at least one): the stage that made each slow - the
    top-level stage with the largest excess over its own median (for ``retrieve``, the collection
    it waited for) - counted per stage, with the requests (query id, trace id, ms, culprit)."""
    if not records:
        return {"n": 0, "by_stage": {}, "requests": []}
    order = stage_order(records)
    top = [s for s in order if "/" not in s]
    m = _matrix(records, top)
    med = np.median(m, axis=0)
    n = max(1, math.ceil(len(records) * frac))
    slow = sorted(range(len(records)), key=lambda i: -records[i].ms)[:n]
    by: dict[str, int] = {}
    rows = []
    for i in slow:
        r = records[i]
        excess = m[i] - med
        j = int(np.argmax(excess))
        culprit = top[j]
        if culprit == "retrieve":
            culprit = critical_child(r, "retrieve") or culprit
        by[culprit] = by.get(culprit, 0) + 1
        rows.append({"query_id": r.query_id, "request": r.index, "trace_id": r.trace_id,
                     "ms": r.ms,
                     "stage": culprit, "excess_ms": float(excess[j]),
                     "stages_ms": {s: float(m[i, k]) for k, s in enumerate(top)}})
    return {"n": n, "frac": frac, "by_stage": dict(sorted(by.items(), key=lambda kv: -kv[1])),
            "requests": rows}


def exemplars(records: Sequence[RequestRecord], q: float = 99.0,
              limit: int = 5) -> list[dict[str, Any]]:
    """The requests at or above the end-to-end pq, slowest first: their trace ids link the
    summary to the slow traces."""
    cut = pct([r.ms for r in records], q)
    if cut is None:
        return []
    slow = sorted((r for r in records if r.ms >= cut), key=lambda r: -r.ms)[:limit]
    return [{"query_id": r.query_id, "trace_id": r.trace_id, "ms": r.ms} for r in slow]


def cache_figures(records: Sequence[RequestRecord],
                  relevant: Mapping[str, set[str]] | None) -> dict[str, Any] | None:
    """Cache hit rate and a false-hit estimate: a hit answered from another query's entry whose
    relevant documents (qrels) share none with this query's (None without qrels)."""
    looked = [r for r in records if r.cache_hit is not None]
    if not looked:
        return None
    hits = [r for r in looked if r.cache_hit]
    false = None
    if relevant is not None and hits:
        judged = [r for r in hits if relevant.get(r.query_id) and r.cached_from is not None]
        bad = [r for r in judged if r.cached_from != r.query_id
               and not (relevant.get(r.query_id, set()) & relevant.get(r.cached_from or "", set()))]
        false = len(bad) / len(judged) if judged else None
    return {"lookups": len(looked), "hits": len(hits), "hit_rate": len(hits) / len(looked),
            "false_hit_rate": false}


#: bootstrap resamples and two-sided level of the noise band of a remedy's P95 change
NOISE_RESAMPLES, NOISE_LEVEL = 400, 0.95


def p95_change_band(before: Sequence[float], after: Sequence[float], seed: int = 0
                    ) -> tuple[float, float]:
    """The ``NOISE_LEVEL`` band (ms) of P95(before) - P95(after) over per-request latencies
    (ms), both passes resampled with replacement (seeded): a band holding 0 is a change inside
    the noise."""
    a = np.asarray(before, dtype=np.float64)
    b = np.asarray(after, dtype=np.float64)
    rng = np.random.default_rng(seed)
    diffs = np.empty(NOISE_RESAMPLES)
    for i in range(NOISE_RESAMPLES):
        diffs[i] = (np.percentile(a[rng.integers(0, a.size, a.size)], 95, method="inverted_cdf")
                    - np.percentile(b[rng.integers(0, b.size, b.size)], 95,
                                    method="inverted_cdf"))
    lo = (1 - NOISE_LEVEL) / 2
    return float(np.quantile(diffs, lo)), float(np.quantile(diffs, 1 - lo))


def _p95(ms: Sequence[float]) -> float:
    return float(np.percentile(np.asarray(ms, dtype=np.float64), 95, method="inverted_cdf"))


def credited_gain(prev: Mapping[str, Any], cur: Mapping[str, Any]) -> dict[str, Any]:
    """What a remedy step is credited with (ms of P95): the measured change, capped at the P95
    of the stage it acts on in the previous step (``cur['stage']`` in ``prev['stages']``: a
    remedy cannot save more than its stage takes), and 0 when the change lies inside the noise
    (:func:`p95_change_band` of the two passes' ``request_ms``, when both have them). A step
    whose previous setting was measured again interleaved with it (``cur['before_ms']``: the
    previous step's requests and the repeats) is compared with all of those; with the passes
    themselves (``cur['before_passes']`` / ``cur['after_passes']``: per-request ms of each pass,
    before / after / before / after ...) the change is the median of the passes' P95s, and a
    change no larger than the spread between passes of one setting is noise too (a pass that was
    slow by chance, e.g. a busy moment, is not a gain)."""
    before_ms = cur.get("before_ms") or prev.get("request_ms")
    before_p95 = prev["p95_ms"] or 0.0
    after_p95 = cur["p95_ms"] or 0.0
    if cur.get("before_ms"):  # the previous setting measured again, interleaved with this one
        before_p95 = _p95(cur["before_ms"])
    out: dict[str, Any] = {}
    spread = None
    bp, ap = cur.get("before_passes") or [], cur.get("after_passes") or []
    if len(bp) >= 2 and len(ap) >= 2:  # interleaved passes: judged pass by pass
        b, a = [_p95(x) for x in bp], [_p95(x) for x in ap]
        before_p95, after_p95 = float(np.median(b)), float(np.median(a))
        spread = max(float(np.ptp(b)), float(np.ptp(a)))
        out["pass_p95_ms"] = {"before": b, "after": a}
        out["between_pass_spread_ms"] = spread
    measured = before_p95 - after_p95
    out["p95_change_ms"] = measured
    gain = measured
    stage = cur.get("stage")
    stage_ms = (prev.get("stages") or {}).get(stage) if stage else None
    if stage_ms is not None and gain > float(stage_ms):
        gain = float(stage_ms)
        out["capped_at_stage_ms"] = float(stage_ms)
    if before_ms and cur.get("request_ms"):
        lo, hi = p95_change_band(before_ms, cur["request_ms"])
        out["noise_band_ms"] = [lo, hi]
        out["within_noise"] = lo <= 0.0 <= hi
    if spread is not None and abs(measured) <= spread:
        out["within_noise"] = True  # the passes of one setting differ by more than the change
    if out.get("within_noise"):
        gain = 0.0
    out["p95_saved_ms"] = gain
    return out


def waterfall(steps: Sequence[Mapping[str, Any]], quality_key: str | None) -> dict[str, Any]:
    """The remedy waterfall from measured steps (each: ``step``, ``p50_ms``, ``p95_ms``,
    ``p99_ms``, quality; optionally ``stage``, ``stages`` and ``request_ms``): per step the
    credited P95 gain from the previous step (:func:`credited_gain`: capped at its stage's time,
    0 inside the noise; ``p95_change_ms`` is the raw change) and the cumulative, and ``roi``: P95
    ms saved per unit of quality lost (inf when none was lost and time was saved). ``best``: the
    applied step with the highest roi among those with a gain (none inside the noise)."""
    rows: list[dict[str, Any]] = []
    prev: Mapping[str, Any] | None = None
    first = steps[0] if steps else None
    for s in steps:
        row = {k: v for k, v in s.items()
               if k not in ("request_ms", "before_ms", "before_passes", "after_passes")}
        if prev is not None and s.get("applied", True):
            row.update(credited_gain(prev, s))
            saved = row["p95_saved_ms"]
            lost = None
            if quality_key and prev.get(quality_key) is not None \
                    and s.get(quality_key) is not None:
                lost = max(0.0, float(prev[quality_key]) - float(s[quality_key]))
            row["quality_lost"] = lost
            if lost is None or lost <= 1e-12:
                row["roi"] = math.inf if saved > 0 else 0.0
            else:
                row["roi"] = saved / lost
        if first is not None and first.get("p95_ms") and s.get("p95_ms") is not None:
            row["p95_vs_baseline"] = (s["p95_ms"] or 0.0) / first["p95_ms"]
        rows.append(row)
        if s.get("applied", True):
            prev = s
    cands = [r for r in rows if r.get("roi") is not None and r.get("p95_saved_ms", 0) > 0]
    best = max(cands, key=lambda r: (r["roi"], r["p95_saved_ms"]))["step"] if cands else None
    return {"steps": rows, "best": best, "quality_key": quality_key}


# --------------------------------------------------------------------------- production traces


def stage_of_span(span: Mapping[str, Any], mapping: Mapping[str, str],
                  stages: set[str]) -> str | None:
    """The stage a production span stands for: its ``rwb.stage`` attribute, else the mapping of
    its name, else its name when that is a stage; the root span is ``request``."""
    if not span.get("parent"):
        return "request"
    st = span.get("attrs", {}).get("rwb.stage")
    if isinstance(st, str):
        return st
    name = str(span.get("name", ""))
    if name in mapping:
        return mapping[name]
    return name if name in stages else None


def compare(prod_spans: Sequence[Mapping[str, Any]], lab_rows: Sequence[Mapping[str, Any]],
            mapping: Mapping[str, str]) -> dict[str, Any]:
    """Per stage, production P50/P95/P99 (from spans: ``name``, ``parent``, ``ms``, ``attrs``)
    next to the lab's, and production minus lab at P95/P99: where production is slower than the
    stage itself, the time goes outside retrieval (queueing, network, gateway)."""
    stages = {str(r["name"]) for r in lab_rows}
    per: dict[str, list[float]] = {}
    unmapped: dict[str, int] = {}
    for sp in prod_spans:
        st = stage_of_span(sp, mapping, stages)
        if st is None:
            unmapped[str(sp.get("name"))] = unmapped.get(str(sp.get("name")), 0) + 1
            continue
        per.setdefault(st, []).append(float(sp["ms"]))
    rows = []
    for lab in lab_rows:
        name = str(lab["name"])
        if name not in per:
            continue
        prod = percentiles(per[name])
        row: dict[str, Any] = {"name": name, "n_prod": len(per[name])}
        for q in QS:
            k = f"p{int(q)}_ms"
            row[f"prod_{k}"] = prod[k]
            row[f"lab_{k}"] = lab.get(k)
            pv, lv = prod[k], lab.get(k)
            if pv is not None and lv is not None:
                row[f"gap_{k}"] = pv - float(lv)
        rows.append(row)
    return {"stages": rows, "unmapped_spans": unmapped,
            "traces": len({sp.get("trace_id") for sp in prod_spans})}


__all__ = [
    "OVERHEAD",
    "QS",
    "RequestRecord",
    "SpanRecord",
    "cache_figures",
    "compare",
    "credited_gain",
    "critical_child",
    "exemplars",
    "p95_change_band",
    "pct",
    "percentiles",
    "shares",
    "stage_of_span",
    "stage_order",
    "stage_rows",
    "tail_attribution",
    "waterfall",
]
