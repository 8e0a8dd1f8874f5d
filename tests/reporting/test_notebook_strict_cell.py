"""Issue 34 new user 9: notebook 01's stricter-target cell never says "no measured config
reaches 0.99" when points with recall 1.0 were measured (a target sweep's probes carry no
latency, so nothing is ranked by it). The cell's source is run on a stand-in run."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from typing import Any

from retrieval.paths import REPO_ROOT


def _strict_cell() -> str:
    spec = importlib.util.spec_from_file_location(
        "build_notebooks", REPO_ROOT / "scripts" / "build_notebooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (cell,) = [c.source for c in mod.NB01 if "STRICT = 0.99" in c.source]
    return str(cell)


class _Run:
    """What the cell uses of a sweep result: its points and cheapest_meeting."""

    def __init__(self, points: list[dict[str, Any]]) -> None:
        self._points = points

    def points(self) -> list[dict[str, Any]]:
        return self._points

    def cheapest_meeting(self, target: float) -> list[dict[str, Any]]:
        from retrieval.reporting.points import cheapest_meeting

        return cheapest_meeting(self._points, target)


def _run_cell(points: list[dict[str, Any]]) -> str:
    shown: list[Any] = []
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(_strict_cell(), {"run": _Run(points), "display": shown.append,
                              "pd": __import__("pandas")})
    return buf.getvalue() + "".join(str(s) for s in shown)


def test_untimed_points_at_recall_one_are_said_to_reach_the_strict_target() -> None:
    probes = [{"label": lb, "backend": lb, "recall": 1.0, "p95_ms": None}
              for lb in ("hnswlib", "faiss-hnsw", "faiss-ivf")]
    text = _run_cell([*probes, {"label": "x", "recall": 0.9, "p95_ms": None}])
    assert "no measured config reaches" not in text
    assert "3 measured points reach 0.99" in text and "best recall 1.0000" in text


def test_nothing_at_the_strict_target_says_so_with_the_best_recall() -> None:
    text = _run_cell([{"label": "x", "recall": 0.93, "p95_ms": 1.0}])
    assert text.startswith("no measured config reaches 0.99 (best recall 0.93)")
