"""Outside a terminal, long commands print a plain progress line at most every N seconds
(phase, done/total, elapsed, ETA); ``--quiet`` silences it."""

from __future__ import annotations

import io
import textwrap

import pytest

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.cli import _common, main


def test_lines_at_most_every_interval_with_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(_common, "clock", lambda: now[0])
    buf = io.StringIO()
    progress = _common.progress_lines("tune rerank", interval_s=10, stream=buf)
    for step in range(1, 41):  # one update per second for 40 s, 40 of 100 done
        now[0] += 1.0
        progress(step, 100, "rerank scoring")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 4  # at 10, 20, 30, 40 s: never more often than the interval
    assert lines[0] == ("rwb tune rerank: rerank scoring 10/100 (10%) elapsed 10s "
                        "ETA 1m30s")
    assert lines[-1].endswith("40/100 (40%) elapsed 40s ETA 1m00s")
    count = io.StringIO()
    _common.progress_lines("sweep", use_total=False, interval_s=0, stream=count)(7, 0, "x")
    assert count.getvalue() == "rwb sweep: x 7 done elapsed 0s\n"


def test_commands_print_progress_lines_in_a_pipe_and_quiet_silences_them(
        tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RWB_PROGRESS_INTERVAL", "0")  # every update, instead of every 10 s
    monkeypatch.setattr(_common, "QUIET", False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent("""\
        name: progress-lines
        dataset: {name: synthetic-small, n: 300, n_queries: 20}
        k: 5
        warmup: 1
        batch_repeats: 1
        indexes:
          - backend: fake
            build: {quality: [1.0], half_ef: 4, us_per_ef: 0.0}
            search: {ef_search: [2, 8]}
    """))
    assert main(["eval", str(spec), "--out", str(tmp_path / "a"), "--json"]) == 0
    err = capsys.readouterr().err  # captured: stderr is not a terminal
    lines = [ln for ln in err.splitlines() if ln.startswith("rwb eval:")]
    assert lines and "/2 (" in lines[-1] and "elapsed" in lines[-1], err
    assert "\r" not in err
    assert main(["eval", str(spec), "--out", str(tmp_path / "b"), "--json", "--quiet"]) == 0
    assert "rwb eval:" not in capsys.readouterr().err
    monkeypatch.setattr(_common, "QUIET", False)
