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
  of :mod:`retrieval.exporting.verify` (exactly for a seeded one-thread build or a cached one).

What is judged is the file's ``config`` run on the file's engine (its inverse, as for ANN files):
a point translated from another backend is measured on that engine, and its recorded evidence is
re-measured on the backend that produced it. An engine rwb cannot run is "not measurable here"
(exit 3), never HOLDS. Latency (p95, ms) is reported, not judged.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError, param_error
from retrieval.exporting.files import check_layout, field_of
from retrieval.exporting.filtered import EVIDENCE_FIELDS, FILE_KIND, TOP_FIELDS, entry_config
from retrieval.exporting.inverse import Rebuilt, inverse_for
from retrieval.exporting.portable import stated_build
from retrieval.exporting.registry import register_verifier
from retrieval.exporting.verify import (
    NotMeasurable,
    config_diffs,
    evidence_checks,
    k_check,
    known_engine,
)
from retrieval.filtering.spec import STRATEGIES
from retrieval.indexes.engine import engine_of_backend

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
    # files exported with every build default resolved: as the backend takes them again
    return {**src, "build": stated_build(str(src["backend"]), src.get("build") or {})}


#: the fields of one operating point as the export writes them (retrieval/exporting/filtered.py;
#: ``hybrid_query``: Redis's filter-only knobs)
OP_FIELDS = ("bucket", "selectivity", "strategy", "measured_with", "source", "evidence",
             "config", "search", "note", "filter_in_engine", "hybrid_query")
OP_EVIDENCE_FIELDS = ("p95_ms", "qps", "recall", "recall_lower_bound", "heldout_recall")
OP_SOURCE_FIELDS = ("backend", "build", "search", "overfetch")


def _known_keys(entry: Mapping[str, Any], allowed: tuple[str, ...], field: str,
                where: str) -> None:
    """A key the export never writes is refused (one line, exit 2): an edited file."""
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field '{field}.{unknown[0]}' (an rwb export never "
                          f"writes it); allowed: {', '.join(allowed)}")


