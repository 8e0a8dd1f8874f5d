"""docs/ci.md's CI recipe, run as written: its shell block re-verifies the exports of a folder;
a fresh export passes (exit 0), one edited so that it misses its target fails the job (1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from retrieval.cli import main

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

ROOT = Path(__file__).resolve().parents[2]
SPEC = textwrap.dedent("""\
    name: ci-recipe
    dataset: {name: synthetic-small, n: 2000, n_queries: 80}
    k: 10
    warmup: 1
    batch_repeats: 1
    target_recall: 0.9
    tune: {strategy: grid, heldout_fraction: 0.5}
    indexes:
      - backend: faiss-ivf
        build: {nlist: 16}
        search: {nprobe: [1, 16]}
""")


def _script() -> str:
    text = (ROOT / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/ci.md has no ```sh block"
    return blocks[0]


def _run_ci(folder: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "rwb"  # `rwb` as installed: this checkout's CLI
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m retrieval "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    return subprocess.run(["sh", "-c", _script()], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # two verify processes (~10 s each on a shared machine)
def test_ci_recipe_passes_a_fresh_export_and_fails_an_edited_one(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    assert main(["--quiet", "sweep", str(spec), "--out", str(tmp_path / "run")]) == 0
    repo = tmp_path / "repo"
    (repo / "exports").mkdir(parents=True)
    assert main(["export", str(tmp_path / "run"), "--engine", "faiss", "--out",
                 str(repo / "exports" / "ivf.yaml")]) == 0
    ok = _run_ci(repo)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "HOLDS" in ok.stdout
    doc = yaml.safe_load((repo / "exports" / "ivf.yaml").read_text())
    text = (repo / "exports" / "ivf.yaml").read_text()
    assert "nprobe: 16" in text, text  # the tuned value; 1 probe of 16 lists misses 0.9
    (repo / "exports" / "ivf.yaml").write_text(text.replace("nprobe: 16", "nprobe: 1"))
    bad = _run_ci(repo)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAILED: exports/ivf.yaml (exit 1)" in bad.stdout
    assert doc["rwb_export"] == 1
