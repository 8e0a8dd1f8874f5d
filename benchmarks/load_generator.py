"""The load generator's own ceiling and the correctness of its corrected percentiles (issue 12,
Performance). Printed, never asserted; ratios from one run.

1. Ceiling: an instant backend (the fault backend with ``exact: false``: every call returns at
   once) under an open loop at rising offered rates, per client kind (threads, asyncio,
   processes). Printed: achieved QPS, the generator's lag behind the schedule (us; only requests
   a client was free for, so this is the generator's own lateness), client CPU. Goal: lag p99
   <= 100 us at >= 5,000 offered QPS.
2. Correction: one open-loop point on the fault backend with a 100 ms stall per second; rwb's
   corrected p50/p99/p99.9 (HDR histogram) against the same percentiles computed by hand
   (numpy, 'inverted_cdf') from the same recorded intended/done timestamps. Goal: equal (ratio
   1.000 within HDR's 3 significant digits).

Usage: python benchmarks/load_generator.py [--rates 1000,2000,5000,10000] [--seconds 2]
       [--clients 4] [--kinds threads,asyncio,processes]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from pathlib import Path


def _fault_target(build: dict, tmp: Path):  # type: ignore[no-untyped-def]
    import numpy as np

    import retrieval.testing.faulty  # noqa: F401  (registers backend "fault")
    from retrieval.bench.load.drivers import Target
    from retrieval.indexes import create_index

    rng = np.random.default_rng(0)
    base = rng.standard_normal((500, 8)).astype(np.float32)
    rows = [rng.standard_normal((1, 8)).astype(np.float32) for _ in range(64)]
    index = create_index("fault", 8, "l2", build)
    index.build(base)
    return Target("fault", len(rows), lambda qi: index.search(rows[qi], 5),
                  lambda qi, raw: float("nan")), index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="1000,2000,5000,10000")
    ap.add_argument("--seconds", type=float, default=2.0, help="per point, warm-up included")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--kinds", default="threads,asyncio,processes")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import numpy as np

    from retrieval.bench.load.drivers import LoopOptions, open_loop_asyncio, open_loop_threads
    from retrieval.bench.load.procs import ProcFactory, open_loop_processes
    from retrieval.bench.load.stats import hand_corrected_p, schedule_offsets_ns, summarise_point
    from retrieval.bench.load.targets import Resolved
    from retrieval.runs import cpu_info

    cpu = cpu_info()
    print(f"CPU {cpu['model']} ({cpu['logical_cpus']} logical CPUs, load average "
          f"{os.getloadavg()[0]:.2f})")
    warm = 0.3
    opt = LoopOptions(int(warm * 1e9), int((args.seconds - warm) * 1e9), int(1e9))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        instant = {"service_ms": 0.0, "exact": False, "workers": 64}
        target, index = _fault_target(instant, tmp)
        spec = {"name": "gen", "dataset": None, "k": 5, "duration_s": args.seconds,
                "warmup_s": warm, "source": "<benchmark>"}
        factory = None
        print("\n1. generator ceiling (instant backend; lag = lateness behind the schedule)")
        print(f"{'kind':10s} {'offered':>8s} {'achieved':>9s} {'lag p50':>8s} {'lag p99':>8s} "
              f"{'lag max':>9s} {'cpu':>5s}  goal (p99 <= 100 us at >= 5000 QPS)")
        for kind in args.kinds.split(","):
            if kind == "processes":
                base = tmp / "arrays"
                base.mkdir(exist_ok=True)
                rng = np.random.default_rng(0)
                for name, shape in (("base", (500, 8)), ("queries", (64, 8))):
                    np.save(base / f"{name}.npy", rng.standard_normal(shape).astype(np.float32))
                np.save(base / "gt.npy", np.zeros((64, 5), dtype=np.int64))
                factory = ProcFactory(dict(spec), Resolved("fault", "fault", instant, {}, False,
                                                           None), str(base), "l2", "gen")
            for rate in [float(r) for r in args.rates.split(",")]:
                offsets = schedule_offsets_ns(rate, args.seconds, "fixed")
                if kind == "threads":
                    rec = open_loop_threads(target, offsets, args.clients, opt)
                elif kind == "asyncio":
                    rec = open_loop_asyncio(target, offsets, args.clients, opt)
                else:
                    rec = open_loop_processes(factory, offsets, args.clients, 2, opt)
                row = summarise_point(rec, mode="open", closed=False, max_lag_us=100.0,
                                      timeout_ms=1000.0)
                lag = (rec.sent - rec.intended)[rec.waited] / 1000.0
                p50 = float(np.percentile(lag, 50)) if lag.size else float("nan")
                goal = "" if rate < 5000 else (
                    "MET" if (row["lag_p99_us"] or 1e9) <= 100 else "NOT MET")
                print(f"{kind:10s} {rate:8.0f} {row['achieved_qps']:9.0f} {p50:8.1f} "
                      f"{row['lag_p99_us'] or float('nan'):8.1f} "
                      f"{row['lag_max_us'] or float('nan'):9.1f} "
                      f"{row['client_cpu_cores']:5.2f}  {goal}")
        index.close()

        print("\n2. corrected percentiles: rwb (HDR) vs by hand on the same timestamps")
        stall, sidx = _fault_target({"service_ms": 2.0, "stall_ms": 100.0, "workers": 1}, tmp)
        offsets = schedule_offsets_ns(300.0, max(args.seconds, 3.3), "poisson", seed=1)
        opt2 = LoopOptions(int(warm * 1e9), int((max(args.seconds, 3.3) - warm) * 1e9),
                           int(10e9))
        rec = open_loop_threads(stall, offsets, 8, opt2)
        row = summarise_point(rec, mode="open", closed=False, max_lag_us=1e9, timeout_ms=1e4)
        for q, key in ((50.0, "p50_ms"), (99.0, "p99_ms"), (99.9, "p999_ms")):
            hand = hand_corrected_p(rec.intended, rec.done, q)
            print(f"  {key:8s} rwb {row[key]:9.3f} ms  by hand {hand:9.3f} ms  ratio "
                  f"{row[key] / hand:.4f}  (goal 1.000)")
        print(f"  uncorrected p99 (from the actual send) {row['p99_ms_uncorrected']:.3f} ms")
        sidx.close()


if __name__ == "__main__":
    main()
