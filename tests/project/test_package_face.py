"""The package face (`import retrieval`): every verb is a plain function with its real signature,
whatever was imported before it (no module of the package shares a verb's name)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERBS = ("bench_embed", "bench_fanout", "bench_load", "evaluate", "export", "open_run", "report",
         "sweep", "tune_cache", "tune_rerank", "verify")
#: what a fresh interpreter imports before it looks at the verbs
ORDERS = {
    "face-only": "import retrieval",
    "from-import-first": "from retrieval import evaluate, export, report",
    "packages-first": "import retrieval.exporting.registry, retrieval.reporting.build, "
                      "retrieval.evaluation",
    "api-first": "import retrieval.api.verbs",
    "cli-first": "import retrieval.cli",
}
PROBE = """
import inspect, json
import retrieval
import retrieval.api.verbs as verbs
from retrieval import evaluate, export, report
out = {}
for name in %r:
    face = getattr(retrieval, name)
    out[name] = {
        "function": inspect.isfunction(face),
        "same": face is getattr(verbs, name),
        "signature": str(inspect.signature(face)),
    }
out["from_import_same"] = [evaluate is verbs.evaluate, export is verbs.export,
                           report is verbs.report]
print(json.dumps(out))
"""


def _probe(before: str) -> dict:
    code = f"{before}\n{PROBE % (VERBS,)}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_verbs_are_plain_functions_whatever_was_imported_before(order: str) -> None:
    import inspect

    import retrieval.api.verbs as verbs

    out = _probe(ORDERS[order])
    for name in VERBS:
        assert out[name]["function"], (order, name)
        assert out[name]["same"], (order, name)
        assert out[name]["signature"] == str(inspect.signature(getattr(verbs, name)))
        assert out[name]["signature"] != "(*args, **kwargs)"
    assert out["from_import_same"] == [True, True, True]


def test_no_module_of_the_package_shares_a_verb_name() -> None:
    names = {p.stem for p in (ROOT / "retrieval").iterdir()
             if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert not names & set(VERBS)


def test_the_version_has_its_own_module() -> None:
    import retrieval
    from retrieval._version import __version__

    assert retrieval.__version__ == __version__
