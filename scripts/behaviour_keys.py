"""The shape of what rwb writes, for a fixed set of runs: the files of each run directory and
the key paths of its summary.json / manifest.json, of each exported file, and of each ``--json``
output (values are not compared: they are measurements).

    python scripts/behaviour_keys.py OUT.json [--root CHECKOUT]

runs, with the code of CHECKOUT (default this one) through ``python -m retrieval``:
``eval`` and ``sweep --strategy target`` of a small spec (faiss-flat, hnswlib, faiss-ivf), a
filtered sweep of a small filtered spec, ``export`` of both in hnswlib's and Faiss's names, and
``verify`` of the unfiltered hnswlib export. ``tests/data/behaviour_keys_before.json`` was
written by this script on the commit before the engine-folder redesign (issue 19); the test
``tests/project/test_behaviour_keys.py`` checks that every file and key written then is still
written (new ones may be added).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

SPEC = {
    "name": "shape", "dataset": "synthetic-small", "k": 10, "seed": 0, "threads": 1,
    "modes": ["single", "batch"], "warmup": 4, "batch_repeats": 1, "target_recall": 0.9,
    "indexes": [
        {"backend": "faiss-flat"},
        {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
         "search": {"ef_search": [10, 40]}},
        {"backend": "faiss-ivf", "build": {"nlist": 32}, "search": {"nprobe": [1, 8]}},
    ],
}
FILTERED = {
    "name": "shape-filtered",
    "dataset": {"kind": "synthetic", "n": 3000, "dim": 16, "n_queries": 60, "n_clusters": 8,
                "seed": 0, "attributes": True, "correlation": 1.0},
    "k": 10, "target_recall": 0.9, "warmup": 4, "batch_repeats": 1,
    "indexes": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                 "search": {"ef_search": [16, 64]}}],
    "filters": {"selectivities": [0.05, 0.5], "attribute": "clustered", "place": "random",
                "strategies": ["engine", "prefilter", "postfilter"]},
}


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON/YAML document (``a.b``; list items as ``a[]``)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            out.add(p)
            out |= key_paths(v, p)
    elif isinstance(value, list):
        for v in value:
            out |= key_paths(v, f"{prefix}[]")
    return out


def rwb(root: Path, *args: str, cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-m", "retrieval", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"rwb {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def run_dir_shape(path: Path) -> dict[str, Any]:
    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    out: dict[str, Any] = {"files": files}
    for name in ("summary.json", "manifest.json"):
        if (path / name).is_file():
            out[name] = sorted(key_paths(json.loads((path / name).read_text())))
    return out


def collect(root: Path, work: Path) -> dict[str, Any]:
    (work / "spec.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    (work / "filtered.yaml").write_text(yaml.safe_dump(FILTERED, sort_keys=False))
    shape: dict[str, Any] = {}
    out = rwb(root, "eval", "spec.yaml", "--out", "runs/eval", "--json", cwd=work)
    shape["eval --json"] = sorted(key_paths(json.loads(out)))
    shape["eval run"] = run_dir_shape(work / "runs/eval")
    out = rwb(root, "sweep", "spec.yaml", "--strategy", "target", "--out", "runs/sweep",
              "--json", cwd=work)
    shape["sweep --json"] = sorted(key_paths(json.loads(out)))
    shape["sweep run"] = run_dir_shape(work / "runs/sweep")
    for engine in ("hnswlib", "faiss"):
        rwb(root, "export", "runs/sweep", "--engine", engine, "--out", f"{engine}.yaml",
            cwd=work)
        shape[f"export {engine}"] = sorted(key_paths(yaml.safe_load(
            (work / f"{engine}.yaml").read_text())))
    out = rwb(root, "verify", "hnswlib.yaml", "--json", cwd=work)
    shape["verify --json"] = sorted(key_paths(json.loads(out)))
    out = rwb(root, "sweep", "filtered.yaml", "--strategy", "target", "--out", "runs/fsweep",
              "--json", cwd=work)
    shape["filtered sweep --json"] = sorted(key_paths(json.loads(out)))
    shape["filtered sweep run"] = run_dir_shape(work / "runs/fsweep")
    rwb(root, "export", "runs/fsweep", "--engine", "hnswlib", "--out", "filtered.yaml.out",
        cwd=work)
    shape["export filtered hnswlib"] = sorted(key_paths(yaml.safe_load(
        (work / "filtered.yaml.out").read_text())))
    return shape


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rwb-shape-") as tmp:
        shape = collect(a.root.resolve(), Path(tmp))
    a.out.write_text(json.dumps(shape, indent=1, sort_keys=True) + "\n")
    print(f"wrote {a.out}: {sum(len(v) if isinstance(v, list) else 1 for v in shape.values())}"
          f" entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
