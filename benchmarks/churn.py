"""Recall under uniform churn (issue 22): the 20k QQP MiniLM vectors (``--dataset``), with
hnswlib, faiss-ivf, pgvector and qdrant; recall@10 and its fresh-build control at every search
step (drift vs damage), single-query p99, insert/delete throughput, the re-tuned knob and the
advice line per engine; then searching while writing on hnswlib and pgvector (open-loop searches
at fixed rates while a writer inserts and deletes; achieved vs offered rate, corrected p99,
recall over the live set, and the largest rate holding the SLO and the target). Printed, never
asserted.

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
from pathlib import Path
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
    ap.add_argument("--no-writing", dest="writing", action="store_false",
                    help="skip searching while writing")
    ap.add_argument("--writing-backends", default="hnswlib,pgvector")
    ap.add_argument("--writing-rates", default="100,400")
    ap.add_argument("--insert-rate", type=float, default=200.0, help="vectors/s while searching")
    ap.add_argument("--slo-ms", type=float, default=20.0, help="p99 SLO while writing (ms)")
    ap.add_argument("--seconds", type=float, default=5.0, help="per searching-while-writing point")
    a = ap.parse_args()
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    print(f"CPU {cpu}, {os.cpu_count()} cores; load average before: {os.getloadavg()}")
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
    if a.writing:
        while_writing(a)
    return 0


WRITING: dict[str, dict[str, Any]] = {
    "hnswlib": CONFIGS["hnswlib"],
    "pgvector": CONFIGS["pgvector"],
}


def while_writing(a: argparse.Namespace) -> None:
    """Searching while writing (VectorDBBench #566's question: can the engine keep the target
    recall at a search rate while it is written to?): open-loop searches at each offered rate
    while a writer inserts and deletes, then the capacity search for the largest rate whose
    corrected p99 <= the SLO and whose lowest recall sample >= the target."""
    from retrieval.bench.load.run import run_load_bench
    from retrieval.bench.load.spec import parse_load_spec

    rates = [float(x) for x in a.writing_rates.split(",")]
    print(f"\nsearching while writing on {a.dataset} (first half built, then {a.insert_rate:g} "
          f"inserts/s + {a.insert_rate / 2:g} deletes/s; SLO p99 <= {a.slo_ms:g} ms and every "
          f"recall sample >= {a.target:g}; {a.seconds:g} s per point)")
    print("config      offered achieved  p50_ms  p99_ms recall  min  ins/s  del/s lag_p99_us"
          "  meets")
    for name in a.writing_backends.split(","):
        spec = parse_load_spec({
            "name": f"writing-{name}", "dataset": a.dataset, "k": 10, "warmup_s": 1.0,
            "duration_s": a.seconds, "slo": {"p99_ms": a.slo_ms, "target_recall": a.target},
            "closed": None, "open": {"arrival": "poisson", "clients": 4, "search": None},
            "writes": {"initial_fraction": 0.5, "insert_rate": a.insert_rate,
                       "delete_rate": a.insert_rate / 2, "batch": 50, "recall_every_s": 0.5,
                       "recall_queries": 100, "rates": rates,
                       "search": {"start_qps": rates[-1], "max_qps": 20 * rates[-1],
                                  "steps": 4}},
            "configs": [WRITING[name]]}, source=f"<benchmarks/churn.py writing {name}>")
        with pg() if name == "pgvector" else contextlib.nullcontext():
            res = run_load_bench(spec, workdir=Path(tempfile.mkdtemp(prefix="rwb-writing-")))
        (cfg,) = res.summary["configs"]
        for r in (r for r in res.rows if r["mode"] == "open-writes"):
            print(f"{name:<10} {r['offered_qps']:8.0f} {r['achieved_qps'] or 0:8.0f} "
                  f"{r['p50_ms']:7.2f} {r['p99_ms']:7.2f} {r['recall'] or 0:.3f} "
                  f"{r['recall_min'] or 0:.3f} {r['insert_achieved']:6.0f} "
                  f"{r['delete_achieved']:6.0f} {r['lag_p99_us'] or 0:10.0f}  {r['meets_slo']}")
        w = cfg["writes"]
        print(f"{name}: largest search rate holding both while writing: "
              f"{w['capacity_qps']} QPS (limited by {w['limited_by']}; first failing "
              f"{w['first_fail_qps']}); generator: a lag p99 over {a.slo_ms * 100:g} us means "
              f"the point measured the client, not the engine")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    sys.exit(main())
