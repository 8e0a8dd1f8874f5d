"""A third-party engine arrives by the ``rwb.engines`` entry point and is treated like a built-in
one: a tiny package (``rwb_toyengine``: a numpy IVF with exact distances, backend ``toy-ivf``,
engine ``toy``) is installed into a temp folder with its ``*.dist-info/entry_points.txt`` (what
pip writes), put on PYTHONPATH of a subprocess (importlib.metadata finds dist-info folders on
sys.path), and then `rwb backends --json` lists it, the shipped conformance suite passes on it
and `rwb sweep --strategy target` tunes it. A plugin that fails to import is one warning, never
a crash for the others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from retrieval.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

TOY = '''
"""A toy engine for rwb: IVF over seeded random centroids, exact distances in the lists."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from retrieval.data import normalize_rows
from retrieval.errors import param_error
from retrieval.indexes.engine import EngineDescriptor, register_engine
from retrieval.indexes.inprocess import InProcessIndex, check_k, unknown_knob
from retrieval.indexes.registry import register
from retrieval.params import Params


class ToyBuild(Params):
    nlist: int = Field(8, ge=1, le=1024)


class ToySearch(Params):
    nprobe: int = Field(1, ge=1, le=1024)


@register
class ToyIvf(InProcessIndex):
    name = "toy-ivf"
    family = "ivf"
    BuildParams = ToyBuild
    SearchParams = ToySearch
    monotone_knobs = ("nprobe",)

    @classmethod
    def library_version(cls) -> str:
        return f"numpy {np.__version__}"

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        check_k(k, "backend 'toy-ivf'")
        if search.nprobe > build.nlist:
            raise param_error("nprobe", f"in [1, nlist={build.nlist}]", search.nprobe,
                              where="backend 'toy-ivf' search params")

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        return {"nprobe": build.nlist}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        if knob != "nprobe":
            raise unknown_knob(cls, knob)
        return 1, build.nlist

    def _prep(self, x: np.ndarray) -> np.ndarray:
        return normalize_rows(x) if self.metric == "cosine" else x

    def _dist(self, q: np.ndarray, x: np.ndarray) -> np.ndarray:
        if self.metric == "l2":
            return ((x - q) ** 2).sum(axis=1)
        ip = x @ q
        return -ip if self.metric == "ip" else 1.0 - ip

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        x = self._prep(x)
        rng = np.random.default_rng(self.seed)
        nlist = min(self.build_params.nlist, x.shape[0])
        self._cent = x[rng.choice(x.shape[0], nlist, replace=False)]
        assign = np.argmin(((x[:, None, :] - self._cent[None]) ** 2).sum(-1), axis=1)
        self._x, self._lists = x, [np.flatnonzero(assign == j) for j in range(nlist)]
        return {}

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        x = self._prep(x)
        d = np.full((x.shape[0], k), np.inf, dtype=np.float32)
        ids = np.full((x.shape[0], k), -1, dtype=np.int64)
        for r, q in enumerate(x):
            near = np.argsort(((self._cent - q) ** 2).sum(axis=1))[: self.search_params.nprobe]
            rows = np.concatenate([self._lists[j] for j in near])
            dist = self._dist(q, self._x[rows])
            top = np.argsort(dist, kind="stable")[:k]
            d[r, : len(top)], ids[r, : len(top)] = dist[top], rows[top]
        return d, ids

    def memory_bytes(self) -> int:
        return int(self._x.nbytes + self._cent.nbytes)


ENGINE = register_engine(EngineDescriptor(name="toy", backends=("toy-ivf",),
                                          knobs=("nprobe",), summary="a toy numpy IVF"))
