"""Index builds paid once, and build threads (issue: Where a tuning run's time goes, items 2-3).

Runs ``sweeps/minilm-qqp20k-build-cache.yaml`` (hnswlib and faiss-hnsw M 16 / ef_construction
200, faiss-ivf IVF256 flat + sq8; ``target`` strategy; dataset qqp-minilm-20k) through the
command line, each command a fresh process timed end to end (imports, dataset, builds or loads,
measuring, writing the run), with a fresh build cache folder:

1. ``rwb sweep`` a second time with the same spec vs the first (which built and saved every
   index): goal >= 5x;
2. ``rwb verify`` of the first run's hnswlib export with the cache filled vs with an empty one
   (it builds): goal >= 5x;
3. the first sweep with build threads = every CPU (the default, cache on: it also saves) vs
   with ``--build-threads 1`` and the cache off (how every sweep ran before): goal >= 1.5x on
   2 cores.

Printed, never asserted; the machine's load average is printed with the ratios.
Usage: python benchmarks/build_cache.py [--dataset qqp-minilm-20k] [--target 0.95]
(``--dataset synthetic-small`` for a quick check that it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "sweeps" / "minilm-qqp20k-build-cache.yaml"


def rwb(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run ``python -m retrieval ARGS``; (wall seconds, stdout). Raises on a non-zero exit."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "retrieval", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 and not (args[0] == "verify" and proc.returncode == 1):
        # verify's exit 1 is a verdict (FAILS), not an error: its time is still the figure
        raise SystemExit(f"rwb {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return wall, proc.stdout


def manifest(run: Path) -> dict[str, Any]:
    return json.loads((run / "manifest.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default=None, help="override the spec's dataset")
    ap.add_argument("--target", type=float, default=None, help="override the recall target")
    args = ap.parse_args()
    doc = yaml.safe_load(SPEC.read_text())
    if args.dataset:
        doc["dataset"] = args.dataset
        if args.dataset.startswith("synthetic"):  # small data: a smaller IVF
            doc["indexes"][2]["build"]["nlist"] = 32
            doc["indexes"][2]["search"]["nprobe"] = [1, 2, 4, 8, 16, 32]
            doc["tune"]["search_range"]["nprobe"] = [1, 32]
    if args.target:
        doc["target_recall"] = args.target
    with tempfile.TemporaryDirectory(prefix="rwb-build-cache-") as tmp_name:
        tmp = Path(tmp_name)
        spec = tmp / "spec.yaml"
        spec.write_text(yaml.safe_dump(doc))
        base = {**os.environ, "PYTHONPATH": str(ROOT), "RWB_INDEX_CACHE_DIR": str(tmp / "cache")}
        base.pop("RWB_INDEX_CACHE", None)
        # the dataset and its ground truth are cached before anything is timed
        rwb(["sweep", str(spec), "--out", str(tmp / "warmup"),
             "--build-threads", "1"], {**base, "RWB_INDEX_CACHE": "off"})
        t_old, _ = rwb(["sweep", str(spec), "--out", str(tmp / "old"), "--build-threads", "1"],
                       {**base, "RWB_INDEX_CACHE": "off"})
        t_first, _ = rwb(["sweep", str(spec), "--out", str(tmp / "first")], base)
        t_second, _ = rwb(["sweep", str(spec), "--out", str(tmp / "second")], base)
        first, second = manifest(tmp / "first"), manifest(tmp / "second")
        export = tmp / "tuned.hnswlib.yaml"
        rwb(["export", str(tmp / "first"), "--engine", "hnswlib", "--out", str(export)], base)
        t_verify_cold, _ = rwb(["verify", str(export), "--json"],
                               {**base, "RWB_INDEX_CACHE_DIR": str(tmp / "empty-cache")})
        t_verify_warm, out = rwb(["verify", str(export), "--json"], base)
        verified = json.loads(out)
    load = os.getloadavg()
    print(f"dataset {doc['dataset']}, target recall@{doc['k']} {doc['target_recall']}, "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    c1, c2 = first["index_cache"], second["index_cache"]
    print(f"first sweep:  {t_first:7.2f} s  (build threads {first['builds']['build_threads']}, "
          f"{c1['misses']} builds saved, {c1['shared_ivf_quantizers']} shared IVF quantizer)")
    print(f"second sweep: {t_second:7.2f} s  ({c2['hits']} of {c2['hits'] + c2['misses']} "
          f"indexes loaded)      ratio {t_first / t_second:5.2f}x  (goal >= 5x)")
    print(f"verify, empty cache: {t_verify_cold:6.2f} s; filled cache: {t_verify_warm:6.2f} s  "
          f"ratio {t_verify_cold / t_verify_warm:5.2f}x  (goal >= 5x; holds: "
          f"{verified['holds']})")
    print(f"first sweep, build threads 1, no cache (before): {t_old:6.2f} s; build threads "
          f"{first['builds']['build_threads']}: {t_first:6.2f} s  ratio {t_old / t_first:5.2f}x  "
          f"(goal >= 1.5x on 2 cores)")
    builds = [b for b in c1["builds"] if b["cache"] != "off"]
    print("builds of the first sweep (s): " + ", ".join(
        f"{b['backend']} {b['build_s']:.2f}" for b in builds))
    print("loads of the second sweep (s): " + ", ".join(
        f"{b['backend']} {b['load_s']:.3f}" for b in c2["builds"] if b["load_s"] is not None))


if __name__ == "__main__":
    main()
