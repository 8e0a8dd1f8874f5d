"""Typed semantic-cache thresholds and their exact conversions between libraries.

A :class:`Threshold` is a value with its unit: ``cosine_distance`` (``1 - cos``, 0..2, lower is
stricter; what Redis ``VECTOR_RANGE`` compares on a COSINE field) or ``cosine_similarity``
(-1..1, higher is stricter). A lookup hits when the nearest entry's cosine distance is <= the
threshold (inclusive). :data:`CONVENTIONS` maps it exactly onto the parameter each library
takes (redisvl, LangChain, GPTCache), each read from that library's source (named in
``Convention.source``; the tests pin the numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import numpy as np
from pydantic import model_validator

from retrieval.errors import param_error, unknown_name_error
from retrieval.params import Params


class ThresholdUnit(StrEnum):
    """Units a threshold can be given in (unit-norm vectors; cosine distance = 1 - cos)."""

    COSINE_DISTANCE = "cosine_distance"  # 0..2, lower is stricter (Redis COSINE distance)
    COSINE_SIMILARITY = "cosine_similarity"  # -1..1, higher is stricter


UNIT_RANGES: dict[ThresholdUnit, tuple[float, float]] = {
    ThresholdUnit.COSINE_DISTANCE: (0.0, 2.0),
    ThresholdUnit.COSINE_SIMILARITY: (-1.0, 1.0),
}


def _unit(unit: str | ThresholdUnit, where: str | None = None) -> ThresholdUnit:
    try:
        return ThresholdUnit(unit)
    except ValueError:
        raise unknown_name_error(
            "threshold unit", str(unit), [u.value for u in ThresholdUnit], where=where
        ) from None


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Threshold:
    """A cache threshold with its unit. A lookup hits when ``distance <= cosine_distance``.

    Construct with ``Threshold(0.2, "cosine_distance")``, :meth:`distance`, :meth:`similarity`
    or :meth:`from_convention`. Out-of-range values raise ConfigError naming field, range, unit
    and value.
    """

    value: float
    unit: ThresholdUnit = ThresholdUnit.COSINE_DISTANCE
    field_name: str = field(default="threshold", compare=False, repr=False)

    def __post_init__(self) -> None:
        unit = _unit(self.unit)
        object.__setattr__(self, "unit", unit)
        lo, hi = UNIT_RANGES[unit]
        v = self.value
        if isinstance(v, bool) or not isinstance(v, int | float | np.floating | np.integer):
            raise param_error(self.field_name, f"a number in [{_fmt(lo)}, {_fmt(hi)}] ({unit})", v)
        v = float(v)
        if not math.isfinite(v) or not lo <= v <= hi:
            stricter = "lower" if unit is ThresholdUnit.COSINE_DISTANCE else "higher"
            raise param_error(
                self.field_name,
                f"in [{_fmt(lo)}, {_fmt(hi)}] for unit {unit.value} ({stricter} is stricter)",
                v,
            )
        object.__setattr__(self, "value", v)

    @classmethod
    def distance(cls, value: float) -> Threshold:
        """A cosine-distance threshold (0..2, lower is stricter)."""
        return cls(value, ThresholdUnit.COSINE_DISTANCE)

    @classmethod
    def similarity(cls, value: float) -> Threshold:
        """A cosine-similarity threshold (-1..1, higher is stricter)."""
        return cls(value, ThresholdUnit.COSINE_SIMILARITY)

    @property
    def cosine_distance(self) -> float:
        """The threshold as cosine distance ``1 - cos`` (0..2)."""
        if self.unit is ThresholdUnit.COSINE_DISTANCE:
            return self.value
        return 1.0 - self.value

    @property
    def cosine_similarity(self) -> float:
        """The threshold as cosine similarity (-1..1)."""
        if self.unit is ThresholdUnit.COSINE_SIMILARITY:
            return self.value
        return 1.0 - self.value

    def to(self, unit: str | ThresholdUnit) -> Threshold:
        u = _unit(unit)
        value = self.cosine_distance if u is ThresholdUnit.COSINE_DISTANCE else (
            self.cosine_similarity
        )
        return Threshold(value, u)

    def accepts(self, distance: float | np.ndarray) -> Any:
        """Hit test on cosine distance(s), inclusive like Redis ``VECTOR_RANGE``."""
        return np.asarray(distance) <= self.cosine_distance

    def to_convention(self, name: str) -> float:
        """The value to pass to library ``name``'s parameter (see :data:`CONVENTIONS`)."""
        return convention(name).from_cosine_distance(self.cosine_distance)

    @classmethod
    def from_convention(cls, name: str, value: float) -> Threshold:
        """Read a library's threshold parameter into a cosine-distance Threshold."""
        return cls.distance(convention(name).to_cosine_distance(value))

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit.value}

    def __str__(self) -> str:
        return f"{self.value:g} ({self.unit.value})"


