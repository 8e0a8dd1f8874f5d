"""Filtered workloads in a run summary: the cliff per entry and strategy, the operating point
per selectivity bucket, the filters block, and the engine's own call for a chosen setting.

The cliff of each entry and strategy is the highest bucket selectivity with no feasible knob
value; ``operating_points``: per bucket, the lowest p95 among the choices that pass the
held-out check: strategy + knob, with the engine's own call (``engine_call``, from the engine
descriptor's ``filter_call``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.filtering.attrs import Attributes
from retrieval.filtering.spec import FilterSpec
from retrieval.indexes.base import SupportsFilter
from retrieval.indexes.engine import filter_call_text
from retrieval.indexes.registry import get_backend
from retrieval.tune.spec import SweepSpec
from retrieval.workload import Bucket, bind_workload

CLIFF_RULE = ("cliff_selectivity: the highest bucket selectivity at which no measured knob "
              "value (grid: any config; target sweep: the top of the knob range) reaches the "
              "target mean recall@k; null when every bucket reaches it. Recall is filtered "
              "recall@k (fewer-than-k rule: over the available matches).")
FEWER_THAN_K = ("a query whose filter matches m < k base vectors is scored over its m matches "
                "(hits / m); otherwise hits / k (missing ids count as misses)")



def engine_call(backend: str, strategy: str, search: dict[str, Any], overfetch: int | None,
                k: int) -> str:
    """How the operating point is written in the engine's own terms."""
    if strategy == "prefilter":
        return f"exact search over the matching rows (faiss.knn on the subset), k={k}"
    if strategy == "postfilter":
        shown = ", ".join(f"{n}={v}" for n, v in search.items()) or "exact"
        return (f"unfiltered search limit={k * (overfetch or 1)} ({shown}), then keep the "
                f"first {k} matching ids")
    return filter_call_text(backend, search, k)


def bind_spec_buckets(spec: SweepSpec, ds: VectorDataset, nearest: Any) -> list[Bucket]:
    """The spec's filter buckets on ``ds`` (``place: near`` uses ``nearest``: each query's
    exact unfiltered top-1 row, int64 (nq,))."""
    assert spec.filters is not None
    buckets = bind_workload(spec.filters, ds.attributes, ds.n_queries, nearest=nearest,
                            seed=spec.seed, where=f"{spec.source}: field 'filters'")
    if ds.attributes is not None:
        check_engine_filters(spec, buckets, ds.attributes)
    return buckets


def check_engine_filters(spec: SweepSpec, buckets: list[Bucket], attrs: Attributes) -> None:
    """Refuse, before anything is built or measured, a filter that a backend measured with the
    ``engine`` strategy cannot express faithfully (its ``check_filter(where, attrs)``, when it
    has one: e.g. a Redis TAG label that whitespace trimming merges with another)."""
    assert spec.filters is not None
    if "engine" not in spec.filters.strategies:
        return
    for i, e in enumerate(spec.indexes):
        check = getattr(get_backend(e.backend), "check_filter", None)
        if check is None:
            continue
        for b in buckets:
            for f in b.filters:
                try:
                    check(f.where, attrs)
                except ConfigError as exc:
                    raise ConfigError(f"{spec.source}: field 'indexes[{i}]' with filter bucket "
                                      f"'{b.name}': {exc}") from None


def bucket_names(fs: FilterSpec) -> list[str]:
    """The bucket names of ``fs`` in workload order (as :func:`bind_workload` names them)."""
    return [f.name for f in fs.fixed] + [f"sel={s:g}" for s in fs.selectivities]


def check_strategies(spec: SweepSpec) -> None:
    """Refuse ``engine`` for a backend without in-engine filtering, before anything runs."""
    assert spec.filters is not None
    if "engine" not in spec.filters.strategies:
        return
    for i, e in enumerate(spec.indexes):
        cls = get_backend(e.backend)
        if not issubclass(cls, SupportsFilter):
            raise ConfigError(
                f"{spec.source}: field 'indexes[{i}].backend' '{e.backend}' has no in-engine "
                f"filtering (SupportsFilter), but 'filters.strategies' has engine; allowed for "
                f"it: prefilter, postfilter")


def cliffs(rows: Iterable[dict[str, Any]], target: float | None
           ) -> tuple[dict[str, float | None], dict[str, dict[str, float | None]]]:
    """(cliff per label over its best strategy, cliff per label and strategy) from rows with
    ``label``, ``strategy``, ``bucket``, ``selectivity`` and ``meets`` (or recall)."""
    met: dict[tuple[str, str, str], bool] = {}
    sel: dict[str, float] = {}
    for r in rows:
        ok = r.get("meets")
        if ok is None:
            ok = target is not None and r["recall"] >= target - 1e-9
        key = (r["label"], r["strategy"], r["bucket"])
        met[key] = met.get(key, False) or bool(ok)
        sel[r["bucket"]] = float(r["selectivity"])
    by: dict[str, dict[str, float | None]] = {}
    for (label, strategy, bucket), ok in met.items():
        cur = by.setdefault(label, {}).get(strategy)
        if not ok:
            s = sel[bucket]
            by[label][strategy] = s if cur is None else max(cur, s)
        else:
            by[label].setdefault(strategy, None)
    best: dict[str, float | None] = {}
    for label in by:
        buckets = {b for (lab, _, b) in met if lab == label}
        failed = [sel[b] for b in buckets
                  if not any(ok for (lab, _, bb), ok in met.items() if lab == label and bb == b)]
        best[label] = max(failed) if failed else None
    return best, by


def filter_summary(spec: FilterSpec, buckets: list[Bucket]) -> dict[str, Any]:
    return {"strategies": list(spec.strategies), "place": spec.place,
            "buckets": [b.describe() for b in buckets], "fewer_than_k_rule": FEWER_THAN_K}


def operating_points(choices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per bucket (in selectivity order) the chosen setting with the lowest p95 among those that
    pass the held-out check (or have none)."""
    out = []
    buckets = sorted({c["bucket"]: c["selectivity"] for c in choices}.items(), key=lambda x: x[1])
    for name, sel in buckets:
        ok = [c for c in choices if c["bucket"] == name and c["chosen"]
              and c.get("heldout_meets", True) and c.get("p95_ms") is not None]
        best = min(ok, key=lambda c: c["p95_ms"], default=None)
        out.append({"bucket": name, "selectivity": sel, **({k: best.get(k) for k in (
            "label", "backend", "strategy", "knob", "search", "overfetch", "build", "p95_ms",
            "qps", "recall", "recall_lb", "heldout_recall", "engine_call")} if best else {
            "label": None, "strategy": None, "knob": None, "p95_ms": None,
            "note": "no strategy meets the target in this bucket"})})
    return out
