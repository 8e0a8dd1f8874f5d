"""How `make` installs: scripts/install_torch.sh picks the CPU build of torch (a local CPU wheel
pip finds offline, else PyTorch's CPU index), and scripts/constraints.txt pins versions inside
pyproject.toml's ranges. The torch script runs in --dry-run mode with pip pointed at folders
made here (pip.conf and the machine's wheel folder hidden), so nothing is downloaded."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install_torch.sh"
CONSTRAINTS = ROOT / "scripts" / "constraints.txt"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def pins() -> dict[str, str]:
    out = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = version.strip()
    return out


def fake_wheel(folder: Path, version: str) -> Path:
    """A minimal valid wheel named torch (pip reads its metadata; nothing is installed)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                    "Tag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def dry_run(find_links: Path, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ.update(PIP_CONFIG_FILE=os.devnull, PIP_FIND_LINKS=str(find_links),
                   PIP_DISABLE_PIP_VERSION_CHECK="1", **env)
    proc = subprocess.run(["bash", str(SCRIPT), "--dry-run", sys.executable],
                          capture_output=True, text=True, env=environ, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("install_torch: ")]
    assert len(lines) == 1, proc.stdout
    return lines[0]


def torch_pin() -> str:
    return f"torch=={pins()['torch']}"


def test_no_local_wheel_chooses_the_pytorch_cpu_index(tmp_path):
    line = dry_run(tmp_path / "empty")
    assert line.startswith("install_torch: PyTorch CPU index: ")
    assert f"--index-url {CPU_INDEX} {torch_pin()}" in line


def test_a_local_cpu_wheel_is_installed_from_its_file(tmp_path):
    version = pins()["torch"]
    wheel = fake_wheel(tmp_path / "wheels", f"{version}+cpu")
    line = dry_run(tmp_path / "wheels")
    assert line.startswith("install_torch: local CPU wheel: ")
    assert line.endswith(f"pip install -q {wheel}")
    assert "--index-url" not in line


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="off Linux every wheel is CPU")
def test_a_local_wheel_without_cpu_label_is_not_trusted_on_linux(tmp_path):
    fake_wheel(tmp_path / "wheels", pins()["torch"])  # PyPI's Linux torch is the CUDA build
    assert "PyTorch CPU index" in dry_run(tmp_path / "wheels")


def test_a_local_wheel_of_another_version_is_not_used(tmp_path):
    fake_wheel(tmp_path / "wheels", "1.0.0+cpu")
    assert "PyTorch CPU index" in dry_run(tmp_path / "wheels")


def test_the_index_url_can_be_a_mirror(tmp_path):
    line = dry_run(tmp_path / "empty", RWB_TORCH_INDEX_URL="https://mirror.example/whl/cpu")
    assert "--index-url https://mirror.example/whl/cpu " in line


def test_an_interpreter_without_pip_is_refused_in_one_line(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT), "--dry-run", str(tmp_path / "no-python")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"install_torch: PYTHON must be an interpreter with pip (e.g. .venv/bin/python); "
        f"received '{tmp_path / 'no-python'}'"]


def test_the_makefile_installs_torch_through_the_script_and_with_constraints():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "bash scripts/install_torch.sh $(BIN)/python" in make
    assert "install -q -c $(CONSTRAINTS) -e '.[dev]'" in make
    assert "CONSTRAINTS := scripts/constraints.txt" in make


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return [r for r in reqs if canonicalize_name(r.name) != "retrieval-workbench"]


def test_core_dependencies_are_ranges_not_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pinned = [r for r in project["dependencies"] if "==" in r]
    assert pinned == [], f"core dependencies must be ranges (pins go in {CONSTRAINTS.name})"


def test_every_pin_lies_inside_the_pyproject_range():
    pinned = pins()
    assert pinned, "constraints.txt is empty"
    missing, outside = [], []
    for req in _requirements():
        name = canonicalize_name(req.name)
        if name in ("psycopg2-binary", "pymysql"):  # the storage extra: not in the dev venv
            continue
        if name not in pinned:
            missing.append(name)
        elif not req.specifier.contains(Version(pinned[name]), prereleases=True):
            outside.append(f"{name}=={pinned[name]} not in {req.specifier}")
    assert missing == [] and outside == []
    assert "retrieval-workbench" not in pinned
