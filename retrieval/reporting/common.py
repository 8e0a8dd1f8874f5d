"""What every run kind's report uses: the typed summary of a run, its scalars as a table, and
its parquet rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from retrieval.errors import ConfigError
from retrieval.reporting.html import Table
from retrieval.reporting.load import Run
from retrieval.runs import RunSummary

T = TypeVar("T", bound=RunSummary)


def typed(run: Run, model: type[T]) -> T:
    """The run's typed summary, checked to be a ``model``."""
    if not isinstance(run.model, model):
        raise ConfigError(f"run '{run.path}' is a {run.kind} run, not a {model.KIND} run")
    return run.model


def scalar_table(summary: Mapping[str, Any], keys: Sequence[str] | None = None,
                 caption: str = "") -> Table:
    """Two columns (key, value) of the summary's scalars (nested dicts one level deep)."""
    rows: list[list[Any]] = []
    for key, v in summary.items():
        if keys is not None and key not in keys:
            continue
        if isinstance(v, str | int | float | bool) or v is None:
            rows.append([key, v])
        elif isinstance(v, Mapping) and all(
            isinstance(x, str | int | float | bool) or x is None for x in v.values()
        ):
            for sub, x in v.items():
                rows.append([f"{key}.{sub}", x])
    return Table(["key", "value"], rows, caption=caption)


def summary_table(summary: Mapping[str, Any], leave_out: str) -> Table:
    """The scalar table of ``summary`` without its ``leave_out`` key (the one a kind's own
    tables show)."""
    return scalar_table({k: v for k, v in summary.items() if k != leave_out})


def run_rows(run: Run, name: str) -> list[dict[str, Any]]:
    """The rows of the run's parquet table ``name`` (empty when it has none)."""
    t = run.table(name)
    if t is None:
        return []
    import pandas as pd

    # a missing value of a nullable int/bool column reads as NaN (as a float column's does)
    return [{k: float("nan") if v is pd.NA else v for k, v in r.items()}
            for r in t.to_dict("records")]


__all__ = ["run_rows", "scalar_table", "summary_table", "typed"]
