"""The ``filters:`` block of a sweep spec, and one filter predicate (``Where``).

A predicate is one of, on one attribute:

- ``{attr: topics, eq: earn}``: a label column row has the label (an int column equals it);
- ``{attr: topics, in: [earn, acq]}``: the row has any of the labels (an int is one of them);
- ``{attr: year, range: [lo, hi]}``: an int column's value lies in ``[lo, hi]`` (both inclusive).

A workload is a list of named fixed filters (the same for every query) and/or a generator of
per-query filters at target selectivities (share of base vectors matching, in (0, 1)).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from retrieval.params import Params

Strategy = Literal["engine", "prefilter", "postfilter"]
STRATEGIES: tuple[str, ...] = ("engine", "prefilter", "postfilter")
Scalar = int | str
#: integer attributes are int64: values and range bounds must lie in [INT64_MIN, INT64_MAX]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Where(Params):
    """One predicate on one attribute (exactly one of ``eq``, ``in``, ``range``)."""

    attr: str = Field(min_length=1)
    eq: Scalar | None = None
    in_: list[Scalar] | None = Field(None, alias="in", min_length=1)
    range: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Where:
        given = [n for n, v in (("eq", self.eq), ("in", self.in_), ("range", self.range))
                 if v is not None]
        if len(given) != 1:
            raise ValueError(f"exactly one of eq, in, range must be given; received "
                             f"{given or 'none'}")
        ints = [v for v in (*self.values, *(self.range or ())) if isinstance(v, int)]
        wide = next((v for v in ints if not INT64_MIN <= v <= INT64_MAX), None)
        if wide is not None:
            raise ValueError(f"integer values must lie within int64 [-2**63, 2**63-1] (integer "
                             f"attributes are int64); received {wide} (out of int64 range)")
        if self.range is not None and self.range[0] > self.range[1]:
            raise ValueError(f"range must be [lo, hi] with lo <= hi; received "
                             f"{list(self.range)}")
        return self

    @property
    def values(self) -> list[Scalar]:
        """The values of ``eq``/``in`` (empty for a range)."""
        return [self.eq] if self.eq is not None else list(self.in_ or [])

    def describe(self) -> str:
        if self.range is not None:
            return f"{self.attr} in [{self.range[0]}, {self.range[1]}]"
        if self.eq is not None:
            return f"{self.attr} = {self.eq}"
        return f"{self.attr} in {{{', '.join(str(v) for v in self.values)}}}"


class NamedFilter(Params):
    name: str = Field(min_length=1)
    where: Where


class FilterSpec(Params):
    """Filtered-search workload and the search-side strategies to measure.

    - ``fixed``: named filters applied to every query;
    - ``selectivities``: targets in (0, 1); per query, a filter on ``attribute`` matching about
      that share of the base: an int column gets a range over a window of its sorted values, a
      label column one label (per query) whose frequency is nearest the target;
    - ``place``: ``random`` (the window/label drawn at random, seeded) or ``near`` (containing
      the query's exact unfiltered nearest neighbour: filters correlated with the query);
    - ``strategies``: ``engine`` (the backend's own filtered search; backends with
      SupportsFilter), ``prefilter`` (exact search over the matching rows), ``postfilter``
      (unfiltered search for ``overfetch * k`` ids, then the filter);
    - ``overfetch``: the post-filter factor measured by ``rwb eval``; ``overfetch_max``: the top
      of the factor range a target sweep searches.
    """

    fixed: list[NamedFilter] = Field(default_factory=list)
    selectivities: list[float] = Field(default_factory=list)
    attribute: str | None = None
    place: Literal["random", "near"] = "random"
    strategies: list[Strategy] = Field(default_factory=lambda: ["engine"],  # type: ignore[arg-type]
                                       min_length=1)
    overfetch: int = Field(4, ge=1, le=1000)
    overfetch_max: int = Field(64, ge=1, le=1000)

    @field_validator("selectivities")
    @classmethod
    def _in_unit(cls, v: list[float]) -> list[float]:
        for s in v:
            if not 0.0 < s < 1.0:
                raise ValueError(f"every selectivity must be in (0, 1); received {s}")
        return sorted(set(v))

    @model_validator(mode="after")
    def _something(self) -> FilterSpec:
        if not self.fixed and not self.selectivities:
            raise ValueError("give 'fixed' filters and/or 'selectivities' (received neither)")
        if self.selectivities and not self.attribute:
            raise ValueError("'selectivities' needs 'attribute' (the column to filter on)")
        names = [f.name for f in self.fixed]
        if len(set(names)) != len(names):
            raise ValueError(f"fixed filter names must be unique; received {names}")
        return self