class ThresholdSpec(Params):
    """A threshold inside a YAML spec: ``{value: 0.2, unit: cosine_distance}``."""

    value: float
    unit: Literal["cosine_distance", "cosine_similarity"] = "cosine_distance"

    @model_validator(mode="after")
    def _check(self) -> ThresholdSpec:
        Threshold(self.value, ThresholdUnit(self.unit))
        return self

    def threshold(self) -> Threshold:
        return Threshold(self.value, ThresholdUnit(self.unit))


@dataclass(frozen=True)
class Convention:
    """How one library spells a semantic-cache threshold, and the exact map to cosine distance.

    ``low``/``high`` bound the native parameter (``low_open``: ``low`` itself is not usable).
    ``source`` names the upstream code the convention was read from.
    """

    name: str
    library: str
    parameter: str
    low: float
    high: float
    higher_is_stricter: bool
    to_cosine_distance_fn: Callable[[float], float]
    from_cosine_distance_fn: Callable[[float], float]
    source: str
    low_open: bool = False
    note: str = ""

    def _check_native(self, value: float) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
            raise param_error(self.parameter, "a number", value, where=f"{self.name} threshold")
        v = float(value)
        ok = math.isfinite(v) and (self.low < v if self.low_open else self.low <= v) and (
            v <= self.high
        )
        if not ok:
            bracket = "(" if self.low_open else "["
            stricter = "higher" if self.higher_is_stricter else "lower"
            raise param_error(
                self.parameter,
                f"in {bracket}{_fmt(self.low)}, {_fmt(self.high)}] ({stricter} is stricter"
                + (f"; {self.note}" if self.note and self.low_open else "") + ")",
                v, where=f"{self.name} threshold",
            )
        return v

    def to_cosine_distance(self, value: float) -> float:
        return self.to_cosine_distance_fn(self._check_native(value))

    def from_cosine_distance(self, distance: float) -> float:
        return self._check_native(self.from_cosine_distance_fn(float(distance)))


def _identity(x: float) -> float:
    return x


CONVENTIONS: dict[str, Convention] = {
    c.name: c
    for c in (
        Convention(
            "redisvl", "redisvl SemanticCache (0.28)", "distance_threshold", 0.0, 2.0, False,
            _identity, _identity,
            "redisvl/extensions/cache/llm/semantic.py: set_threshold() accepts 0..2 ('Redis "
            "COSINE units'); check() runs VectorRangeQuery(distance_threshold=...) on a COSINE "
            "vector field",
        ),
        Convention(
            "langchain", "langchain_redis.RedisSemanticCache", "distance_threshold", 0.0, 2.0,
            False, _identity, _identity,
            "langchain_redis/cache.py: RedisSemanticCache passes distance_threshold straight to "
            "redisvl SemanticCache",
        ),
        Convention(
            "langchain_community", "langchain_community.cache.RedisSemanticCache",
            "score_threshold", 0.0, 2.0, False, _identity, _identity,
            "langchain_community/cache.py: lookup() calls similarity_search(k=1, "
            "distance_threshold=score_threshold) on a Redis vector store whose default field "
            "is COSINE; vectorstores/redis/base.py builds '@content_vector:[VECTOR_RANGE "
            "$distance_threshold $vector]' only 'if distance_threshold:'",
            low_open=True,
            note="0 is falsy there and turns the range query into a plain KNN that always hits",
        ),
        Convention(
            "gptcache", "GPTCache (Config.similarity_threshold)", "similarity_threshold", 0.0,
            1.0, True,
            lambda s: 2.0 * (1.0 - s),
            lambda d: 1.0 - d / 2.0,
            "gptcache/adapter/adapter.py: hit iff rank >= (max-min) * similarity_threshold; "
            "similarity_evaluation/distance.py SearchDistanceEvaluation(max_distance=4.0, "
            "positive=False): rank = 4 - clip(distance, 0, 4), range (0, 4); "
            "manager/vector_data/faiss.py: IndexFlat METRIC_L2 returns squared L2 = "
            "2 * cosine distance for unit vectors. So hit iff d_cos <= 2 * (1 - s). Assumes "
            "unit-norm embeddings, the faiss (squared L2) store, the default evaluation and "
            "cache_factor 1",
        ),
    )
}


def convention(name: str) -> Convention:
    try:
        return CONVENTIONS[name]
    except KeyError:
        raise unknown_name_error("threshold convention", name, CONVENTIONS) from None


__all__ = [
    "CONVENTIONS",
    "UNIT_RANGES",
    "Convention",
    "Threshold",
    "ThresholdSpec",
    "ThresholdUnit",
    "convention",
]
