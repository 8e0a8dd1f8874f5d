"""The notebooks run top to bottom, headless (nbclient + the venv's ipykernel), on small runs
they make themselves; each must show at least one figure and raise nothing.

01 and 02 use synthetic vectors (no shared data); 03 uses ../shared/data and a Redis with the
search module (REDIS_URL, else one started from the PyPI wheels); 05 profiles a small pipeline
on ../shared/data (the packaged MiniLM) and runs a churn runbook on synthetic vectors. All are
marked slow.
`make notebooks` runs this file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from retrieval.paths import REPO_ROOT, data_dir  # noqa: E402

NOTEBOOKS = REPO_ROOT / "notebooks"


def _kernel_name() -> str:
    """The kernel of this interpreter: ipykernel's native 'python3' spec runs sys.executable,
    so a fresh venv made by `make` needs no `ipykernel install`."""
    pytest.importorskip("ipykernel")
    return "python3"


def execute(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            timeout: int = 900) -> Any:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for key in [k for k in os.environ if k.startswith("RWB_NOTEBOOK_")]:
        monkeypatch.delenv(key)  # the notebooks make their own small runs
    monkeypatch.setenv("RWB_NOTEBOOK_DIR", str(tmp_path))
    client = nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name=_kernel_name(),
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    return nb


def images(nb: Any) -> int:
    return sum(
        1 for c in nb.cells if c.cell_type == "code"
        for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    )


def test_notebooks_committed_without_outputs():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, path.name


def test_notebooks_are_what_the_build_script_writes():
    """scripts/build_notebooks.py holds the cells; a notebook edited by hand drifts from it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "build_notebooks", REPO_ROOT / "scripts" / "build_notebooks.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    built = {"01_ef_search_tradeoffs.ipynb": mod.NB01,
             "02_ivf_nprobe_and_build_params.ipynb": mod.NB02,
             "03_rag_layer.ipynb": mod.NB03, "05_pipeline_profile_and_churn.ipynb": mod.NB05}
    assert set(built) == {p.name for p in NOTEBOOKS.glob("*.ipynb")}
    for name, cells in built.items():
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        assert [(c.cell_type, c.source) for c in cells] == [
            (c.cell_type, c.source) for c in nb.cells], name

def test_notebooks_import_only_the_public_api():
    """Every rwb name a notebook uses comes through `import retrieval` (the verbs, their results,
    retrieval.plots): no `from retrieval...` and no `import retrieval.<module>`."""
    import ast

    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert len(paths) == 4
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        code = "\n".join(
            "\n".join(ln for ln in c.source.splitlines() if not ln.startswith("%"))
            for c in nb.cells if c.cell_type == "code"
        )
        rwb = []
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                rwb += [a.name for a in node.names if a.name.split(".")[0] == "retrieval"]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("retrieval"):
                rwb.append(f"from {node.module}")
        assert rwb == ["retrieval"], f"{path.name}: {rwb}"


@pytest.mark.slow
def test_01_ef_search_tradeoffs(tmp_path, monkeypatch):
    nb = execute("01_ef_search_tradeoffs.ipynb", tmp_path, monkeypatch)
    assert images(nb) >= 3  # latency, QPS, per-query recall
    assert list(tmp_path.glob("tuned.*.yaml")), "the notebook exports an operating point"


@pytest.mark.slow
def test_02_ivf_nprobe_and_build_params(tmp_path, monkeypatch):
    nb = execute("02_ivf_nprobe_and_build_params.ipynb", tmp_path, monkeypatch)
    assert images(nb) >= 3  # two surfaces, build costs


@pytest.mark.slow
@pytest.mark.redis
def test_03_rag_layer(tmp_path, monkeypatch, redis_url):
    if not (data_dir() / "scifact").is_dir():
        pytest.skip(f"shared data not found at {data_dir()}")
    monkeypatch.setenv("REDIS_URL", redis_url)
    # the notebook's own small runs are real (embedding bench, fan-out, rerank sweep, cache
    # tuning on Redis) and sized to share embeddings with other tests of a session: the fan-out
    # collections are test_cli_bench's seeded 300-text samples, the rerank sweep test_api's 40
    # SciFact queries, the cache tuning the 2,000 seeded QQP pairs of test_api / test_cache_tune
    nb = execute("03_rag_layer.ipynb", tmp_path, monkeypatch, timeout=1500)
    assert images(nb) == 4  # embed, fan-out, rerank, cache


@pytest.mark.slow
@pytest.mark.model
def test_05_pipeline_profile_and_churn(tmp_path, monkeypatch):
    for name in ("scifact", "gptcache_qqp"):
        if not (data_dir() / name).is_dir():
            pytest.skip(f"shared data not found at {data_dir() / name}")
    nb = execute("05_pipeline_profile_and_churn.ipynb", tmp_path, monkeypatch)
    assert images(nb) == 3  # per-stage bars, remedy waterfall, recall under churn
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                     for o in c.get("outputs", []) if o.get("output_type") == "stream")
    assert "IProgress" not in text and "Warning" not in text, text
    assert "were made slow by:" in text, text
    advice = text.count(" to hold 0.95") + text.count(": holds ")
    assert advice == 2, text  # one line of advice per churn config
    assert (tmp_path / "nb05-profile" / "summary.json").is_file()
    assert (tmp_path / "nb05-churn" / "summary.json").is_file()
