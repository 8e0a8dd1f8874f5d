"""Clients as separate processes (``client: processes``), so one Python process's GIL is not the
ceiling of the load generator. Each child (``spawn``) rebuilds the target from a picklable
:class:`ProcFactory` (the dataset arrays saved once as .npy; a config served by a server process
connects to that same server by URI; an index kept on a server (pgvector's table, a Redis search
index: :class:`~retrieval.indexes.base.SupportsServerAttach`) is searched where the parent built
it, never rebuilt; an in-process library gets its own copy of the index),
reports ready, and runs the threaded loop of :mod:`.drivers` on its share of the work from one
common start time (``perf_counter_ns`` is CLOCK_MONOTONIC: one clock for every process).

Open loop: child ``p`` of ``P`` sends requests ``p, p + P, ...`` of the schedule with
``ceil(clients / P)`` threads; closed loop: the clients are split between the children. The
children's recordings are merged (the in-system samples add up: Little's L is a sum).
"""

from __future__ import annotations

import math
import multiprocessing as mp
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bench.load.drivers import (
    LoopOptions,
    Target,
    closed_loop_threads,
    open_loop_threads,
)
from retrieval.bench.load.stats import Recording
from retrieval.errors import BackendError
from retrieval.timing import clock_ns

START_LEAD_NS = 300_000_000  # children start 300 ms after the last one is ready
READY_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class ProcFactory:
    """What a child needs to rebuild the target: the spec (as data), the resolved config and
    the saved dataset arrays."""

    spec: dict[str, Any]
    resolved: Any
    arrays: str  # folder with base.npy, queries.npy, gt.npy
    metric: str
    name: str


def factory_for(spec: Any, r: Any, ds: Any, gt: np.ndarray, workdir: Path) -> ProcFactory:
    folder = workdir / f"proc-arrays-{abs(hash(r.label))}"
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "base.npy", ds.base)
    np.save(folder / "queries.npy", ds.queries)
    np.save(folder / "gt.npy", gt)
    served, attach = r.extra.get("served_at"), r.extra.get("attach")
    res = replace(r, extra={**({"uri": served} if served else {}),
                            **({"attach": attach} if attach else {})})
    data = spec.model_dump(mode="json")
    data["source"] = spec.source
    return ProcFactory(data, res, str(folder), str(ds.metric), str(ds.name))


def _child(factory: ProcFactory, role: str, args: dict[str, Any], conn: Any) -> None:
    import contextlib
    import tempfile

    from retrieval.bench.load.spec import TEST_BACKENDS, LoadSpec
    from retrieval.bench.load.targets import index_target
    from retrieval.data import VectorDataset

    try:
        if factory.resolved.backend in TEST_BACKENDS:
            import importlib

            importlib.import_module(TEST_BACKENDS[factory.resolved.backend])
        src = factory.spec.pop("source", "<memory>")
        spec = LoadSpec.model_validate({**factory.spec, "source": src})
        folder = Path(factory.arrays)
        ds = VectorDataset.from_arrays(np.load(folder / "base.npy"),
                                       np.load(folder / "queries.npy"),
                                       metric=factory.metric, name=factory.name)
        gt = np.load(folder / "gt.npy")
        with contextlib.ExitStack() as stack:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rwb-ldp-")))
            target, _ = stack.enter_context(index_target(factory.resolved, ds, gt, spec, work))
            conn.send(("ready", None))
            start_ns = conn.recv()
            opt: LoopOptions = args["opt"]
            if role == "open":
                target = _strided(target, args["first"], args["stride"], len(args["offsets"]))
                rec = open_loop_threads(target, args["offsets"], args["clients"], opt, start_ns)
            else:
                rec = closed_loop_threads(target, args["clients"], opt, start_ns)
            conn.send(("done", rec))
    except Exception as exc:  # reported to the parent as one line
        conn.send(("error", f"{type(exc).__name__}: {exc}".splitlines()[0][:500]))
    finally:
        conn.close()


def _strided(t: Target, first: int, stride: int, n: int) -> Target:
    """The child's local request ``i`` is the schedule's request ``first + i * stride``: it asks
    that request's query, so every process mix asks the queries the threaded run asks."""
    nq = t.nq

    def qi(i: int) -> int:
        return (first + i * stride) % nq

    return Target(t.name, max(1, n), lambda i: t.call(qi(i)),
                  lambda i, raw: t.score(qi(i), raw))


def _run(factory: ProcFactory, role: str, shares: list[dict[str, Any]]) -> Recording:
    ctx = mp.get_context("spawn")
    pipes, procs = [], []
    for share in shares:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_child, args=(factory, role, share, child), daemon=True)
        p.start()
        pipes.append(parent)
        procs.append(p)
    try:
        for conn in pipes:
            if not conn.poll(READY_TIMEOUT_S):
                raise BackendError("load: a client process did not get ready in time")
            kind, msg = conn.recv()
            if kind == "error":
                raise BackendError(f"load: a client process failed: {msg}")
        start = clock_ns() + START_LEAD_NS
        for conn in pipes:
            conn.send(start)
        recs = []
        for conn in pipes:
            kind, msg = conn.recv()
            if kind == "error":
                raise BackendError(f"load: a client process failed: {msg}")
            recs.append(msg)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return merge(recs)


def merge(recs: list[Recording]) -> Recording:
    """One recording from the children's (arrays concatenated; L and CPU add up)."""
    cat = {name: np.concatenate([getattr(r, name) for r in recs])
           for name in ("intended", "sent", "done", "status", "waited", "recall")}
    order = np.argsort(cat["intended"], kind="stable")
    means = [float(r.in_system.mean()) for r in recs if r.in_system.size]
    aborted = next((r.aborted for r in recs if r.aborted), None)
    first = next((r.first_error for r in recs if r.first_error), None)
    return Recording(**{k: v[order] for k, v in cat.items()},
                     window_ns=max(r.window_ns for r in recs),
                     in_system=np.asarray([sum(means)]) if means else np.zeros(0),
                     cpu_s=sum(r.cpu_s for r in recs), aborted=aborted, first_error=first,
                     completed_in_window=sum(r.completed_in_window for r in recs))


def open_loop_processes(factory: ProcFactory, offsets_ns: np.ndarray, clients: int,
                        processes: int, opt: LoopOptions) -> Recording:
    p = max(1, min(processes, offsets_ns.shape[0]))
    per = max(1, math.ceil(clients / p))
    return _run(factory, "open", [{"offsets": offsets_ns[i::p], "clients": per, "opt": opt,
                                   "first": i, "stride": p} for i in range(p)])


def closed_loop_processes(factory: ProcFactory, clients: int, processes: int,
                          opt: LoopOptions) -> Recording:
    p = max(1, min(processes, clients))
    split = [clients // p + (1 if i < clients % p else 0) for i in range(p)]
    return _run(factory, "closed", [{"clients": c, "opt": opt} for c in split])


__all__ = ["ProcFactory", "closed_loop_processes", "factory_for", "merge",
           "open_loop_processes"]
