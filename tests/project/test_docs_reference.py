"""The reference pages under docs/reference/ are what the code says (scripts/gen_docs.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_reference_pages_are_up_to_date() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_every_spec_kind_has_a_page() -> None:
    pages = {p.stem for p in (ROOT / "docs" / "reference").glob("*.md")}
    for kind in ("sweep-spec", "filters-spec", "load-spec", "fanout-spec", "rerank-spec",
                 "cache-spec", "rag-study-spec", "cli"):
        assert kind in pages


def test_every_relative_link_in_the_docs_resolves() -> None:
    import re

    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text("utf-8")):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_readme_is_a_users_page() -> None:
    text = (ROOT / "README.md").read_text("utf-8")
    assert len(text.splitlines()) < 250
    assert "issue #" not in text.lower()


def test_the_manifest_page_is_linked_from_the_docs() -> None:
    """Issue 34 new user 9: datasets/README.md, the one page that explains ``kind: text`` +
    ``beir:`` for index tuning, was linked from nowhere in docs/."""
    import re

    linked = [p for p in sorted((ROOT / "docs").rglob("*.md"))
              if any((p.parent / t).resolve() == (ROOT / "datasets" / "README.md").resolve()
                     for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", p.read_text("utf-8")))]
    assert linked, "no page under docs/ links datasets/README.md"
