"""One index entry, "backend + build + search", as every spec kind names an index, validated ONCE.

A sweep (``indexes[i]``, where a list value is a grid axis), the rerank first stage (``dense``)
and the study (``retrieval.index``) name an index the same way: :class:`IndexEntry` (spec kinds
add their own fields in a subclass, e.g. ``metric``). :func:`check_entry` is the one validation:
the backend exists, every build config validates into the backend's frozen ``BuildParams``, every
search config into its ``SearchParams``, and every (build, search) pair passes the backend's
``check_combination`` for the spec's ``k``. What it returns travels with the unit of work, and the
layers below trust it:

- :class:`CheckedEntry` maps a build config (as written) to its ``BuildParams`` and a (build,
  search) pair to a :class:`SearchConfig`; a config met later (a target search's knob values) is
  validated once, when first asked for, and remembered;
- :class:`SearchConfig` is a search config that passed both checks for one build and ``k``: the
  evaluation loop takes it without checking again, and :func:`apply_search` hands it to a
  backend that supports it (:class:`SupportsCheckedSearch`, e.g. every in-process backend), which
  then skips its own ``SearchParams`` validation and, for that ``k``, its combination check.

A plain mapping from a user is still validated (unknown keys still raise), wherever it enters.
The result of :func:`check_entry` is remembered on the (frozen) entry, keyed by its content and
``k``, so a spec copied with command-line overrides (:func:`retrieval.specfile.with_overrides`)
is not validated twice.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from retrieval.errors import ConfigError
from retrieval.indexes.base import IndexBackend
from retrieval.indexes.registry import get_backend
from retrieval.params import Params, validate_params

Scalar = int | float | str | bool
GridValue = Scalar | list[Scalar]


def canon(d: Mapping[str, Any]) -> str:
    """Canonical JSON of a params mapping (the key of a config)."""
    return json.dumps(dict(d), sort_keys=True, separators=(",", ":"), default=str)


def expand(values: Mapping[str, GridValue]) -> list[dict[str, Any]]:
    """Every config of a grid: the cartesian product of the list-valued fields."""
    keys = list(values)
    axes = [v if isinstance(v, list) else [v] for v in values.values()]
    return [dict(zip(keys, combo)) for combo in itertools.product(*axes)]


class IndexEntry(BaseModel):
    """One index: a backend name with its build params and search params (as written)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str
    build: dict[str, GridValue] = Field(default_factory=dict)
    search: dict[str, GridValue] = Field(default_factory=dict)

    #: the last :func:`check_entry` result (with the key it was made for)
    _checked: Any = PrivateAttr(None)


@dataclass(frozen=True, eq=False)
class SearchConfig:
    """A search config validated once: ``search`` is an instance of the backend's SearchParams
    and ``check_combination(build, search, k)`` passed. ``given``: the config as written."""

    backend: str
    build: Params
    search: Params
    k: int
    given: dict[str, Any] = field(default_factory=dict)

    def fits(self, backend: str, build: Params, k: int) -> bool:
        """Whether this config was checked for ``backend``, ``build`` and ``k``."""
        return self.backend == backend and self.k == k and (
            self.build is build or self.build == build
        )


@runtime_checkable
class SupportsCheckedSearch(Protocol):
    """A backend that takes a :class:`SearchConfig` as is (no second validation)."""

    def use_search(self, config: SearchConfig) -> None: ...


def apply_search(index: Any, config: SearchConfig) -> None:
    """Set ``config`` on ``index``: as is where the backend supports it, else as keyword params
    (which that backend validates itself)."""
    if isinstance(index, SupportsCheckedSearch):
        index.use_search(config)
    else:
        index.set_search_params(**config.search.model_dump())


def _combine(
    cls: type[IndexBackend], build: Params, search: Params, k: int, context: str | None
) -> None:
    try:
        cls.check_combination(build, search, k)
    except ConfigError as exc:
        if context is None:
            raise
        raise ConfigError(f"{context}: {exc}") from None


def check_search(
    cls: type[IndexBackend],
    build: Params,
    search: Mapping[str, Any] | Params,
    k: int,
    *,
    where: str | None = None,
    prefix: str = "",
    context: str | None = None,
) -> SearchConfig:
    """One search config (a mapping from a user, or the backend's own SearchParams instance,
    taken as is) checked against ``build`` and ``k``. A failed combination check is prefixed
    with ``context`` when given."""
    if isinstance(search, cls.SearchParams):
        sp: Params = search
        given = search.model_dump()
    else:
        given = search.model_dump() if isinstance(search, Params) else dict(search)
        sp = validate_params(cls.SearchParams, given, where=where, prefix=prefix)
    _combine(cls, build, sp, k, context)
    return SearchConfig(cls.name, build, sp, k, given)


