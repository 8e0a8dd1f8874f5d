"""Behaviour kept across the redesign (issue 19): every file of a run directory and every key of
its summary, manifest, exports and ``--json`` outputs that the fixed runs of
``scripts/behaviour_keys.py`` wrote on the commit before the engine-folder redesign is still
written by this checkout (new files and keys may be added). Values are measurements and are
not compared; key paths and file names are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

ROOT = Path(__file__).resolve().parents[2]
BEFORE = ROOT / "tests" / "data" / "behaviour_keys_before.json"


@pytest.mark.slow
def test_every_file_and_key_written_before_the_redesign_is_still_written(tmp_path: Path) -> None:
    out = tmp_path / "now.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "behaviour_keys.py"), str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    before = json.loads(BEFORE.read_text())
    now = json.loads(out.read_text())
    assert set(before) == set(now)
    missing: dict[str, list[str]] = {}
    for what, shape in before.items():
        if isinstance(shape, dict):  # a run directory: files + summary / manifest keys
            for part, items in shape.items():
                gone = sorted(set(items) - set(now[what].get(part, [])))
                if gone:
                    missing[f"{what}: {part}"] = gone
        else:
            gone = sorted(set(shape) - set(now[what]))
            if gone:
                missing[what] = gone
    assert not missing, json.dumps(missing, indent=1)
