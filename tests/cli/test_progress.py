"""Progress bars go to stderr whenever stderr is a terminal, ``--json`` or not; stdout keeps
clean JSON. With stderr on a pipe there is no bar but a plain line every N seconds."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

SPEC = textwrap.dedent("""\
    name: progress-e2e
    dataset: synthetic-small
    k: 10
    warmup: 2
    batch_repeats: 1
    target_recall: 0.8
    tune: {strategy: grid, heldout_fraction: 0.5}
    indexes:
      - backend: hnswlib
        build: {M: 8, ef_construction: 20}
        search: {ef_search: [10, 20, 40]}
""")


def _sweep_args(tmp_path: Path, out: str) -> list[str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    return [sys.executable, "-m", "retrieval", "sweep", "--json", str(spec), "--out",
            str(tmp_path / out)]


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root, "COLUMNS": "120"}


def test_bar_on_a_terminal_stderr_with_json(tmp_path):
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.run(_sweep_args(tmp_path, "tty"), stdout=subprocess.PIPE, stderr=slave,
                          stdin=subprocess.DEVNULL, env=_env(), timeout=300)
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    err = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, err
    summary = json.loads(proc.stdout)  # stdout is the JSON document only
    assert summary["name"] == "progress-e2e"
    assert "sweep" in err and "config" in err, err
    assert "ef_search=" in err  # the bar's postfix names the config being measured
    assert "\"backends\"" not in err  # the JSON went to stdout only


def test_plain_lines_not_a_bar_on_a_pipe(tmp_path):
    """On a pipe: no bar (no carriage returns) but plain progress lines (every update with
    RWB_PROGRESS_INTERVAL=0; every 10 s by default); --quiet prints none."""
    env = {**_env(), "RWB_PROGRESS_INTERVAL": "0"}
    proc = subprocess.run(_sweep_args(tmp_path, "pipe"), capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)
    assert "\r" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rwb sweep:")]
    assert lines and "done elapsed" in lines[-1], proc.stderr
    quiet = subprocess.run([*_sweep_args(tmp_path, "quiet"), "--quiet"], capture_output=True,
                           text=True, env=env, timeout=300)
    assert quiet.returncode == 0 and "rwb sweep" not in quiet.stderr, quiet.stderr
