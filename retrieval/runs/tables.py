"""The data formats of run files: the one JSON encoder (numpy values, paths; non-finite floats
as null) and tidy tables (nested dicts as dotted columns, nullable integer/boolean columns)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def json_default(o: Any) -> Any:
    """The one JSON encoder for values ``json`` cannot write (numpy scalars/arrays, paths);
    non-finite floats become null. Used for run files and for the CLI's ``--json``."""
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not math.isfinite(float(o)) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "__fspath__"):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into dotted columns: {"build": {"M": 16}} -> {"build.M": 16}."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def typed_frame(rows: list[dict[str, Any]]) -> Any:
    """A DataFrame of ``rows`` whose columns keep their Python types where some rows lack a
    value: integers stay integers (nullable ``Int64``, not floats with NaN), booleans stay
    booleans (``boolean``); other columns as pandas infers them."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    for col in frame.columns:
        if frame[col].dtype.kind not in "fO" or not frame[col].isna().any():
            continue  # typed already, or nothing missing (pandas kept the type)
        first = next((v for v in (_plain(r.get(col)) for r in rows) if v is not None), None)
        if first is None or isinstance(first, float | str):
            continue  # a float or text column: as inferred
        raw = [_plain(r.get(col)) for r in rows]
        present = [v for v in raw if v is not None]
        if not present or len(present) == len(raw):  # nothing missing: pandas keeps the type
            continue
        if all(isinstance(v, bool) for v in present):
            frame[col] = pd.array(raw, dtype="boolean")
        elif all(_is_int(v) for v in present):
            frame[col] = pd.array(raw, dtype="Int64")
    return frame


def _is_int(v: Any) -> bool:
    import numpy as np

    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _plain(v: Any) -> Any:
    """None for a missing value (None or NaN), else ``v``."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v