'''


def _install(site: Path, dist: str, module: str, source: str, entry: str) -> None:
    """What pip writes for a package declaring ``[rwb.engines] <entry>``."""
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[rwb.engines]\n{entry}\n")
    (info / "RECORD").write_text("")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    _install(site, "rwb-toyengine", "rwb_toyengine", TOY, "toy = rwb_toyengine")
    _install(site, "rwb-broken-engine", "rwb_broken_engine",
             "import a_module_that_is_not_installed\n", "broken = rwb_broken_engine")
    return site


def _run(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


def test_backends_lists_the_plugin_and_a_broken_one_is_one_warning(site):
    res = _run(site, "-m", "retrieval", "backends", "--json")
    assert res.returncode == 0, res.stderr
    status = {b["name"]: b for b in json.loads(res.stdout)}
    assert status["toy-ivf"]["available"] and status["toy-ivf"]["version"].startswith("numpy")
    assert "faiss-hnsw" in status  # the built-in engines are still there
    warnings = [ln for ln in res.stderr.splitlines() if "rwb.engines" in ln]
    assert len(warnings) == 1 and "'broken'" in warnings[0], res.stderr
    assert "ModuleNotFoundError" in warnings[0] and "Traceback" not in res.stderr


def test_the_plugin_engine_is_registered_beside_the_built_in_ones(site):
    code = ("from retrieval.indexes.engine import get_engine, engine_of_backend\n"
            "from retrieval.indexes.registry import get_backend\n"
            "d = get_engine('toy'); assert engine_of_backend('toy-ivf') is d\n"
            "print(d.backends, get_backend('toy-ivf').__module__)")
    res = _run(site, "-c", code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["('toy-ivf',)", "rwb_toyengine"]


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_the_shipped_conformance_suite_passes_on_the_plugin(site, metric):
    code = ("import json\nfrom retrieval.testing.conformance import run_conformance\n"
            f"r = run_conformance('toy-ivf', metric='{metric}', build={{'nlist': 16}})\n"
            "print(json.dumps(sorted([*r.results, *r.not_applicable])))")
    res = _run(site, "-c", code)
    assert res.returncode == 0, res.stderr[-2000:]
    from retrieval.testing.conformance import CHECKS

    assert json.loads(res.stdout.splitlines()[-1]) == sorted(CHECKS)


def test_rwb_sweep_tunes_the_plugin(site, tmp_path):
    spec = {"name": "toy", "dataset": "synthetic-small", "k": 10, "warmup": 2,
            "batch_repeats": 1, "target_recall": 0.9,
            "indexes": [{"backend": "toy-ivf", "build": {"nlist": 16},
                         "search": {"nprobe": [1, 2, 4]}}],
            "tune": {"strategy": "target"}}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "run"
    res = _run(site, "-m", "retrieval", "sweep", str(path), "--strategy", "target",
               "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    s = json.loads(res.stdout)
    chosen = s["backends"]["toy-ivf"]["chosen"]
    assert chosen is not None and chosen["recall_lb"] >= 0.9
    assert 1 < chosen["search"]["nprobe"] <= 16  # tuned, not the most accurate by default
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest  # a real run directory


def test_broken_plugins_are_one_warning_each_never_fatal(tmp_path):
    """Issue 34 MEDIUM 7: a plugin raising SystemExit at import, a malformed entry point and a
    descriptor named like a built-in engine each broke every command."""
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "rwb-exits", "rwb_exits", "raise SystemExit(3)\n", "exits = rwb_exits")
    _install(site, "rwb-malformed", "rwb_malformed", "X = 1\n", "malformed = rwb_malformed:")
    _install(site, "rwb-takes-faiss", "rwb_takes_faiss",
             "from retrieval.indexes.engine import EngineDescriptor\n"
             "ENGINE = EngineDescriptor(name='faiss', backends=('mine',))\n",
             "takes = rwb_takes_faiss:ENGINE")
    res = _run(site, "-m", "retrieval", "backends", "--json")
    assert res.returncode == 0, res.stderr
    status = {b["name"]: b for b in json.loads(res.stdout)}
    assert "faiss-hnsw" in status and "mine" not in status
    warnings = [ln for ln in res.stderr.splitlines() if "rwb.engines" in ln]
    assert len(warnings) == 3, res.stderr
    assert any("'exits'" in w and "SystemExit" in w for w in warnings), warnings
    assert any("'malformed'" in w for w in warnings), warnings
    assert any("'takes'" in w and "'faiss'" in w for w in warnings), warnings
    assert "Traceback" not in res.stderr
