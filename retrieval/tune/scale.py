"""ef(N): the pure logic of a scale study (no I/O; the live part: :mod:`retrieval.tune.scale_run`).

A scale study tunes a spec's builds on seeded *nested* samples of the base (the same held-out
query split at every size), fits the cheapest knob against the number of base vectors N, and
predicts it at the full N (and at sizes named for growth planning). Here:

- the ``scale:`` section of a sweep spec (:class:`ScaleSpec`) and the sample sizes it names;
- build rules of N (``nlist: 4*sqrt(N)``): :func:`parse_rule`, :func:`rule_value`;
- the two knob models, ``log`` (knob = a + b log2 N) and ``power`` (knob = c N^b), fitted by
  least squares; the model is chosen by how well each, fitted on the smaller samples, predicts
  the largest one (:func:`choose_fit`);
- a bootstrap band over the tuning queries (:func:`bootstrap_band`);
- the construction *ceiling* (recall at the top of the knob range) and its trend over N
  (:func:`ceiling_trend`: the N where a build stops reaching the target);
- the short local search for the exact cheapest knob at full N (:func:`local_search`).

A knob whose range grows with a build param ruled by N (``nprobe`` up to ``nlist``) is fitted as
a *fraction* of its range (``fraction``), so it is predicted as a share of the full-N range.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from retrieval.errors import ConfigError
from retrieval.stats.sampling import seeded_partition
from retrieval.tune import target as tgt

Model = Literal["log", "power"]
MODELS: tuple[Model, ...] = ("power", "log")

#: a rule of N: ``[c*]sqrt(N)`` or ``[c*]N[^p | **p]``
_RULE = re.compile(
    r"^\s*(?:(?P<c>\d+(?:\.\d*)?|\.\d+)\s*\*\s*)?"
    r"(?:(?P<sqrt>sqrt\(\s*N\s*\))|N(?:\s*(?:\^|\*\*)\s*(?P<p>\d+(?:\.\d*)?|\.\d+))?)\s*$"
)


#: bounds of a build rule ``c * N**p`` and of its value (a build param is a 32-bit integer)
RULE_MAX_FACTOR, RULE_MAX_POWER, RULE_MAX_VALUE = 1e9, 2.0, 2**31 - 1
#: the largest multiple of the full N a prediction is asked at
PREDICT_MAX = 1e6


def parse_rule(text: str) -> tuple[float, float]:
    """``(c, p)`` of a rule ``c * N**p`` written as ``4*sqrt(N)``, ``N^0.5``, ``0.01*N``;
    ValueError (naming what is allowed) otherwise."""
    m = _RULE.match(str(text))
    if m is None:
        raise ValueError(f"a rule of N such as '4*sqrt(N)', '2*N^0.5' or '0.01*N'; "
                         f"received {text!r}")
    c = float(m["c"]) if m["c"] else 1.0
    p = 0.5 if m["sqrt"] else float(m["p"]) if m["p"] else 1.0
    if not 0 < c <= RULE_MAX_FACTOR:  # nan and inf fail too
        raise ValueError(f"a rule with a factor > 0 and <= {RULE_MAX_FACTOR:g}; received "
                         f"{text!r}")
    if not 0 <= p <= RULE_MAX_POWER:
        raise ValueError(f"a rule with a power of N in [0, {RULE_MAX_POWER:g}]; received "
                         f"{text!r}")
    return c, p


def rule_value(text: str, n: int) -> int:
    """The integer value of a rule at ``n`` base vectors (rounded, at least 1); ConfigError
    (one line) when it does not fit a build param (above 2**31 - 1)."""
    c, p = parse_rule(text)
    value = c * float(n) ** p
    if not value <= RULE_MAX_VALUE:
        raise ConfigError(f"scale.build_rules: {text!r} at N={n:,} gives {value:.3g}, above "
                          f"{RULE_MAX_VALUE:,} (the largest build param); use a smaller rule")
    return max(1, round(value))


def _fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"each fraction must be a number such as 0.25 or a text such as 1/64; "
                         f"received {value!r}"[:200])
    if isinstance(value, str):
        try:
            return float(Fraction(value.replace(" ", "")))
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"a fraction such as 1/64 or 0.25; received {value!r}") from None
    return float(value)


class ScaleSpec(BaseModel):
    """``scale:`` of a sweep spec: tune on nested samples, predict the knob at the full N.

    - ``fractions`` (each in (0, 1), e.g. ``[1/64, 1/16, 1/4]``) or ``sizes`` (base vectors,
      each below the full N): the sample sizes, at least two;
    - ``predict_at``: multiples of the full N to predict the knob at too (growth planning);
    - ``build_rules``: build params given as a rule of N (``nlist: 4*sqrt(N)``), applied at every
      sample size and at the full N (the spec's value of that param is replaced);
    - ``bootstrap``: resamples of the tuning queries for the band; ``band``: its two-sided level;
    - ``check``: which builds are built once at the full N: ``all`` (default: every build that
      still reaches the target, so each has its exact knob, transfer error and ceiling there) or
      ``answer`` (only the answer: the build with the highest batch QPS at its cheapest knob on
      the largest sample; the cheapest way to the tuned config: sample builds + one full build).
    - ``sampling``: how the samples are drawn: ``uniform`` (seeded nested samples of the base:
      every region gets sparser as the sample shrinks), ``neighbourhood`` (each sample holds
      the full-N exact neighbourhood of every tuning query, its ``h`` nearest base vectors, plus
      a uniform nested fill: the local density around the queries is the full collection's, so
      on clustered data the knob does not sit at its floor on small samples; see
      :func:`neighbourhood_rows`) or ``cells`` (each sample is made of WHOLE k-means cells of
      the base in one seeded order, nested: every region kept has the full density; a sample
      judges only the tuning queries whose full-N k nearest all lie in its cells; see
      :mod:`retrieval.tune.scale_cells`).

    The summary carries four knob(N) models per build, each with its transfer error:
    ``predicted`` (the fitted knob), ``predicted_surface`` (the miss-rate surface),
    ``predicted_difficulty`` (per-query difficulty: each tuning query's miss rate over the knob
    and its LID, read at the full N from the exact distances) and, for IVF builds with exact
    vectors in their lists, ``predicted_partition`` (the coarse partition at the full N,
    :mod:`retrieval.tune.scale_partition`); ``scale.models`` names their keys.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    fractions: list[float] | None = Field(None, min_length=2)
    sizes: list[int] | None = Field(None, min_length=2)
    predict_at: list[float] = Field(default_factory=lambda: [2.0, 10.0])
    build_rules: dict[str, str] = Field(default_factory=dict)
    bootstrap: int = Field(200, ge=10, le=10_000)
    band: float = Field(0.9, gt=0.0, lt=1.0)
    check: Literal["all", "answer"] = "all"
    sampling: Literal["uniform", "neighbourhood", "cells"] = "uniform"

    @field_validator("fractions", mode="before")
    @classmethod
    def _parse_fractions(cls, v: Any) -> Any:
        if isinstance(v, list):
            out = [_fraction(x) for x in v]
            bad = [x for x in out if not 0.0 < x < 1.0]
            if bad:
                raise ValueError(f"each fraction must lie in (0, 1); received {bad[0]}")
            return out
        return v

    @field_validator("sizes")
    @classmethod
    def _positive(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and any(x < 1 for x in v):
            raise ValueError(f"each size must be an integer >= 1; received {v}")
        return v

    @field_validator("predict_at")
    @classmethod
    def _multiples(cls, v: list[float]) -> list[float]:
        if any(not 0 < x <= PREDICT_MAX for x in v):  # nan and inf fail too
            raise ValueError(f"each multiple of N must be > 0 and <= {PREDICT_MAX:g}; received "
                             f"{v}"[:200])
        return v

    @field_validator("build_rules")
    @classmethod
    def _rules(cls, v: dict[str, str]) -> dict[str, str]:
        for text in v.values():
            parse_rule(text)
        return v

    @model_validator(mode="after")
    def _one_of(self) -> ScaleSpec:
        if (self.fractions is None) == (self.sizes is None):
            raise ValueError("give exactly one of 'fractions' or 'sizes' (at least two each)")
        return self


def sample_sizes(scale: ScaleSpec, n: int, k: int) -> list[int]:
    """The sample sizes (ascending, distinct, each in [max(k, 2), n)); ValueError naming the
    field when fewer than two remain."""
    raw = ([round(f * n) for f in scale.fractions] if scale.fractions is not None
           else list(scale.sizes or []))
    sizes = sorted(set(raw))
    lowest = max(k, 2)
    bad = [s for s in sizes if s < lowest or s >= n]
    if bad:
        raise ValueError(f"each sample size must lie in [{lowest}, {n}) for {n} base vectors "
                         f"and k {k}; received {bad[0]}")
    if len(sizes) < 2:
        raise ValueError(f"at least two distinct sample sizes are needed; received {raw}")
    return sizes


def nested_rows(n: int, sizes: Sequence[int], seed: int) -> list[np.ndarray]:
    """Row numbers of each sample (sorted, int64): the first ``s`` of ONE seeded permutation of
    ``0..n-1``, so every sample holds the smaller ones (nested)."""
    return [seeded_partition(n, int(s), seed)[0] for s in sizes]


#: neighbourhood widths tried, largest first: the core must fit in 3/4 of the smallest sample
NEIGHBOURHOOD_H = (1000, 500, 200, 100, 50, 20, 10)


def neighbourhood_rows(n: int, sizes: Sequence[int], seed: int, neighbours: np.ndarray
                       ) -> tuple[list[np.ndarray], int]:
    """Row numbers of each sample (sorted int64, nested) for ``sampling: neighbourhood``:
    the CORE (the union of the first ``h`` columns of ``neighbours``, the full-N exact
    neighbour rows of the tuning queries, -1 padded; the largest ``h`` of
    :data:`NEIGHBOURHOOD_H` whose core fits in 3/4 of the smallest size) plus the first rows of ONE
    seeded permutation of the others. Returns the rows and the ``h`` used."""
    smallest = min(int(s) for s in sizes)
    h, core = 0, np.empty(0, dtype=np.int64)
    for width in NEIGHBOURHOOD_H:
        if width > neighbours.shape[1]:
            continue
        cols = neighbours[:, :width]
        cand = np.unique(cols[cols >= 0]).astype(np.int64)
        if cand.size <= (3 * smallest) // 4:
            h, core = width, cand
            break
    rest = np.random.default_rng(seed).permutation(n)
    rest = rest[~np.isin(rest, core)]
    return [np.sort(np.concatenate([core, rest[: int(s) - core.size]])) for s in sizes], h


# --- fitting -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fit:
    """``log``: y = a + b log2 N; ``power``: log y = a + b log N (y = e^a N^b)."""

    model: Model
    a: float
    b: float

    def predict(self, n: float) -> float:
        if self.model == "log":
            return self.a + self.b * math.log2(n)
        return math.exp(self.a + self.b * math.log(n))

    def per_doubling(self, n: float) -> float:
        """The factor the fitted value grows by when N doubles (at ``n`` for ``log``)."""
        lo = self.predict(n)
        return self.predict(2 * n) / lo if lo > 0 else math.inf

    def describe(self) -> str:
        if self.model == "power":
            return f"knob = {math.exp(self.a):.4g} * N^{self.b:.4f}"
        return f"knob = {self.a:.4g} + {self.b:.4g} * log2(N)"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "a": self.a, "b": self.b, "formula": self.describe()}


def fit(ns: Sequence[float], ys: Sequence[float], model: Model) -> Fit:
    """Least-squares fit of ``model`` (one point: a constant)."""
    x = np.asarray(ns, dtype=np.float64)
    y = np.maximum(np.asarray(ys, dtype=np.float64), 1e-12)
    if model == "log":
        xx, yy = np.log2(x), y
    else:
        xx, yy = np.log(x), np.log(y)
    if x.size < 2 or np.ptp(xx) == 0:
        return Fit(model, float(yy.mean()), 0.0)
    b, a = np.polyfit(xx, yy, 1)
    return Fit(model, float(a), float(b))


def holdout_error(ns: Sequence[float], ys: Sequence[float], model: Model) -> float | None:
    """|predicted - measured| / measured at the largest size, fitted on the smaller ones (None
    with fewer than three sizes: one point fixes no slope)."""
    if len(ns) < 3:
        return None
    order = np.argsort(ns)
    xs, vs = [float(ns[i]) for i in order], [float(ys[i]) for i in order]
    pred = fit(xs[:-1], vs[:-1], model).predict(xs[-1])
    return abs(pred - vs[-1]) / max(abs(vs[-1]), 1e-12)


def choose_fit(ns: Sequence[float], ys: Sequence[float]) -> tuple[Fit, dict[str, float | None]]:
    """The model that best predicts the largest sample from the smaller ones, fitted on all
    sizes, and each model's hold-out error (``power`` when they cannot be told apart: the
    growth measured on synthetic families is closer to a power law than to log N)."""
    errors: dict[str, float | None] = {m: holdout_error(ns, ys, m) for m in MODELS}
    best: Model = "power"
    known = {m: e for m in MODELS if (e := errors[m]) is not None}
    if len(known) == len(MODELS):
        best = min(MODELS, key=lambda m: (known[m], MODELS.index(m)))
    return fit(ns, ys, best), errors


# --- the bootstrap band --------------------------------------------------------------------------
@dataclass(frozen=True)
class Curve:
    """What a target search measured at one sample size: knob values probed (ascending), the
    per-query recall of the tuning queries at each (``(len(values), n_tuning)``) and the gap
    between mean and lower bound at each (the bound's margin). ``queries``: the positions, in
    the study's tuning queries, of ``per_query``'s columns when the sample judges only some of
    them (``sampling: cells``); None: all, in order."""

    n: int
    values: tuple[int, ...]
    per_query: np.ndarray
    margin: tuple[float, ...]
    high: int
    queries: np.ndarray | None = None

    def positions(self) -> np.ndarray:
        """The tuning-query position of each column of ``per_query``."""
        return (np.arange(self.per_query.shape[1]) if self.queries is None
                else np.asarray(self.queries, dtype=np.int64))

    def columns(self, idx: np.ndarray) -> np.ndarray:
        """The columns of a draw ``idx`` of tuning-query positions (with repeats) that this
        curve judged; every column when it judged none of them."""
        if self.queries is None:
            return np.asarray(idx)
        pos = self.positions()
        lookup = np.full(int(max(pos.max(initial=-1), np.max(idx, initial=-1))) + 1, -1)
        lookup[pos] = np.arange(pos.size)
        cols = lookup[np.asarray(idx)]
        cols = cols[cols >= 0]
        return cols if cols.size else np.arange(pos.size)

    def knob(self, target: float, idx: np.ndarray | None = None) -> int:
        """The smallest probed value whose mean over ``idx`` (tuning-query positions; default
        all its columns) minus its margin meets ``target`` (``high`` when none does: censored
        at the top of the range)."""
        pq = self.per_query if idx is None else self.per_query[:, self.columns(idx)]
        means = pq.mean(axis=1)
        for v, mean, gap in zip(self.values, means, self.margin, strict=True):
            if mean - gap >= target - 1e-9:
                return int(v)
        return int(self.high)


def bootstrap_band(
    curves: Sequence[Curve], target: float, model: Model, at: Sequence[float],
    scale_of: Callable[[int, float], float], *, resamples: int, level: float, seed: int,
) -> list[tuple[float, float]]:
    """Two-sided ``level`` band of the fitted value at each N of ``at``: tuning queries
    resampled with replacement (the same draw at every size: the same queries), the knob found
    again at each size, the model refitted. ``scale_of(n, knob)`` maps a knob to what is fitted
    (the knob itself, or its fraction of the range)."""
    if not curves:
        return [(math.nan, math.nan) for _ in at]
    nq = max(int(c.positions().max(initial=-1)) + 1 for c in curves)
    rng = np.random.default_rng(seed)
    preds = np.empty((resamples, len(at)))
    for r in range(resamples):
        idx = np.asarray(rng.integers(0, nq, size=nq))
        ys = [scale_of(c.n, c.knob(target, idx)) for c in curves]
        f = fit([c.n for c in curves], ys, model)
        preds[r] = [f.predict(n) for n in at]
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    return [(float(np.quantile(preds[:, j], lo)), float(np.quantile(preds[:, j], hi)))
            for j in range(len(at))]


# --- the ceiling ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CeilingTrend:
    """Ceiling (recall lower bound at the top of the knob range) = a + b log2 N; ``n_stop``: the
    N where it crosses the target (None when it does not fall)."""

    a: float
    b: float
    n_stop: float | None

    def predict(self, n: float) -> float:
        return float(min(1.0, max(0.0, self.a + self.b * math.log2(n))))

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b_per_doubling": self.b, "n_stop": self.n_stop}


def ceiling_trend(ns: Sequence[float], ceilings: Sequence[float], target: float) -> CeilingTrend:
    f = fit(ns, ceilings, "log")
    n_stop = None
    if f.b < 0:
        try:  # a flat ceiling (fit noise: b ~ -1e-17) predicts no N at all
            n_stop = float(2.0 ** ((target - f.a) / f.b))
        except OverflowError:
            n_stop = None
    elif f.a + f.b * math.log2(max(ns)) < target:
        n_stop = float(min(ns))  # already below at the samples, and not rising
    return CeilingTrend(f.a, f.b, n_stop)


def ceiling_message(k: int, target: float, build: Mapping[str, Any], n: int, ceiling: float,
                    *, predicted: bool = False, hint: str = "") -> str:
    """The one line a summary prints for a build whose ceiling is below the target."""
    what = ", ".join(f"{key} {val}" for key, val in build.items()) or "its defaults"
    how = "predicted ceiling" if predicted else "ceiling"
    line = (f"no search setting reaches recall@{k} {target:g} with {what} at N = {n:,}: "
            f"{how} {ceiling:.3f}")
    return line + (f"; try {hint}" if hint else "")


def raise_hint(build: Mapping[str, Any], construction: Sequence[str]) -> str:
    """What to try when a build's ceiling is too low: its construction params doubled."""
    ups = [f"{name} {2 * int(build[name])}" for name in construction
           if isinstance(build.get(name), int) and not isinstance(build.get(name), bool)]
    return ", ".join(ups) if ups else "a larger build (more graph links or cells)"


# --- the local search at full N ------------------------------------------------------------------
@dataclass(frozen=True)
class LocalOutcome:
    value: int | None
    probes: tuple[int, ...]


def local_search(low: int, high: int, guess: int, meets: Callable[[int], bool],
                 known: Mapping[int, bool] | None = None, step: float = 0.75) -> LocalOutcome:
    """The smallest value in ``[low, high]`` meeting the target, searched from ``guess``: a
    bracket is found by stepping down (x``step``) from a hit or up (x1/``step``) from a miss,
    then bisected (:func:`retrieval.tune.target.solve`). Values in ``known`` cost nothing.
    None when ``high`` misses."""
    seen = dict(known or {})
    probes: list[int] = []

    def ask(v: int) -> bool:
        if v not in seen:
            seen[v] = bool(meets(v))
            probes.append(v)
        return seen[v]

    g = min(max(int(guess), low), high)
    if ask(g):
        hit, miss = g, low - 1
        while hit > low:
            v = max(low, min(hit - 1, int(hit * step)))
            if ask(v):
                hit = v
            else:
                miss = v
                break
    else:
        miss, hit = g, -1
        while True:
            if miss >= high:
                return LocalOutcome(None, tuple(probes))
            v = min(high, max(miss + 1, math.ceil(miss / step)))
            if ask(v):
                hit = v
                break
            miss = v
    if hit - miss > 1:
        inner = {v: m for v, m in seen.items() if miss < v <= hit}
        out = tgt.solve(miss + 1, hit, lambda v: ask(v), known=inner)
        hit = out.value if out.value is not None else hit
    return LocalOutcome(hit, tuple(probes))


def transfer_error(predicted: float | None, exact: float | None) -> float | None:
    """(predicted - exact) / exact: > 0 when the prediction overshoots (costs more than needed),
    < 0 when it undershoots (likely misses the target)."""
    if predicted is None or exact is None or exact == 0:
        return None
    return (float(predicted) - float(exact)) / float(exact)


@dataclass
class BuildStudy:
    """What a scale study found for one build config (filled in as it runs)."""

    label: str
    backend: str
    build: dict[str, Any]
    fixed: dict[str, Any]
    knob: str
    samples: list[dict[str, Any]] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    stopped: str | None = None  # one line when the search stopped early (ceiling)




def answer_build(builds: Sequence[BuildStudy], largest: int, full_n: int,
                 n_stop: Mapping[int, float | None]) -> int | None:
    """Index of the answer build: among builds not stopped whose cheapest knob was found at the
    ``largest`` sample size and whose ceiling trend does not predict a stop at or below
    ``full_n`` (``n_stop``: build index -> that N or None), the highest batch QPS (queries/s)
    at that knob; None when no build qualifies."""
    best: tuple[float, int] | None = None
    for i, b in enumerate(builds):
        row = b.samples[-1] if b.samples else None
        if b.stopped is not None or row is None or row["n"] != largest or row["knob"] is None:
            continue
        stop = n_stop.get(i)
        if stop is not None and stop <= full_n:
            continue
        qps = float(row.get("qps") or 0.0)
        if best is None or qps > best[0]:
            best = (qps, i)
    return None if best is None else best[1]


# --- the exported rule ---------------------------------------------------------------------------
def export_rule(entry: Mapping[str, Any], build_rules: Mapping[str, str]) -> dict[str, Any] | None:
    """The rule an export carries for one build of a scale study's summary (``builds[i]``): the
    knob at today's N, the fitted model anchored there, its validity range and the transfer
    error measured; None when nothing was fitted or measured at the full N."""
    f, exact = entry.get("fit"), entry.get("exact")
    if not f or exact is None:
        return None
    n = int((f.get("valid_n") or [0, 0])[1])
    rng = entry.get("range_at_full") or [None, None]
    return {
        "knob": entry["knob"], "n": n, "value": int(exact),
        "model": f["model"], "a": f["a"], "b": f["b"], "formula": f["formula"],
        "fitted": "fraction" if entry.get("fraction") else "knob",
        "high_at_n": rng[1],
        "per_doubling": f.get("per_doubling"),
        "valid_n": f.get("valid_n"),
        "extrapolate_up_to": n * 10,
        "predicted_at_n": entry.get("predicted"),
        "transfer_error": entry.get("transfer_error"),
        "build_rules": dict(build_rules),
        "note": "knob(N') = value * model(N') / model(n) (a fraction of the knob range when "
                "fitted is 'fraction'); build params in build_rules follow their rule of N",
    }


def rule_knob(rule: Mapping[str, Any], n: int, low: int, high: int) -> int:
    """The knob the exported ``rule`` gives at ``n`` base vectors, clamped to ``[low, high]``
    (``high``: the knob range of the build at ``n``)."""
    f = Fit(rule["model"], float(rule["a"]), float(rule["b"]))
    n0 = int(rule["n"])
    ratio = f.predict(n) / max(f.predict(n0), 1e-12)
    value = float(rule["value"]) * ratio
    if rule.get("fitted") == "fraction" and rule.get("high_at_n"):
        value = value / float(rule["high_at_n"]) * high
    return int(min(max(math.ceil(value - 1e-9), low), high))


__all__ = [
    "MODELS",
    "BuildStudy",
    "CeilingTrend",
    "Curve",
    "Fit",
    "LocalOutcome",
    "ScaleSpec",
    "answer_build",
    "bootstrap_band",
    "ceiling_message",
    "ceiling_trend",
    "choose_fit",
    "export_rule",
    "fit",
    "holdout_error",
    "local_search",
    "nested_rows",
    "parse_rule",
    "raise_hint",
    "rule_knob",
    "rule_value",
    "sample_sizes",
    "transfer_error",
]
