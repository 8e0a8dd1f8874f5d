"""How ``make test`` hands test files to its xdist workers: the known-long files first (the table
in tests/conftest.py), the rest by their number of tests, xdist's own reordering switched off in
scripts/run_tests.sh so that this order is the one the workers get."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.conftest import HEAVY_FILES, SAME_CORPUS_AS_FIRST, _heavy_files_first

ROOT = Path(__file__).resolve().parents[2]


def _items(*nodeids: str) -> list[Any]:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_every_listed_file_exists() -> None:
    """A renamed or split file left in the table would silently lose its place at the front."""
    missing = [f for f in HEAVY_FILES if not (ROOT / f).is_file()]
    assert not missing, f"tests/conftest.py HEAVY_FILES names files that do not exist: {missing}"
    assert all(seconds > 0 for seconds in HEAVY_FILES.values())


def test_heavy_files_first_then_most_tests_first() -> None:
    heavy, lighter = [f for f in sorted(HEAVY_FILES, key=HEAVY_FILES.__getitem__, reverse=True)
                      if f not in SAME_CORPUS_AS_FIRST][:2]
    items = _items("tests/a/test_one.py::t1",
                   "tests/b/test_three.py::t1", "tests/b/test_three.py::t2",
                   f"{lighter}::x", "tests/b/test_three.py::t3",
                   f"{heavy}::y1", f"{heavy}::y2", "tests/a/test_one_more.py::t1")
    _heavy_files_first(items)
    assert [i.nodeid for i in items] == [
        f"{heavy}::y1", f"{heavy}::y2", f"{lighter}::x",
        "tests/b/test_three.py::t1", "tests/b/test_three.py::t2", "tests/b/test_three.py::t3",
        "tests/a/test_one.py::t1", "tests/a/test_one_more.py::t1",  # ties keep collection order
    ]


def test_files_of_the_same_corpus_wait_for_the_first_files_time() -> None:
    """A file embedding the corpus the first heavy file embeds is handed out only after the
    other files given out meanwhile add up to the first file's time (not beside it, idle on the
    embedding cache's lock)."""
    ranked = sorted(HEAVY_FILES, key=HEAVY_FILES.__getitem__, reverse=True)
    first = ranked[0]
    assert first not in SAME_CORPUS_AS_FIRST
    others = [f for f in ranked[1:] if f not in SAME_CORPUS_AS_FIRST]
    items = _items(*(f"{f}::t" for f in reversed(ranked)), "tests/z/test_light.py::t")
    _heavy_files_first(items)
    files = [i.nodeid.split("::")[0] for i in items]
    assert files[0] == first
    for held in SAME_CORPUS_AS_FIRST:
        before = files[1:files.index(held)]
        spent = sum(HEAVY_FILES.get(f, 0.0) for f in before if f not in SAME_CORPUS_AS_FIRST)
        assert spent >= HEAVY_FILES[first], (held, spent)
        # and not later than needed: without the last file before it, the time is not reached
        last = [f for f in before if f not in SAME_CORPUS_AS_FIRST][-1]
        assert spent - HEAVY_FILES[last] < HEAVY_FILES[first]
    assert set(files) == {*ranked, "tests/z/test_light.py"} and len(others) > 0


def test_run_tests_keeps_the_conftest_order() -> None:
    script = (ROOT / "scripts" / "run_tests.sh").read_text()
    assert "--dist loadfile --no-loadscope-reorder" in script
