"""Recall under uniform churn (issue 22): the 20k QQP MiniLM vectors (``--dataset``), with
hnswlib, faiss-ivf, pgvector and qdrant; recall@10 and its fresh-build control at every search
step (drift vs damage), single-query p99, insert/delete throughput, the re-tuned knob and the
advice line per engine. Printed, never asserted.

The runbook: ``--start`` of the base inserted, then ``--rounds`` rounds each replacing
``--churn`` of the live ids with unseen rows, a search (with a control) after each. pgvector
uses ``$RWB_PG_URL`` or a private server; an engine that takes no writes yet (qdrant until its
writes land) is reported with its one-line refusal and skipped. The run directory is kept
(``--out``); ``rwb report DIR`` plots it.

Usage: python benchmarks/churn.py [--dataset qqp-minilm-20k] [--rounds 10] [--churn 0.1]
                                  [--start 0.5] [--queries 200] [--backends hnswlib,...]
                                  [--out runs/churn-bench]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from retrieval.churn.run import run_churn
from retrieval.churn.spec import parse_churn_spec
from retrieval.errors import ConfigError
from retrieval.indexes.registry import get_backend
from retrieval.indexes.writes import require_writes
from retrieval.workload.runbooks import uniform_churn

CONFIGS: dict[str, dict[str, Any]] = {
    "hnswlib": {"backend": "hnswlib", "build": {"M": 16, "ef_construction": 100},
                "search": {"ef_search": 40}},
    "faiss-ivf": {"backend": "faiss-ivf", "build": {"nlist": 128}, "search": {"nprobe": 8}},
    "pgvector": {"backend": "pgvector", "build": {"m": 16, "ef_construction": 64},
                 "search": {"ef_search": 40}},
    "qdrant": {"backend": "qdrant", "build": {"m": 16, "ef_construct": 100},
               "search": {"hnsw_ef": 40}},
}


@contextlib.contextmanager
def pg() -> Iterator[None]:
    if os.environ.get("RWB_PG_URL"):
        yield
        return
    from retrieval.engines.pgvector.server import pg_server

    with pg_server() as srv:
        os.environ["RWB_PG_URL"] = srv.url
        try:
            yield
        finally:
            os.environ.pop("RWB_PG_URL", None)


def _pts(x: float | None) -> str:
    return "    -" if x is None else f"{100 * x:5.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="qqp-minilm-20k")
    ap.add_argument("--n", type=int, default=20_000, help="base rows of the dataset")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--churn", type=float, default=0.1)
    ap.add_argument("--start", type=float, default=0.5)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--backends", default="hnswlib,faiss-ivf,pgvector,qdrant")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    book = uniform_churn(a.n, start_fraction=a.start, fraction=a.churn, rounds=a.rounds)
    out = a.out or tempfile.mkdtemp(prefix="rwb-churn-bench-")
    configs = []
    for name in a.backends.split(","):
        data = {"name": "churn-bench", "dataset": a.dataset, "queries": a.queries,
                "target_recall": a.target, "configs": [CONFIGS[name]], "runbook": book}
        try:
            parse_churn_spec(data, source=f"<benchmarks/churn.py {name}>")
            require_writes(get_backend(CONFIGS[name]["backend"]), ["insert", "delete",
                                                                   "replace"])
            configs.append(CONFIGS[name])
        except ConfigError as exc:
            print(f"{name}: skipped: {exc}")
    if not configs:
        return 1
    spec = parse_churn_spec({**data, "configs": configs}, source="<benchmarks/churn.py>")
    with pg() if any(c["backend"] == "pgvector" for c in configs) else contextlib.nullcontext():
        res = run_churn(spec, out=out)
    s = res.summary
    print(f"{s['dataset']}: {s['n_queries']} queries, k={s['k']}, runbook {s['runbook']}; "
          f"recall by id vs the live set's exact top-k; drift/damage in points")
    for c in s["configs"]:
        print(f"\n{c['label']} ({c['knob']} {c['knob_value']}):")
        print("step  live   recall control drift damage  p99_ms  ins/s   del/s  tuned")
        writes: dict[str, Any] = {}
        for r in c["steps"]:
            if r["op"] != "search":
                writes = r
                continue
            ctl = r["control_recall"]
            print(f"{r['step']:4d} {r['live']:6d}  {r['recall']:.3f}  "
                  f"{'  -  ' if ctl is None else format(ctl, '.3f')}"
                  f" {_pts(r['drift'])} {_pts(r['damage'])} {r['p99_ms']:7.3f} "
                  f"{writes.get('insert_per_s') or 0:7.0f} {writes.get('delete_per_s') or 0:7.0f}"
                  f"  {r['tuned_knob']}")
        print(f"advice: {c['advice']['line']}")
    print(f"\nload average: {os.getloadavg()}; run directory: {res.run.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
