"""In-place tuning of a live pgvector collection (issue 30): live queries spent, wall time, and
the knob found vs an independent dense scan on the same collection by the same rule (the
smallest hnsw.ef_search whose recall lower bound on the tuning queries meets the target).

The collection is made here through psycopg (a table ``bench_live_<hex>``, ids 1_000_000 + 7*i,
HNSW m / ef_construction as given), from a dataset (``--dataset qqp-minilm`` for the 137k QQP
MiniLM vectors; its held-out questions are the "production" queries) or synthetic vectors
(``--n``, ``--dim``); it is dropped at the end. The sweep runs through ``rwb sweep`` of a live
spec (paced at ``--max-qps``); the dense scan measures EVERY value in ``[low, high]`` of the
knob (``--dense-high`` caps it) on the same tuning queries with the same exact top-k and the
same lower bound. Printed, never asserted; the CPU model and load average are printed with it.

Usage: python benchmarks/live_tune.py [--dataset qqp-minilm | --n 20000 --dim 64]
                                      [--queries 200] [--target 0.95] [--max-qps 1000]
                                      [--m 16] [--ef-construction 64] [--dense-high 300]
pgvector uses ``$RWB_PG_URL`` or a private server started for the run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np


@contextlib.contextmanager
def pg() -> Iterator[str]:
    if os.environ.get("RWB_PG_URL"):
        yield os.environ["RWB_PG_URL"]
        return
    from retrieval.engines.pgvector.server import pg_server

    with pg_server() as srv:
        os.environ["RWB_PG_URL"] = srv.url
        try:
            yield srv.url
        finally:
            os.environ.pop("RWB_PG_URL", None)


def data(a: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, str]:
    if a.dataset:
        from retrieval.loaders import load_dataset

        ds = load_dataset(a.dataset)
        return np.asarray(ds.base), np.asarray(ds.queries[:a.queries]), ds.metric
    from retrieval.loaders.synthetic import make_synthetic

    ds = make_synthetic(a.n, a.dim, a.queries, metric="l2", seed=0, name="live-bench")
    return np.asarray(ds.base), np.asarray(ds.queries), "l2"


def make_table(url: str, x: np.ndarray, metric: str, m: int, efc: int) -> str:
    import psycopg
    from pgvector.psycopg import register_vector

    table = f"bench_live_{uuid.uuid4().hex[:8]}"
    ops = {"l2": "vector_l2_ops", "cosine": "vector_cosine_ops", "ip": "vector_ip_ops"}[metric]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute(f"CREATE TABLE {table} (item_id bigint PRIMARY KEY, "
                     f"emb vector({x.shape[1]}))")
        with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(["int8", "vector"])
            for i, v in enumerate(x):
                cp.write_row((1_000_000 + 7 * i, v))
        t0 = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(f"CREATE INDEX ON {table} USING hnsw (emb {ops}) "
                     f"WITH (m = {m}, ef_construction = {efc})")
        conn.execute(f"ANALYZE {table}")
        print(f"table {table}: {x.shape[0]} x {x.shape[1]}, HNSW m {m} ef_construction "
              f"{efc} built in {time.perf_counter() - t0:.1f} s")
    return table


def dense_scan(url: str, table: str, q: np.ndarray, a: argparse.Namespace, summary: dict,
               rows: np.ndarray) -> tuple[int | None, int, float]:
    """Every ef_search in [low, min(high, dense_high)] on the tuning rows, by the same rule."""
    from retrieval.live import attach
    from retrieval.stats.metrics import recall_by_id
    from retrieval.tune.config import ConfidenceSpec
    from retrieval.tune.decide import lower_bound

    col = attach({"engine": "pgvector", "dsn": url, "table": table, "vector_column": "emb",
                  "id_column": "item_id"})
    t0, spent, found = time.perf_counter(), 0, None
    try:
        truth = col.search_exact(q[rows], a.k).ids
        spent += rows.size
        conf = ConfidenceSpec.model_validate(summary["confidence"])
        knob = summary["knob"]
        for ef in range(int(knob["low"]), min(int(knob["high"]), a.dense_high) + 1):
            col.set_search_params(ef_search=ef)
            got = col.search(q[rows], a.k).ids
            spent += rows.size
            lb = lower_bound(recall_by_id(got, truth, a.k), a.k, conf, 0)
            if lb >= a.target - 1e-9:
                found = ef
                break
    finally:
        col.close()
    return found, spent, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="")
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--max-qps", type=float, default=1000.0)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--dense-high", type=int, default=300)
    a = ap.parse_args()
    import yaml

    from retrieval.api import sweep
    from retrieval.tune.decide import split_queries

    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    print(f"CPU {cpu}, {os.cpu_count()} cores; load average before: {os.getloadavg()}")
    x, q, metric = data(a)
    with pg() as url:
        import psycopg

        table = make_table(url, x, metric, a.m, a.ef_construction)
        try:
            work = Path(tempfile.mkdtemp(prefix="rwb-live-bench-"))
            np.save(work / "prod.npy", q.astype(np.float32))
            spec = {"name": "live-bench", "k": a.k, "target_recall": a.target,
                    "live": {"engine": "pgvector", "dsn": "${RWB_PG_URL}", "table": table,
                             "vector_column": "emb", "id_column": "item_id"},
                    "queries": {"log": "prod.npy"}, "heldout_fraction": 0.5,
                    "budget": {"max_qps": a.max_qps, "time_limit_s": 3600}}
            (work / "live.yaml").write_text(yaml.safe_dump(spec))
            run = sweep(str(work / "live.yaml"), out=str(work / "run"))
            s = run.to_dict()
            spent = s["live"]["spent"]
            chosen = (s.get("chosen") or {}).get("search", {}).get("ef_search")
            print(f"in place: ef_search {chosen}, {spent['live_queries']} live queries "
                  f"({s['evaluations']} probes + exact ground truth), {spent['wall_s']:.1f} s "
                  f"at max_qps {a.max_qps:g}; held-out recall {s.get('heldout_recall')}")
            rows = split_queries(q.shape[0], 0.5, 0).tune
            dense, dspent, dwall = dense_scan(url, table, q, a, s, rows)
            print(f"dense scan: ef_search {dense}, {dspent} live queries, {dwall:.1f} s "
                  f"(unpaced)")
            print(f"equal by the same rule: {chosen == dense}")
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