class CheckedEntry:
    """An :class:`IndexEntry` validated for one ``k``: its build configs (``build_grid``, as
    written, one per grid point) and search configs (``search_grid``), each validated once; every
    pair checked. Further configs are validated on first use and remembered."""

    def __init__(
        self,
        cls: type[IndexBackend],
        k: int,
        *,
        where: str,
        field: str,
        search_prefix: str,
        context: str,
        key: tuple[Any, ...] = (),
    ) -> None:
        self.cls = cls
        self.backend = cls.name
        self.k = k
        self.where = where
        self.field = field
        self.search_prefix = search_prefix
        self.context = context
        self.key = key
        self.build_grid: list[dict[str, Any]] = []
        self.search_grid: list[dict[str, Any]] = []
        self._builds: dict[str, Params] = {}
        self._searches: dict[str, Params] = {}
        self._configs: dict[tuple[str, str], SearchConfig] = {}

    def build(self, given: Mapping[str, Any] | Params) -> Params:
        """The BuildParams of a build config (validated the first time it is seen)."""
        if isinstance(given, self.cls.BuildParams):
            return given
        data = given.model_dump() if isinstance(given, Params) else dict(given)
        key = canon(data)
        bp = self._builds.get(key)
        if bp is None:
            bp = validate_params(
                self.cls.BuildParams, data, where=self.where, prefix=f"{self.field}.build."
            )
            self._builds[key] = bp
        return bp

    def search_params(self, given: Mapping[str, Any]) -> Params:
        """The SearchParams of a search config (validated the first time it is seen)."""
        key = canon(given)
        sp = self._searches.get(key)
        if sp is None:
            sp = validate_params(
                self.cls.SearchParams, given, where=self.where, prefix=self.search_prefix
            )
            self._searches[key] = sp
        return sp

    def config(
        self,
        build: Mapping[str, Any] | Params,
        search: Mapping[str, Any] | SearchConfig,
        *,
        context: str | None = None,
    ) -> SearchConfig:
        """The checked config of ``search`` on ``build`` (checked the first time it is seen;
        a failed combination names ``context``, default this entry's field)."""
        bp = self.build(build)
        if isinstance(search, SearchConfig):
            if search.fits(self.backend, bp, self.k):
                return search
            search = search.given
        key = (bp.model_dump_json(), canon(search))
        cfg = self._configs.get(key)
        if cfg is None:
            sp = self.search_params(search)
            _combine(self.cls, bp, sp, self.k, f"{self.where}: {context or self.context}")
            cfg = SearchConfig(self.backend, bp, sp, self.k, dict(search))
            self._configs[key] = cfg
        return cfg

    def builds(self) -> list[Params]:
        """The BuildParams of every build config of the entry, in grid order."""
        return [self.build(b) for b in self.build_grid]

    def configs(self, build: Mapping[str, Any] | Params) -> list[SearchConfig]:
        """The entry's search configs on ``build``, in grid order."""
        return [self.config(build, s) for s in self.search_grid]


def _check_axes(values: Mapping[str, GridValue], field: str, where: str) -> None:
    for key, v in values.items():
        if isinstance(v, list) and not v:
            raise ConfigError(f"{where}: field '{field}.{key}' must be a non-empty list or a value")


def check_entry(
    entry: IndexEntry,
    k: int,
    *,
    where: str,
    field: str,
    grids: bool = False,
    searches: Sequence[Mapping[str, Any]] | None = None,
    search_prefix: str | None = None,
    context: str | None = None,
) -> CheckedEntry:
    """THE validation of an index entry (see the module docstring).

    ``where`` (the file) and ``field`` (e.g. ``indexes[0]``, ``dense``) name errors; ``grids``:
    list values are grid axes (sweep specs), else each value goes to the backend as written;
    ``searches``: the search configs to check instead of the entry's own ``search`` (a study's
    knob values); ``search_prefix`` / ``context``: how a bad search param / a failed combination
    is named (default ``<field>.search.`` / ``<field>``).
    """
    points = None if searches is None else [dict(s) for s in searches]
    key = (k, grids, where, field, entry.model_dump_json(), canon({"s": points}))
    cached = entry._checked
    if isinstance(cached, CheckedEntry) and cached.key == key:
        return cached
    cls = get_backend(entry.backend, where=f"{where}: field '{field}.backend'")
    if grids:
        _check_axes(entry.build, f"{field}.build", where)
        _check_axes(entry.search, f"{field}.search", where)
        builds = expand(entry.build)
        points = points if points is not None else expand(entry.search)
    else:
        builds = [dict(entry.build)]
        points = points if points is not None else [dict(entry.search)]
    ce = CheckedEntry(
        cls,
        k,
        where=where,
        field=field,
        search_prefix=f"{field}.search." if search_prefix is None else search_prefix,
        context=context or field,
        key=key,
    )
    ce.build_grid, ce.search_grid = builds, points
    bps = ce.builds()
    for s in points:
        ce.search_params(s)
    for bp in bps:
        ce.configs(bp)
    entry._checked = ce
    return ce


__all__ = [
    "CheckedEntry",
    "GridValue",
    "IndexEntry",
    "Scalar",
    "SearchConfig",
    "SupportsCheckedSearch",
    "apply_search",
    "canon",
    "check_entry",
    "check_search",
    "expand",
]
