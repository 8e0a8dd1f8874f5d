"""Issue 34 new user 9: progress lines say a probe is a probe (the top of a target search's
range is not the answer) and give no ETA from a step or two."""

from __future__ import annotations

import io

import pytest

from retrieval.cli import _common
from retrieval.tune.results import PointResult
from retrieval.tune.units import Unit
from retrieval.tune.worker import probe_line

UNIT = Unit(entry=0, backend="hnswlib", label="hnswlib[M=16]", build={"M": 16}, fixed={},
            method="target", knob="ef_search", low=10, high=256)


def _point(ef: int, recall: float, meets: bool | None) -> PointResult:
    return PointResult(search={"ef_search": ef}, recall=recall, recall_lb=recall - 0.01,
                       recall_tie=recall, recall_p5=recall, n_queries=100, p50_ms=None,
                       p95_ms=None, p99_ms=None, qps=None, build_s=0.0, memory_bytes=None,
                       meets=meets)


def test_the_top_of_the_range_is_said_to_be_a_probe_not_the_answer() -> None:
    line = probe_line(UNIT, {"ef_search": 256}, _point(256, 0.999, True))
    assert line == ("hnswlib[M=16] probe ef_search=256 (top of the range: can the target be "
                    "met at all?): recall=0.9990 lb=0.9890, meets the target")
    mid = probe_line(UNIT, {"ef_search": 40}, _point(40, 0.93, False))
    assert mid == "hnswlib[M=16] probe ef_search=40: recall=0.9300 lb=0.9200, below the target"
    grid = Unit(entry=0, backend="hnswlib", label="g", build={}, fixed={}, method="grid",
                knob=None, low=0, high=0)
    assert probe_line(grid, {"ef_search": 256}, _point(256, 0.9, None)) == \
        "g probe ef_search=256: recall=0.9000 lb=0.8900"
    assert probe_line(UNIT, {"ef_search": 20}, None) == "hnswlib[M=16] ef_search=20 (skipped)"


@pytest.mark.parametrize(("done", "total", "shown"), [
    (1, 8, False),    # one slow first step (a build, ground truth): no 1h54m guess
    (2, 8, False),
    (3, 8, True),
    (3, 100, False),  # 3% done: too little to extrapolate
    (10, 100, True),
    (8, 8, False),    # done
])
def test_an_eta_needs_three_steps_and_a_tenth_of_the_total(done, total, shown,
                                                           monkeypatch) -> None:
    now = [0.0]
    monkeypatch.setattr(_common, "clock", lambda: now[0])
    buf = io.StringIO()
    progress = _common.progress_lines("eval", interval_s=0, stream=buf)
    now[0] = 900.0
    progress(done, total, "configs")
    assert ("ETA" in buf.getvalue()) is shown, buf.getvalue()
