"""``rwb verify FILE`` for a filtered operating-point table (kind ``ann-filtered``).

The file's ``source.spec`` is the resolved sweep spec the table came from: the dataset, the
filter workload (rebuilt with the spec's seed: the same per-query filters), ``k``, the query
split and the confidence rule. Each operating point is rebuilt from its ``source`` (backend,
build, search, over-fetch: the params it was measured with) and re-measured on its bucket with
its strategy. The table holds when, for every bucket that has a strategy:

- the dataset is the one the table was tuned on (fingerprint);
- the point's ``config`` is the export of its ``source`` params (an edited field fails, named);
- the re-measured lower confidence bound on filtered mean recall@k over the tuning queries is
  >= the target, and the held-out recall is >= the target (the sweep's own two rules);
- the recorded recall, bound and held-out recall are reproduced within the sampling tolerance
  of :mod:`retrieval.export.verify` (exactly for a seeded one-thread build or a cached one).

What is judged is the file's ``config`` run on the file's engine (its inverse, as for ANN files):
a point translated from another backend is measured on that engine, and its recorded evidence is
re-measured on the backend that produced it. An engine rwb cannot run is "not measurable here"
(exit 3), never HOLDS. Latency (p95, ms) is reported, not judged.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError
from retrieval.export.files import field_of
from retrieval.export.filtered import FILE_KIND, entry_config
from retrieval.export.inverse import Rebuilt, inverse_for
from retrieval.export.registry import register_verifier
from retrieval.export.verify import NotMeasurable, config_diffs, evidence_checks

EPS = 1e-9


@dataclass(frozen=True)
class FilteredVerifyReport:
    """``holds`` when every check passed (``checks``: one row per check, bucket named)."""

    path: str
    holds: bool
    engine: str
    target: float
    dataset: str
    fingerprint_matches: bool
    checks: list[dict[str, Any]]
    points: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "measurable": True}


def _check(name: str, measured: Any, expected: Any, passed: bool) -> dict[str, Any]:
    return {"check": name, "measured": measured, "expected": expected, "passed": bool(passed)}


def _source_of(op: Mapping[str, Any], where: str) -> dict[str, Any]:
    src = op.get("source")
    if not isinstance(src, Mapping) or not src.get("backend"):
        raise ConfigError(f"{where}: field 'source' is missing; the file was exported before "
                          f"rwb recorded each point's params: export the run again")
    return dict(src)


@register_verifier(FILE_KIND)
def verify_filtered_file(doc: Mapping[str, Any], path: Path | str
                         ) -> FilteredVerifyReport | NotMeasurable:
    """Re-measure every operating point of a filtered export (see the module doc)."""
    from retrieval.tune.spec import parse_spec

    where = str(path)
    engine = str(field_of(doc, "engine", where, "string"))
    ops = field_of(doc, "operating_points", where, "list")
    spec_doc = doc.get("source", {}).get("spec") if isinstance(doc.get("source"), Mapping) \
        else None
    if not isinstance(spec_doc, Mapping):
        raise ConfigError(f"{where}: field 'source.spec' is missing; the file was exported "
                          f"before rwb recorded the sweep spec in it: export the run again")
    spec = parse_spec(spec_doc, source=f"{where}: source.spec")
    if spec.filters is None:
        raise ConfigError(f"{where}: field 'source.spec.filters' is missing (an ann-filtered "
                          f"file comes from a sweep with filters)")
    target = float(field_of(doc, "evidence.target_recall", where, "number", gt=0.0, le=1.0))
    measured = [o for o in ops if isinstance(o, Mapping) and o.get("strategy")]
    for i, op in enumerate(measured):
        _source_of(op, f"{where}: operating_points[{i}]")
    if inverse_for(engine) is None and any(o.get("config") for o in measured):
        return NotMeasurable(where, engine, (
            f"rwb cannot run {engine}: the table is a translation, never measured on {engine}; "
            f"export the run to an engine rwb runs and verify that"))
    return _measure(doc, where, engine, spec, target, measured)


def _measure(doc: Mapping[str, Any], where: str, engine: str, spec: Any, target: float,
             ops: list[Mapping[str, Any]]) -> FilteredVerifyReport:
    from retrieval.evaluate import Evaluator
    from retrieval.tune.decide import lower_bound, split_queries
    from retrieval.tune.fmeasure import FilteredBench
    from retrieval.tune.frun import bind_spec_workload
    from retrieval.tune.runner import load_vectors

    ds = load_vectors(spec)
    recorded_fp = (doc.get("evidence") or {}).get("dataset", {}).get("fingerprint")
    same_data = recorded_fp is not None and recorded_fp == ds.fingerprint
    checks = [_check("dataset fingerprint", ds.fingerprint, recorded_fp, same_data)]
    metric, dim, k = str(ds.metric), int(ds.dim), int(spec.k)
    split = split_queries(ds.n_queries, spec.tune.heldout_fraction, spec.seed)
    points: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rwb-verify-") as work, \
            Evaluator.for_spec(spec, ds, Path(work)) as ev:
        buckets = {b.name: b for b in bind_spec_workload(spec, ds, ev)}
        bench = FilteredBench(ev, list(buckets.values()))
        for op in ops:
            name, strategy = str(op.get("bucket")), str(op["strategy"])
            src = _source_of(op, f"{where}: bucket {name}")
            tag = f"[{name}] "
            b = buckets.get(name)
            if b is None:
                checks.append(_check(tag + "bucket exists", None,
                                     f"one of {', '.join(buckets)}", False))
                continue
            diffs = config_diffs(op.get("config"), entry_config(op, engine, metric, dim, k))
            checks.append(_check(tag + "config is the one measured",
                                 "; ".join(diffs) or "every field matches the source params",
                                 f"the {engine} export of source {src['backend']} params",
                                 not diffs))
            # what the file says, on the engine it names (a translated point is measured there)
            run_on = _measure_on(op, src, engine, metric, dim, k, f"{where}: bucket {name}")
            overfetch = src.get("overfetch")
            built = ev.build(run_on.backend, run_on.build)
            full = bench.measure(built, run_on.search, strategy, b, label=run_on.backend,
                                 overfetch=overfetch, modes=spec.modes, query_idx=split.tune,
                                 query_set="tune")
            row = full.row(target)
            lb = lower_bound(full.per_query_recall, k, spec.tune.confidence, spec.seed)
            checks.append(_check(tag + "lower bound >= target", round(lb, 6), target,
                                 lb >= target - EPS))
            held = None
            if split.heldout.size:
                held = _heldout(bench, built, run_on.search, strategy, b, overfetch, split)
                checks.append(_check(tag + "held-out recall >= target", round(held, 6), target,
                                     held >= target - EPS))
            # the evidence, against the backend and params that produced it
            ev_built, ev_row, ev_lb, ev_n, ev_held = built, row, lb, full.per_query_recall.size, \
                held
            same = run_on.backend == src["backend"] and not diffs
            if not same:
                ev_built = ev.build(str(src["backend"]), src.get("build") or {})
                s_full = bench.measure(ev_built, dict(src.get("search") or {}), strategy, b,
                                       label=str(src["backend"]), overfetch=overfetch,
                                       modes=("batch",), query_idx=split.tune, query_set="tune",
                                       warmup=0, repeats=1)
                ev_row, ev_n = s_full.row(target), s_full.per_query_recall.size
                ev_lb = lower_bound(s_full.per_query_recall, k, spec.tune.confidence, spec.seed)
                ev_held = None if held is None else _heldout(
                    bench, ev_built, dict(src.get("search") or {}), strategy, b, overfetch, split)
            same_index = ev.build_threads == 1 or ev_built.outcome.cache == "hit"
            ev_doc = op.get("evidence") or {}
            for c in evidence_checks(
                {"recall": ev_doc.get("recall"),
                 "recall_lower_bound": ev_doc.get("recall_lower_bound"),
                 "heldout_recall": ev_doc.get("heldout_recall")},
                _Figures(float(ev_row["recall"]), int(ev_n), ev_lb),
                None if ev_held is None else _Figures(ev_held, int(split.heldout.size)),
                str(src["backend"]), k, 1 if same_index else ev.build_threads,
            ):
                checks.append({**c, "check": tag + str(c["check"])})
            points.append({"bucket": name, "strategy": strategy, "backend": run_on.backend,
                           "measured_with": src["backend"],
                           "recall": row["recall"], "recall_lower_bound": lb,
                           "heldout_recall": held, "p95_ms": row.get("p95_ms"),
                           "recorded_p95_ms": ev_doc.get("p95_ms")})
            ev.release(built)
            if ev_built is not built:
                ev.release(ev_built)
    return FilteredVerifyReport(where, all(c["passed"] for c in checks), engine, target,
                                ds.name, same_data, checks, points)


def _measure_on(op: Mapping[str, Any], src: Mapping[str, Any], engine: str, metric: str,
                dim: int, k: int, where: str) -> Rebuilt:
    """The backend + params that run the point's ``config`` on ``engine`` (its inverse); a
    prefilter point (no config: exact over the matches) runs its source params."""
    if op.get("strategy") == "prefilter" or not op.get("config"):
        return Rebuilt(str(src["backend"]), dict(src.get("build") or {}),
                       dict(src.get("search") or {}))
    inv = inverse_for(engine)
    assert inv is not None  # checked before anything was measured
    r = inv(op["config"], metric, dim, k, where)
    hybrid = op.get("hybrid_query")
    if r.backend == "redis" and isinstance(hybrid, Mapping):  # carried beside the filter form
        r = Rebuilt(r.backend, r.build, {**r.search, **hybrid})
    return r


def _heldout(bench: Any, built: Any, search: dict[str, Any], strategy: str, b: Any,
             overfetch: int | None, split: Any) -> float:
    h = bench.measure(built, search, strategy, b, label=built.backend, overfetch=overfetch,
                      modes=("batch",), query_idx=split.heldout, query_set="heldout", warmup=0,
                      repeats=1)
    return float(h.row(None)["recall"])


@dataclass(frozen=True)
class _Figures:
    """A re-measured mean recall over ``n_queries`` queries (and its lower bound, for the tuning
    queries), as :func:`evidence_checks` reads it."""

    recall: float
    n_queries: int
    recall_lb: float = 0.0


__all__ = ["FilteredVerifyReport", "verify_filtered_file"]
