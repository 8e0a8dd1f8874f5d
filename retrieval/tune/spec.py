"""Sweep specs: YAML -> pydantic (extra="forbid"), validated per backend before anything runs.

A spec names a dataset, k, and for each index backend the build and search params to try. A list
value is a grid axis; a scalar is fixed. Every build x search combination is validated by the
backend's own parameter models and cross-field checks (ef_search >= k, nprobe <= nlist), and any
error names the file, the field, what is allowed and what was received.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retrieval.errors import ConfigError, RwbError
from retrieval.indexes.registry import get_backend
from retrieval.params import Params, format_validation_error, validate_params
from retrieval.specfile import read_yaml_file
from retrieval.tune.config import TuneSpec

Scalar = int | float | str | bool
GridValue = Scalar | list[Scalar]


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IndexEntry(SpecModel):
    """One backend with its build grid and search grid."""

    backend: str
    build: dict[str, GridValue] = Field(default_factory=dict)
    search: dict[str, GridValue] = Field(default_factory=dict)
    label: str | None = None


class SweepSpec(SpecModel):
    """A sweep/eval spec. Times are in ms/s as named; recall is recall@k by id."""

    name: str = "sweep"
    dataset: str | dict[str, Any]
    k: int = Field(10, ge=1, le=1000)
    seed: int = 0
    threads: int = Field(1, ge=1, le=512)
    modes: list[Literal["single", "batch"]] = Field(
        default_factory=lambda: ["single", "batch"]  # type: ignore[arg-type]
    )
    warmup: int = Field(32, ge=0)
    batch_repeats: int = Field(3, ge=1, le=100)
    target_recall: float | None = Field(None, gt=0.0, le=1.0)
    indexes: list[IndexEntry] = Field(min_length=1)
    #: tuning options (strategy, confidence, held-out split, ...); see retrieval.tune.config
    tune: TuneSpec = Field(default_factory=TuneSpec)

    # set by load_spec; not part of the YAML
    source: str = Field("<memory>", exclude=True)


def _grid(values: Mapping[str, GridValue]) -> Iterator[dict[str, Any]]:
    keys = list(values)
    axes = [v if isinstance(v, list) else [v] for v in values.values()]
    for combo in itertools.product(*axes):
        yield dict(zip(keys, combo))


def build_grid(entry: IndexEntry) -> list[dict[str, Any]]:
    """Every build config of an entry (cartesian product of list-valued fields)."""
    return list(_grid(entry.build))


def search_grid(entry: IndexEntry) -> list[dict[str, Any]]:
    return list(_grid(entry.search))


def _check_axes(values: Mapping[str, GridValue], field: str, where: str) -> None:
    for key, v in values.items():
        if isinstance(v, list) and not v:
            raise ConfigError(f"{where}: field '{field}.{key}' must be a non-empty list or a value")


def validate_spec(spec: SweepSpec) -> SweepSpec:
    """Validate every entry's params against its backend's models and cross-field rules."""
    where = spec.source
    for i, entry in enumerate(spec.indexes):
        field = f"indexes[{i}]"
        cls = get_backend(entry.backend, where=f"{where}: field '{field}.backend'")
        _check_axes(entry.build, f"{field}.build", where)
        _check_axes(entry.search, f"{field}.search", where)
        builds = [
            validate_params(cls.BuildParams, b, where=where, prefix=f"{field}.build.")
            for b in build_grid(entry)
        ]
        searches = [
            validate_params(cls.SearchParams, s, where=where, prefix=f"{field}.search.")
            for s in search_grid(entry)
        ]
        for b in builds:
            for s in searches:
                try:
                    cls.check_combination(b, s, spec.k)
                except ConfigError as exc:
                    raise ConfigError(f"{where}: {field}: {exc}") from None
    return spec


def parse_spec(data: Any, source: str = "<memory>") -> SweepSpec:
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source}: a spec must be a YAML mapping; received {type(data).__name__}"
        )
    try:
        spec = SweepSpec.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise format_validation_error(exc, SweepSpec, where=source) from None
    return validate_spec(spec)


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a spec file; errors name the file."""
    p = Path(path)
    data = read_yaml_file(p)
    try:
        return parse_spec(data, source=str(p))
    except RwbError:
        raise


def resolved(spec: SweepSpec) -> dict[str, Any]:
    """The spec as plain data (what goes into the run directory)."""
    return spec.model_dump(mode="json")


__all__ = [
    "IndexEntry",
    "Params",
    "SweepSpec",
    "build_grid",
    "load_spec",
    "parse_spec",
    "resolved",
    "search_grid",
    "validate_spec",
]
