"""`rwb bench fanout SPEC`: several real text collections, each in its own index, queried
serially, with a thread pool and with asyncio; per-query latency per mode, speedup over serial,
CPU accounting (is a backend CPU-bound in this process, in a server process, or waiting?), and
the quality of the fused list against each single collection where qrels exist (ranx).

The spec (YAML, ``extra="forbid"``) is :class:`FanoutSpec`; see ``sweeps/fanout-3-collections
.yaml``. Every collection is embedded with the same model through the on-disk embedding cache,
so a second run only builds indexes. Latencies are milliseconds, wall/CPU times seconds.

Roles: :mod:`.spec` (the spec), :mod:`.prepare` (data, embeddings, indexes), :mod:`.retriever`
(the fan-out itself, timed), :mod:`.analysis` (summaries, verdict, quality: pure), and here the
bench and its run directory.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.bench.fanout.analysis import pool_runs, round_speedups, summarise
from retrieval.bench.fanout.prepare import (
    PreparedCollection,
    PreparedQueries,
    build_members,
    check_dims,
    prepare_collections,
    prepare_queries,
)
from retrieval.bench.fanout.retriever import FanOut, FanoutRun
from retrieval.bench.fanout.spec import FanoutSpec

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class FanoutBenchResult:
    summary: dict[str, Any]
    rows: list[dict[str, Any]]
    runs: dict[str, FanoutRun]


def run_fanout_bench(spec: FanoutSpec, *, progress: Progress | None = None,
                     workdir: Path | None = None,
                     prepared: list[PreparedCollection] | None = None,
                     queries: PreparedQueries | None = None) -> FanoutBenchResult:
    """Prepare (embed, cached), build, run every mode (``rounds`` times, modes interleaved),
    analyse. See the module docstring."""
    steps = 2 + len(spec.modes) * spec.rounds
    note = progress or (lambda d, t, s: None)
    note(0, steps, "embedding")
    prepared = prepared if prepared is not None else prepare_collections(spec)
    queries = queries if queries is not None else prepare_queries(spec)
    check_dims(spec, prepared, queries)
    note(1, steps, "building indexes")
    with contextlib.ExitStack() as stack:
        base = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rwb-fo-")))
        members, facts = stack.enter_context(build_members(spec, prepared, base))
        fan = FanOut(members, spec.k, timeout_s=spec.timeout_s, fusion=spec.fusion,
                     rrf_k=spec.rrf_k)
        stack.callback(fan.close)
        note(2, steps, "searching")
        per_round: dict[str, list[FanoutRun]] = {m: [] for m in spec.modes}
        done = 2
        for r in range(spec.rounds):
            for mode in spec.modes:
                per_round[mode].append(fan.run(queries.vectors, mode, warmup=spec.warmup))
                done += 1
                note(done, steps, f"{mode} (round {r + 1}/{spec.rounds})")
        runs = {m: pool_runs(v) for m, v in per_round.items()}
        summary = summarise(spec, facts, runs, queries, members)
        if spec.rounds > 1:
            round_speedups(summary, per_round)
    first = {m: v[0] for m, v in per_round.items()}
    rows = [
        {"mode": mode, "round": r, "query_id": qid, "latency_ms": a.ms,
         "member_ms": {n: x.ms for n, x in a.answers.items()},
         "failed": ",".join(sorted(a.failures)) or None, "fused_top1": (a.fused or [("", 0)])[0][0]}
        for mode, rounds in per_round.items() for r, run in enumerate(rounds)
        for qid, a in zip(queries.ids, run.answers)
    ]
    return FanoutBenchResult(summary, rows, first)


def write_fanout_run(spec: FanoutSpec, result: FanoutBenchResult, out: str | Path | None,
                     *, force: bool = False) -> Any:
    """Run directory: spec.yaml (resolved), manifest.json (versions, git sha, CPU, threads,
    seeds, status), results.parquet (one tidy row per mode x query), summary.json. A
    non-empty ``out`` is refused unless ``force``."""
    from retrieval.bench.summary import FanoutBenchSummary
    from retrieval.runs import RunDir

    run = RunDir.create(out, f"{FanoutBenchSummary.KIND}-{spec.name}", force=force)
    with run.recording():
        _write_fanout(run, spec, result)
    return run


def _write_fanout(run: Any, spec: FanoutSpec, result: FanoutBenchResult) -> None:
    from retrieval.bench.summary import FanoutBenchSummary

    run.write_yaml("spec.yaml", spec.model_dump(mode="json"))
    run.write_manifest(
        kind=FanoutBenchSummary.KIND,
        spec_source=spec.source,
        seeds={"sample": spec.seed, "queries": spec.seed + 1, "index": spec.seed},
        index_threads=spec.threads,
        collections=[{k: c[k] for k in ("name", "source", "n", "backend", "model_id",
                                          "fingerprint")}
                     for c in result.summary["collections"]],
    )
    run.write_table("results.parquet", result.rows)
    run.write_summary(FanoutBenchSummary.model_validate(result.summary))


__all__ = ["FanoutBenchResult", "Progress", "run_fanout_bench", "write_fanout_run"]
