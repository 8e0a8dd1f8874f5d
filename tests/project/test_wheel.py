"""rwb works installed from its wheel, outside a checkout.

The wheel is built from a copy of the files it is made of (pyproject.toml, README.md, retrieval/,
datasets/) with this interpreter's setuptools (no build isolation: nothing is downloaded),
installed with ``--no-deps`` into a fresh venv in a temporary folder (not
``--system-site-packages``); the venv reaches the dependencies through one ``.pth`` line naming
this interpreter's site-packages, where rwb itself is at most an editable install whose finder
is not loaded that way. From a temporary working directory, ``import retrieval`` must resolve
into the venv, ``rwb datasets`` must list the packaged manifests, and ``rwb eval`` of a tiny
spec on a packaged synthetic dataset must write its run.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

SPEC = """\
name: wheel-eval
dataset: synthetic-small
k: 5
warmup: 2
batch_repeats: 1
indexes:
  - backend: faiss-flat
  - backend: faiss-ivf
    build: {nlist: 16}
    search: {nprobe: [1, 4]}
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("retrieval", "datasets"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    dist = tmp / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", str(dist), str(src)], cwd=tmp, env=env)
    wheels = list(dist.glob("retrieval_workbench-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp, env=env)
    py = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
          "-q", str(wheels[0])], cwd=tmp, env=env)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = Path(_run([str(py), "-c", where], cwd=tmp, env=env).strip())
    deps = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"]])
    (purelib / "_rwb_test_deps.pth").write_text("".join(f"{p}\n" for p in deps))
    work = tmp / "elsewhere"  # a working directory that is not the checkout
    work.mkdir()
    shutil.rmtree(src)  # nothing may read the sources the wheel was built from
    return {"venv": venv, "purelib": purelib, "work": work}


def _env(installed: dict[str, Path]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "RWB_DATASETS_DIR", "VIRTUAL_ENV")}
    env["PATH"] = f"{installed['venv'] / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_import_resolves_to_the_installed_wheel(installed):
    out = _run([str(installed["venv"] / "bin" / "python"), "-c",
                "import retrieval, retrieval.paths as p; print(retrieval.__file__); "
                "print(p.checkout_root()); print(p.manifests_dir())"],
               cwd=installed["work"], env=_env(installed))
    module, root, manifests = out.strip().splitlines()
    assert Path(module).is_relative_to(installed["purelib"])
    assert not Path(module).is_relative_to(ROOT)
    assert root == "None"
    assert Path(manifests) == installed["purelib"] / "retrieval" / "_manifests"


def test_rwb_datasets_lists_the_packaged_manifests(installed):
    out = _run([str(installed["venv"] / "bin" / "rwb"), "datasets", "--json"],
               cwd=installed["work"], env=_env(installed))
    entries = {e["name"]: e for e in json.loads(out)}
    shipped = {p.stem for p in (ROOT / "datasets").glob("*.yaml")}
    assert set(entries) == shipped
    small = entries["synthetic-small"]
    assert small["status"] == "ok"
    assert Path(small["manifest"]).is_relative_to(installed["purelib"])


def test_rwb_eval_runs_a_tiny_spec(installed):
    work = installed["work"]
    (work / "spec.yaml").write_text(SPEC)
    out = _run([str(installed["venv"] / "bin" / "rwb"), "eval", "spec.yaml", "--out", "run",
                "--json"], cwd=work, env=_env(installed))
    summary = json.loads(out)
    assert summary["dataset"] == "synthetic-small" and summary["k"] == 5
    rows = summary["rows"]
    assert len(rows) == 3  # flat + two nprobe values
    flat = next(r for r in rows if r["backend"] == "faiss-flat")
    assert flat["recall"] == pytest.approx(1.0)
    ivf = sorted((r for r in rows if r["backend"] == "faiss-ivf"),
                 key=lambda r: r["search"]["nprobe"])
    assert ivf[0]["recall"] < ivf[1]["recall"] <= 1.0
    manifest = json.loads((work / "run" / "manifest.json").read_text())
    assert manifest["git"] == {"sha": None, "dirty": None}  # not a checkout
    assert (work / "run" / "summary.json").is_file()


def test_the_python_api_works_installed(installed):
    code = (
        "import numpy as np, retrieval\n"
        "rng = np.random.default_rng(0)\n"
        "ds = retrieval.VectorDataset.from_arrays(rng.standard_normal((300, 8)),\n"
        "                                         rng.standard_normal((20, 8)), 'l2')\n"
        "run = retrieval.evaluate({'k': 3, 'warmup': 1, 'batch_repeats': 1,\n"
        "                          'indexes': [{'backend': 'faiss-flat'}]}, dataset=ds,\n"
        "                         out='api-run')\n"
        "print(retrieval.__file__, run.to_frame().recall.iloc[0], run.path.resolve())\n"
    )
    out = _run([str(installed["venv"] / "bin" / "python"), "-c", code],
               cwd=installed["work"], env=_env(installed))
    module, recall, path = out.split()
    assert Path(module).is_relative_to(installed["purelib"])
    assert float(recall) == pytest.approx(1.0)
    assert Path(path) == (installed["work"] / "api-run").resolve()
    assert (installed["purelib"] / "retrieval" / "__init__.pyi").is_file()  # the API's types