@register_verifier(FILE_KIND)
def verify_filtered_file(doc: Mapping[str, Any], path: Path | str
                         ) -> FilteredVerifyReport | NotMeasurable:
    """Re-measure every operating point of a filtered export (see the module doc)."""
    from retrieval.tune.spec import parse_spec

    where = str(path)
    check_layout(doc, where, FILE_KIND, TOP_FIELDS, EVIDENCE_FIELDS)
    engine = known_engine(doc, where)
    ops = field_of(doc, "operating_points", where, "list")
    if not ops:  # nothing to measure would hold vacuously
        raise param_error("operating_points", "a non-empty list (one point per bucket with a "
                          "chosen setting)", ops, where=where)
    for i, op in enumerate(ops):  # the export writes only points with a strategy
        if not isinstance(op, Mapping):
            raise param_error(f"operating_points[{i}]", "a mapping", op, where=where)
        _known_keys(op, OP_FIELDS, f"operating_points[{i}]", where)
        for part, allowed in (("evidence", OP_EVIDENCE_FIELDS), ("source", OP_SOURCE_FIELDS)):
            if isinstance(op.get(part), Mapping):
                _known_keys(op[part], allowed, f"operating_points[{i}].{part}", where)
        if op.get("strategy") not in STRATEGIES:
            raise param_error(f"operating_points[{i}].strategy", f"one of "
                              f"{', '.join(STRATEGIES)}", op.get("strategy"), where=where)
    spec_doc = field_of(doc, "source.spec", where, "mapping", default=None)
    if spec_doc is None:
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
    from retrieval.evaluation import Evaluator
    from retrieval.tune.bucket_summary import bind_spec_buckets
    from retrieval.tune.decide import split_queries
    from retrieval.tune.filterbench import FilteredBench
    from retrieval.tune.runner import load_vectors

    ds = load_vectors(spec)
    recorded_fp = (doc.get("evidence") or {}).get("dataset", {}).get("fingerprint")
    same_data = recorded_fp is not None and recorded_fp == ds.fingerprint
    checks = [_check("dataset fingerprint", ds.fingerprint, recorded_fp, same_data)]
    metric, dim, k = str(ds.metric), int(ds.dim), int(spec.k)
    checks += k_check(doc, k, where)
    split = split_queries(ds.n_queries, spec.tune.heldout_fraction, spec.seed)
    points: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rwb-verify-") as work, \
            Evaluator.for_spec(spec, ds, Path(work)) as ev:
        buckets = {b.name: b for b in bind_spec_buckets(spec, ds, ev.gt.ids[:, 0])}
        bench = FilteredBench(ev, list(buckets.values()))
        built: dict[str, Any] = {}  # one build per backend + build params, shared by buckets

        def index(backend: str, build: Mapping[str, Any]) -> Any:
            key = json.dumps([backend, build], sort_keys=True, default=str)
            if key not in built:
                built[key] = ev.build(backend, dict(build))
            return built[key]

        for op in ops:
            name, strategy = str(op.get("bucket")), str(op["strategy"])
            src = _source_of(op, f"{where}: bucket {name}")
            tag = f"[{name}] "
            b = buckets.get(name)
            if b is None:
                checks.append(_check(tag + "bucket exists", None,
                                     f"one of {', '.join(buckets)}", False))
                continue
            sel = op.get("selectivity")
            same_sel = (isinstance(sel, int | float) and not isinstance(sel, bool)
                        and abs(float(sel) - b.selectivity) <= 1e-5 * max(b.selectivity, 1e-3))
            checks.append(_check(tag + "selectivity", round(b.selectivity, 6), sel, same_sel))
            diffs = config_diffs(op.get("config"), entry_config(op, engine, metric, dim, k))
            checks.append(_check(tag + "config is the one measured",
                                 "; ".join(diffs) or "every field matches the source params",
                                 f"the {engine} export of source {src['backend']} params",
                                 not diffs))
            # what the file says, on the engine it names (a translated point is measured there)
            run_on = _measure_on(op, src, engine, metric, dim, k, f"{where}: bucket {name}")
            overfetch = src.get("overfetch")
            scope = (strategy, b, overfetch, split, spec)

            on = index(run_on.backend, run_on.build)
            now = _remeasure(bench, on, run_on.search, *scope, modes=spec.modes)
            checks.append(_check(tag + "lower bound >= target", round(now.recall_lb, 6),
                                 target, now.recall_lb >= target - EPS))
            if now.heldout is not None:
                checks.append(_check(tag + "held-out recall >= target", round(now.heldout, 6),
                                     target, now.heldout >= target - EPS))
            # the evidence, against the backend and params that produced it
            ev_idx, was = on, now
            if run_on.backend != src["backend"] or diffs:
                ev_idx = index(str(src["backend"]), src.get("build") or {})
                was = _remeasure(bench, ev_idx, dict(src.get("search") or {}), *scope,
                                 modes=("batch",), warmup=0, repeats=1)
            same_index = ev.build_threads == 1 or ev_idx.outcome.cache == "hit"
            ev_doc = op.get("evidence") or {}
            held = None if was.heldout is None else _Figures(was.heldout,
                                                             int(split.heldout.size))
            for c in evidence_checks(
                {"recall": ev_doc.get("recall"),
                 "recall_lower_bound": ev_doc.get("recall_lower_bound"),
                 "heldout_recall": ev_doc.get("heldout_recall")},
                was, held, str(src["backend"]), k, 1 if same_index else ev.build_threads,
            ):
                checks.append({**c, "check": tag + str(c["check"])})
            points.append({"bucket": name, "strategy": strategy, "backend": run_on.backend,
                           "measured_with": src["backend"],
                           "recall": now.recall, "recall_lower_bound": now.recall_lb,
                           "heldout_recall": now.heldout, "p95_ms": now.p95_ms,
                           "recorded_p95_ms": ev_doc.get("p95_ms")})
        for idx in built.values():
            ev.release(idx)
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
    own = engine_of_backend(r.backend)
    for name in own.entry_search_fields if own is not None else ():
        carried = op.get(name)  # search params carried beside the filter form
        if isinstance(carried, Mapping):
            r = Rebuilt(r.backend, r.build, {**r.search, **carried})
    return r


def _remeasure(bench: Any, idx: Any, search: dict[str, Any], strategy: str, b: Any,
               overfetch: int | None, split: Any, spec: Any, **timing: Any) -> _Figures:
    """Filtered recall of ``search`` on the tuning queries (its lower bound by the spec's
    confidence rule, p95 ms when ``timing`` has a single mode) and on the held-out ones."""
    from retrieval.tune.decide import lower_bound
    from retrieval.tune.filterbench import filtered_row

    full = bench.measure(idx, search, strategy, b, label=idx.backend, overfetch=overfetch,
                         query_idx=split.tune, query_set="tune", **timing)
    row = filtered_row(full, None)
    held = None
    if split.heldout.size:
        h = bench.measure(idx, search, strategy, b, label=idx.backend, overfetch=overfetch,
                          modes=("batch",), query_idx=split.heldout, query_set="heldout",
                          warmup=0, repeats=1)
        held = float(filtered_row(h, None)["recall"])
    return _Figures(float(row["recall"]), int(full.per_query_recall.size),
                    lower_bound(full.per_query_recall, spec.k, spec.tune.confidence, spec.seed),
                    held, row.get("p95_ms"))


@dataclass(frozen=True)
class _Figures:
    """A re-measured mean recall over ``n_queries`` queries (and, for the tuning queries, its
    lower bound, the held-out recall and p95 ms), as :func:`evidence_checks` reads it."""

    recall: float
    n_queries: int
    recall_lb: float = 0.0
    heldout: float | None = None
    p95_ms: float | None = None


__all__ = ["FilteredVerifyReport", "verify_filtered_file"]
