"""THE number format of every table rwb prints or renders (CLI tables and report pages alike):
4 significant digits below 10,000, whole numbers with thousands separators from 10,000 up
(``0.9531``, ``4.217``, ``2346``, ``72,712``, ``1,234,567``); never an exponent for a large
value. Not finite -> ``-``."""

from __future__ import annotations

import math

#: from this magnitude on a float is written as a whole number with thousands separators
LARGE = 1e4


def format_number(v: float) -> str:
    """``v`` as table text (see the module docstring)."""
    x = float(v)
    if not math.isfinite(x):
        return "-"
    if abs(x) >= LARGE:
        return f"{x:,.0f}"
    return f"{x:.4g}"


__all__ = ["LARGE", "format_number"]
