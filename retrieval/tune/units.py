"""What a sweep evaluates: *units* of work and the points (search configs) each one measures.

A unit is one build config of one spec entry, plus (for ``target``) the fixed values of the
non-knob search params. It is claimed by one worker, which builds the index once and measures
the unit's points in order:

- a ``grid`` unit measures every search config listed in the spec for that entry;
- a ``target`` unit searches its monotone knob over ``[low, high]`` (see
  :mod:`retrieval.tune.target`); which point comes next is a pure function of what was already
  measured, so a unit can be resumed by anyone from the study's finished trials.

Each point is recorded as an Optuna trial whose params are namespaced by the entry label
(``hnswlib.build.M``, ``hnswlib.search.ef_search``) plus ``index`` (the label), so every backend
lives in one study with compatible distributions.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.base import IndexBackend
from retrieval.indexes.entry import canon
from retrieval.indexes.registry import get_backend
from retrieval.params import Params
from retrieval.tune import joint
from retrieval.tune import target as tgt
from retrieval.tune.bucket_summary import bucket_names
from retrieval.tune.config import TuneSpec
from retrieval.tune.results import PointResult
from retrieval.tune.spec import SweepSpec, checked_entries, search_grid

log = logging.getLogger(__name__)

Method = Literal["grid", "target"]


def entry_labels(spec: SweepSpec) -> list[str]:
    """A unique label per entry: its ``label``, else the backend name (``#i`` on clashes)."""
    raw = [e.label or e.backend for e in spec.indexes]
    out = []
    for i, name in enumerate(raw):
        out.append(name if raw.count(name) == 1 else f"{name}#{i}")
    return out


@dataclass(frozen=True)
class Unit:
    """One build config (and fixed non-knob search params) of one entry."""

    entry: int
    backend: str
    label: str
    build: dict[str, Any]
    fixed: dict[str, Any]
    method: Method
    knob: str | None
    low: int
    high: int
    grid: tuple[dict[str, Any], ...] = ()
    #: a filtered workload's unit: the filtering strategy and the selectivity bucket
    strategy: str | None = None
    bucket: str | None = None
    #: a second monotone knob (oversampling, k_factor) solved jointly with ``knob`` over the
    #: values of ``ladder2`` (see :mod:`retrieval.tune.joint`); None for a one-knob unit
    knob2: str | None = None
    ladder2: tuple[int, ...] = ()

    @property
    def key(self) -> str:
        doc: dict[str, Any] = {
            "entry": self.entry,
            "backend": self.backend,
            "build": self.build,
            "fixed": self.fixed,
            "method": self.method,
            "knob": self.knob,
            "range": [self.low, self.high],
            "grid": list(self.grid),
        }
        if self.strategy is not None:
            doc.update(strategy=self.strategy, bucket=self.bucket)
        if self.knob2 is not None:  # one-knob units keep the keys they always had
            doc.update(knob2=self.knob2, ladder2=list(self.ladder2))
        return hashlib.sha1(canon(doc).encode()).hexdigest()[:12]

    @property
    def budget(self) -> int | None:
        """Most evaluations a target unit takes (None for grid units)."""
        if self.method != "target":
            return None
        return tgt.budget(self.low, self.high) * max(1, len(self.ladder2))

    def point(self, value: int) -> dict[str, Any]:
        assert self.knob is not None
        return {**self.fixed, self.knob: int(value)}

    def next_point(self, measured: Mapping[str, PointResult]) -> dict[str, Any] | None:
        """The next search config to measure given ``measured`` (keyed by :func:`canon` of the
        search config), or None when the unit is complete."""
        if self.method == "grid":
            for s in self.grid:
                if canon(s) not in measured:
                    return s
            return None
        if self.knob2 is not None:
            pair = joint.next_pair(self.low, self.high, self.ladder2, self._known2(measured))
            return None if pair is None else {**self.point(pair[0]), self.knob2: pair[1]}
        known = self.known(measured)
        v = tgt.next_probe(self.low, self.high, known)
        return None if v is None else self.point(v)

    def _known2(self, measured: Mapping[str, PointResult]) -> dict[tuple[int, int], bool]:
        assert self.knob is not None and self.knob2 is not None
        known: dict[tuple[int, int], bool] = {}
        both = (self.knob, self.knob2)
        for p in measured.values():
            rest = {k: v for k, v in p.search.items() if k not in both}
            if all(rest.get(k) == v for k, v in self.fixed.items()) and all(
                    k in p.search for k in both):
                known[int(p.search[self.knob]), int(p.search[self.knob2])] = bool(p.meets)
        return known

    def known(self, measured: Mapping[str, PointResult]) -> dict[int, bool]:
        """Knob value -> met the target, over the points of this unit in ``measured``."""
        assert self.knob is not None
        known: dict[int, bool] = {}
        for p in measured.values():
            rest = {k: v for k, v in p.search.items() if k != self.knob}
            if all(rest.get(k) == v for k, v in self.fixed.items()) and self.knob in p.search:
                known[int(p.search[self.knob])] = bool(p.meets)
        return known

    def infeasible(self, measured: Mapping[str, PointResult]) -> bool:
        """A target unit whose most accurate setting (``high``) missed the target."""
        if self.method != "target":
            return False
        if self.knob2 is not None:
            stair, nxt = joint.steps(self.low, self.high, self.ladder2, self._known2(measured))
            return nxt is None and all(a is None for _, a in stair)
        known = self.known(measured)
        return known.get(self.high) is False


# --- planning ---------------------------------------------------------------------------------
def monotone_knob(
    cls: type[IndexBackend], build: Params, k: int, tune: TuneSpec, label: str
) -> str | None:
    """The knob a target search tunes for this build: ``tune.knobs[label or backend]``, else the
    first of the backend's monotone knobs for this build with a non-trivial range."""
    knobs = cls.monotone_knobs_for(build)
    requested = tune.knobs.get(label) or tune.knobs.get(cls.name)
    if requested is not None:
        if requested not in knobs:
            allowed = ", ".join(knobs) or "none"
            raise ConfigError(
                f"field 'tune.knobs.{label}': search param '{requested}' of backend "
                f"'{cls.name}' is not a monotone knob for build {build.model_dump()} (recall is "
                f"not known to grow with it), so strategy 'target' cannot search it; "
                f"allowed: {allowed}"
            )
        return requested
    for knob in knobs:
        low, high = cls.knob_range(knob, build, k)
        if low < high:
            return knob
    return None


def knob_bounds(
    cls: type[IndexBackend], knob: str, build: Params, k: int, tune: TuneSpec
) -> tuple[int, int]:
    """``tune.search_range[knob]`` (checked against the allowed range), else the allowed range
    capped at the backend's most accurate setting."""
    low, high = cls.knob_range(knob, build, k)
    if knob in tune.search_range:
        a, b = tune.search_range[knob]
        if a < low or b > high:
            raise param_error(
                f"tune.search_range.{knob}",
                f"within [{low}, {high}] for backend '{cls.name}' with build {build.model_dump()}",
                [a, b],
            )
        return a, b
    most = cls.most_accurate_search(build).get(knob)
    if isinstance(most, int) and low <= most < high:
        high = most
    return low, high


def make_unit(
    spec: SweepSpec,
    i: int,
    label: str,
    build: Mapping[str, Any],
    fixed: Mapping[str, Any] | None,
    method: Method,
) -> Unit:
    """The unit of entry ``i`` for ``build`` (a grid unit when the backend has no knob)."""
    entry = spec.indexes[i]
    checked = checked_entries(spec)[i]
    cls = checked.cls
    bp = checked.build(build)
    knob = monotone_knob(cls, bp, spec.k, spec.tune, label)
    build_doc = dict(build)
    if method == "target" and knob is not None:
        low, high = knob_bounds(cls, knob, bp, spec.k, spec.tune)
        knob2, ladder = rescore_knob(cls, bp, spec.k, spec.tune, label, knob)
        fixed_doc = {k: v for k, v in (fixed or {}).items() if k not in (knob, knob2)}
        context = f"indexes[{i}]: search range of '{knob}' [{low}, {high}]"
        for v in (low, high):  # checked once here, trusted when measured
            for b in (ladder[0], ladder[-1]) if knob2 else (None,):
                extra = {} if knob2 is None else {knob2: b}
                checked.config(bp, {**fixed_doc, knob: v, **extra}, context=context)
        return Unit(i, entry.backend, label, build_doc, fixed_doc, "target", knob, low, high,
                    knob2=knob2, ladder2=ladder)
    return Unit(
        i, entry.backend, label, build_doc, {}, "grid", knob, 0, 0, tuple(search_grid(entry))
    )


def rescore_knob(
    cls: type[IndexBackend], build: Params, k: int, tune: TuneSpec, label: str, knob: str
) -> tuple[str | None, tuple[int, ...]]:
    """``tune.rescore_knobs[label or backend]`` and its ladder (powers of two in its range, or
    in ``tune.search_range``), or (None, ()) when none is asked for or its range is one value
    for this build (e.g. ``k_factor`` without ``refine``)."""
    name = tune.rescore_knobs.get(label) or tune.rescore_knobs.get(cls.name)
    if name is None:
        return None, ()
    knobs = cls.monotone_knobs_for(build)
    if name not in knobs or name == knob:
        allowed = ", ".join(k for k in knobs if k != knob) or "none"
        raise ConfigError(
            f"field 'tune.rescore_knobs.{label}': '{name}' is not a second monotone knob of "
            f"backend '{cls.name}' for build {build.model_dump()}; allowed: {allowed}")
    low, high = knob_bounds(cls, name, build, k, tune)
    if low >= high:  # e.g. k_factor on a build without refine: nothing to tune, say so
        log.warning("tune.rescore_knobs.%s: '%s' cannot apply to build %s of backend '%s' "
                    "(its range is the one value %s: e.g. a build without refine has no "
                    "rescoring); ignored for this build", label, name, build.model_dump(),
                    cls.name, low)
        return None, ()
    ladder = [low]
    while ladder[-1] * 2 <= high:
        ladder.append(ladder[-1] * 2)
    return name, tuple(ladder)


def target_fixed_grid(spec: SweepSpec, i: int, knob: str | None) -> list[dict[str, Any]]:
    """The combinations of the non-knob search params of entry ``i``."""
    entry = spec.indexes[i]
    if knob is None:
        return [{}]
    label = entry_labels(spec)[i]
    knob2 = spec.tune.rescore_knobs.get(label) or spec.tune.rescore_knobs.get(entry.backend)
    skip = {knob, knob2}
    axes = {k: v if isinstance(v, list) else [v] for k, v in entry.search.items()
            if k not in skip}
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def plan_units(spec: SweepSpec, method: Method) -> list[Unit]:
    """Every unit of a grid or target sweep, in spec order."""
    labels = entry_labels(spec)
    units: list[Unit] = []
    for i, checked in enumerate(checked_entries(spec)):
        for build in checked.build_grid:
            if method == "grid":
                units.append(make_unit(spec, i, labels[i], build, None, "grid"))
                continue
            bp = checked.build(build)
            knob = monotone_knob(checked.cls, bp, spec.k, spec.tune, labels[i])
            for fixed in target_fixed_grid(spec, i, knob):
                units.append(make_unit(spec, i, labels[i], build, fixed, "target"))
    check_ranges_used(spec)
    return units


def plan_filtered_units(spec: SweepSpec, buckets: Sequence[str]) -> list[Unit]:
    """Every unit of a target sweep on a filtered workload, in spec order: per entry x build x
    strategy x bucket. The knob: ``engine``: the backend's monotone knob (``tune.knobs`` /
    ``tune.search_range`` clip its range), the other search params as the entry's first search
    config; ``postfilter``: the over-fetch factor in ``[1, filters.overfetch_max]``;
    ``prefilter`` (or no knob): one point, the first search config."""
    fs = spec.filters
    assert fs is not None
    labels = entry_labels(spec)
    units: list[Unit] = []
    for i, checked in enumerate(checked_entries(spec)):
        for build in checked.build_grid:
            first = dict(checked.configs(build)[0].given) if checked.search_grid else {}
            bp = checked.build(build)
            for strategy in fs.strategies:
                knob: tuple[str, int, int] | None = None
                if strategy == "postfilter":
                    knob = ("overfetch", 1, fs.overfetch_max)
                elif strategy == "engine":
                    knob = _filter_knob(spec, checked.cls, bp, labels[i])
                for b in buckets:
                    if knob is None:
                        units.append(Unit(i, checked.backend, labels[i], dict(build), first,
                                          "grid", None, 0, 0, (first,), strategy, b))
                        continue
                    fixed = {k: v for k, v in first.items() if k != knob[0]}
                    units.append(Unit(i, checked.backend, labels[i], dict(build), fixed,
                                      "target", knob[0], knob[1], knob[2], (), strategy, b))
    return units


def _filter_knob(spec: SweepSpec, cls: type[IndexBackend], build: Params, label: str
                 ) -> tuple[str, int, int] | None:
    knobs = cls.monotone_knobs_for(build)
    if not knobs:
        return None
    knob = spec.tune.knobs.get(label, spec.tune.knobs.get(cls.name, knobs[0]))
    low, high = cls.knob_range(knob, build, spec.k)
    if knob in spec.tune.search_range:
        lo, hi = spec.tune.search_range[knob]
        low, high = max(low, lo), min(high, hi)
    return knob, low, high
def _every_monotone_knob() -> set[str]:
    """Monotone search knobs of every registered backend (a spec may drop the backends that
    a ``tune.search_range`` entry was written for)."""
    from retrieval.indexes.registry import all_backends

    return {k for cls in all_backends().values() for k in cls.monotone_knobs}


def check_ranges_used(spec: SweepSpec) -> None:
    """``tune.search_range`` and ``tune.knobs`` must name knobs/entries of this spec."""
    labels = entry_labels(spec)
    knobs: set[str] = set()
    for e in spec.indexes:
        knobs.update(get_backend(e.backend).monotone_knobs)
    for knob in spec.tune.search_range:
        if knob in knobs:
            continue
        if knob in _every_monotone_knob():  # a backend dropped from the spec (as its comment
            log.warning("%s: field 'tune.search_range.%s' ignored: no backend left in this "
                        "spec has knob '%s' (it has: %s)", spec.source, knob, knob,
                        ", ".join(sorted(knobs)))
            continue
        raise ConfigError(
            f"{spec.source}: field 'tune.search_range.{knob}': '{knob}' is not a monotone "
            f"search knob of any backend in this spec; allowed: {', '.join(sorted(knobs))}"
        )
    names = set(labels) | {e.backend for e in spec.indexes}
    for name in spec.tune.rescore_knobs:
        if name not in names:
            raise ConfigError(
                f"{spec.source}: field 'tune.rescore_knobs.{name}': no index entry or backend "
                f"named '{name}' in this spec; allowed: {', '.join(sorted(names))}"
            )
    for name in spec.tune.knobs:
        if name not in names:
            raise ConfigError(
                f"{spec.source}: field 'tune.knobs.{name}': no index entry or backend named "
                f"'{name}' in this spec; allowed: {', '.join(sorted(names))}"
            )


# --- Optuna params ----------------------------------------------------------------------------
def _choices(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def trial_params(
    spec: SweepSpec, unit: Unit, search: Mapping[str, Any], labels: Sequence[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Optuna params and distributions of one point of ``unit``."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    entry = spec.indexes[unit.entry]
    params: dict[str, Any] = {"index": unit.label}
    dists: dict[str, Any] = {"index": CategoricalDistribution(list(labels))}
    space = unit.label  # a filtered unit's search params live per strategy (their kinds differ)
    if unit.strategy is not None and spec.filters is not None:
        space = f"{unit.label}.{unit.strategy}"
        params["strategy"], params["bucket"] = unit.strategy, unit.bucket
        dists["strategy"] = CategoricalDistribution(list(spec.filters.strategies))
        dists["bucket"] = CategoricalDistribution(bucket_names(spec.filters))
    for name, axis in entry.build.items():
        key = f"{unit.label}.build.{name}"
        params[key] = unit.build[name]
        dists[key] = CategoricalDistribution(_choices(axis))
    for name, value in search.items():
        key = f"{space}.search.{name}"
        params[key] = value
        if unit.method == "target" and name == unit.knob:
            dists[key] = IntDistribution(unit.low, unit.high)
        elif unit.method == "target" and name == unit.knob2:
            dists[key] = IntDistribution(unit.ladder2[0], unit.ladder2[-1])
        elif name in entry.search:
            dists[key] = CategoricalDistribution(_choices(entry.search[name]))
        else:
            dists[key] = CategoricalDistribution([value])
    return params, dists
