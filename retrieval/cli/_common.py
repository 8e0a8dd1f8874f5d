"""Small helpers shared by CLI commands (printing lives only in the CLI)."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any


def _default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not math.isfinite(float(o)) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, os.PathLike):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=_default)
    sys.stdout.write("\n")


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3e}"
    if isinstance(v, dict):
        return ",".join(f"{k}={fmt(x)}" for k, x in v.items()) or "-"
    return str(v)


def print_table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> None:
    body = [[fmt(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in body:
        widths = [max(w, len(c)) for w, c in zip(widths, r)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line)
    print("  ".join("-" * w for w in widths))
    for r in body:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
