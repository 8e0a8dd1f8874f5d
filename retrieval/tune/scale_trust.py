"""How far a scale study's prediction can be trusted (pure logic; issue 34 new user 5).

- ONE figure per size: once the knob was measured exactly at the full N, every prediction is the
  exported rule's (:func:`retrieval.tune.scale.rule_knob`: the fitted model anchored at the
  exact knob), so the summary and the export say the same number (:func:`anchored`);
- builds that cannot be seeded (pgvector, Qdrant, ...: ``deterministic = False`` on the
  backend, or several build threads) are built :data:`UNSEEDED_REPEATS` times at each sample
  size; the spread of their knobs widens the band (:func:`repeat_spread`, :func:`widen`);
- one line per predicted size saying whether the prediction can be trusted there
  (:func:`trust`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

#: builds per sample size of a build that cannot be seeded (their knobs' spread widens the band)
UNSEEDED_REPEATS = 3
#: a prediction beyond this multiple of the full N is not trusted (the export's
#: ``extrapolate_up_to``)
TRUST_MAX_MULTIPLE = 10.0
#: nor one whose band is wider than this share of the predicted knob
TRUST_MAX_BAND = 0.5


def seeded(backend_cls: Any, build_threads: int | None) -> bool:
    """Whether a build of ``backend_cls`` repeats exactly: a deterministic engine built with one
    thread (several threads insert in a racy order)."""
    return bool(getattr(backend_cls, "deterministic", False)) and (build_threads or 1) == 1


def repeat_spread(knobs: Sequence[int]) -> float:
    """Relative spread of the knobs found on repeated unseeded builds of one sample: (max -
    min) / median; 0 for fewer than two."""
    if len(knobs) < 2:
        return 0.0
    ordered = sorted(int(k) for k in knobs)
    median = ordered[len(ordered) // 2]
    return (ordered[-1] - ordered[0]) / max(median, 1)


def median_knob(knobs: Sequence[int]) -> int:
    """The knob the fit uses for repeated builds: their median (the upper one of two)."""
    ordered = sorted(int(k) for k in knobs)
    return ordered[len(ordered) // 2]


def widen(band: Sequence[int], spread: float, low: int, high: int) -> list[int]:
    """``band`` widened by the relative ``spread`` of repeated builds on both sides, clamped
    to the knob range ``[low, high]``."""
    lo, hi = int(band[0]), int(band[1])
    if spread <= 0:
        return [lo, hi]
    return [max(low, math.floor(lo * (1 - spread) + 1e-9)),
            min(high, math.ceil(hi * (1 + spread) - 1e-9))]


def anchored(bare: int, band: Sequence[int], rule_value: int, low: int, high: int
             ) -> tuple[int, list[int]]:
    """(the rule's knob, the band moved with it): the bootstrap band of the bare model is
    scaled by the ratio rule / bare model, clamped to ``[low, high]``."""
    ratio = rule_value / max(bare, 1)
    return int(rule_value), [int(min(max(math.floor(band[0] * ratio), low), high)),
                             int(min(max(math.ceil(band[1] * ratio), low), high))]


def trust(multiple: float, n: int, knob: int, band: Sequence[int], ceiling: float | None,
          target: float, high: int | None = None) -> dict[str, Any]:
    """Whether the prediction at ``multiple`` x the full N (``n`` vectors) can be trusted, and
    the one line saying so: within :data:`TRUST_MAX_MULTIPLE` x the full N, a band no wider
    than :data:`TRUST_MAX_BAND` of the knob, a ceiling trend still reaching ``target``, and a
    knob below the top of its range ``high`` (at the top, the model asks for more than the
    range holds)."""
    why: list[str] = []
    if high is not None and knob >= high:
        why.append(f"the knob sits at the top of its range ({high}): the target may not be "
                   f"reachable there")
    if multiple > TRUST_MAX_MULTIPLE:
        why.append(f"{multiple:g}x is beyond {TRUST_MAX_MULTIPLE:g}x the largest N measured")
    width = (int(band[1]) - int(band[0])) / max(int(knob), 1)
    if width > TRUST_MAX_BAND:
        why.append(f"its band {band[0]}-{band[1]} spans {width:.0%} of the value")
    if ceiling is not None and ceiling < target:
        why.append(f"the ceiling trend ({ceiling:.3f}) misses the target {target:g} there")
    ok = not why
    line = (f"at {multiple:g}x ({n:,} vectors): knob {knob} (band {band[0]}-{band[1]}): "
            + ("can be trusted" if ok else "not to be trusted: " + "; ".join(why)))
    return {"trusted": ok, "line": line}


def finish_predictions(predicted_at: Sequence[Mapping[str, Any]], rule: Mapping[str, Any] | None,
                       ranges: Sequence[tuple[int, int]], target: float,
                       rule_knob: Any) -> list[dict[str, Any]]:
    """The summary's ``predicted_at`` with ONE figure each (the exported rule's when ``rule``:
    the bare model's kept as ``model_knob``) and its trust line (``trusted``, ``trust``).
    ``ranges``: the knob range at each size; ``rule_knob``: :func:`retrieval.tune.scale.
    rule_knob`."""
    out = []
    for pa, (low, high) in zip(predicted_at, ranges, strict=True):
        row = dict(pa)
        if rule is not None:
            value = int(rule_knob(rule, int(row["n"]), low, high))
            row["model_knob"] = row["knob"]
            row["knob"], row["band"] = anchored(int(row["knob"]), row["band"], value, low,
                                                high)
            row["figure"] = "the exported rule (the model anchored at the exact knob)"
        verdict = trust(float(row["multiple"]), int(row["n"]), int(row["knob"]), row["band"],
                        row.get("ceiling"), target, high)
        row["trusted"], row["trust"] = verdict["trusted"], verdict["line"]
        out.append(row)
    return out


__all__ = ["TRUST_MAX_BAND", "TRUST_MAX_MULTIPLE", "UNSEEDED_REPEATS", "anchored",
           "finish_predictions", "median_knob", "repeat_spread", "seeded", "trust", "widen"]
