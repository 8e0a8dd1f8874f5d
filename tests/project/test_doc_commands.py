"""Every fenced shell block in README.md and docs/*.md that follows a ``<!-- doc-test -->`` line
runs, verbatim, from an empty temporary folder (with rwb's venv first on PATH) and exits 0.
The README's "your own vectors" walk-through is one of them, so it cannot rot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- doc-test -->"
BLOCK = re.compile(r"<!-- doc-test -->\s*\n```(?:bash|sh|shell)\n(.*?)```", re.S)


def doc_blocks() -> list[tuple[str, str]]:
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for i, m in enumerate(BLOCK.finditer(text)):
            out.append((f"{page.relative_to(ROOT)}#{i + 1}", m.group(1)))
    return out


BLOCKS = doc_blocks()


def test_the_readme_has_a_runnable_walk_through() -> None:
    assert any(name.startswith("README.md") for name, _ in BLOCKS), \
        f"README.md has no block after {MARK}"


@pytest.mark.slow
@pytest.mark.parametrize(("name", "script"), BLOCKS, ids=[n for n, _ in BLOCKS])
def test_doc_block_runs(name: str, script: str, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
           f"{os.environ.get('PATH', '')}", "RWB_REPO": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (f"{name} exited {done.returncode}\n--- stdout\n"
                                  f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")
