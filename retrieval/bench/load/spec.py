"""The load benchmark spec (YAML, ``extra="forbid"``, read through :mod:`retrieval.specfile`):
:class:`LoadSpec`; see ``sweeps/load-quickstart.yaml``. Times in seconds (``*_s``) or
milliseconds (``*_ms``), rates in queries per second (QPS).

A config is either an index entry (``backend`` + ``build`` + ``search``, validated once by
:func:`retrieval.indexes.entry.check_entry` for the spec's ``k``: any registered backend) or
``run: DIR`` (the chosen config of a sweep run directory, ``label`` picking one of its index
entries). ``server: true`` serves a Milvus config from a Milvus Lite server process by URI.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.engine import check_server_flag
from retrieval.indexes.entry import IndexEntry, check_entry
from retrieval.params import Params, RunName
from retrieval.specfile import load_model

#: backends living outside ``retrieval.indexes`` that a spec may name (imported on demand)
TEST_BACKENDS = {"fault": "retrieval.testing.faulty", "fake": "retrieval.testing.fake"}
MIN_MEASURED_S = 0.2  # the shortest measured window of a point, s
MAX_DURATION_S = 3600.0  # the longest point (warm-up included), s
#: the highest offered rate, QPS: one load generator cannot keep a schedule faster than this
MAX_QPS = 1_000_000.0
#: the most requests one open-loop point schedules (rate x duration): each takes ~40 bytes of
#: bookkeeping before it is sent, so this keeps a point's arrays under ~1 GB
MAX_SCHEDULED = 20_000_000
ClientKind = Literal["threads", "asyncio", "processes"]


class LoadConfig(IndexEntry):
    """One config under load: an index entry, or ``run`` (a sweep run directory's chosen
    config; ``label`` names its index entry, default the cheapest chosen one)."""

    backend: str = ""
    run: str | None = Field(None, description="a sweep run directory: its chosen config")
    label: str | None = Field(None, description="name shown in tables (run: which entry)")
    server: bool = Field(False, description="a private server process of the backend's "
                         "engine, by URI (engines with a local server)")

    @model_validator(mode="after")
    def _one_source(self) -> LoadConfig:
        if bool(self.backend) == bool(self.run):
            raise ValueError("give exactly one of 'backend' (an index entry) or 'run' (a sweep "
                             "run directory)")
        if self.run and (self.build or self.search or self.server):
            raise ValueError("'run' takes the run's chosen build and search; drop 'build', "
                             "'search' and 'server'")
        return self


class ClosedSpec(Params):
    """Closed loop: N clients, each sending its next query when the last returns."""

    clients: list[int] = Field(default_factory=lambda: [1, 2, 4, 8], min_length=1)


class RateSearch(Params):
    """The capacity search over offered rates (QPS): grow from ``start_qps`` by ``growth``
    until a point fails the SLO, then bisect; at most ``steps`` points."""

    start_qps: float = Field(100.0, allow_inf_nan=False, description="> 0, <= MAX_QPS")
    max_qps: float = Field(20_000.0, allow_inf_nan=False,
                           description=">= start_qps, <= MAX_QPS")
    growth: float = Field(2.0, gt=1.0, le=10.0)
    steps: int = Field(8, ge=1, le=50)
    rel_tol: float = Field(0.1, gt=0.0, le=1.0, description="bracket width to stop at")


class OpenSpec(Params):
    """Open loop: queries on a schedule (``fixed`` interval or ``poisson``), at the explicit
    ``rates`` and along the capacity ``search`` (null: no search)."""

    arrival: Literal["fixed", "poisson"] = "poisson"
    clients: int = Field(16, description="concurrent senders (the in-flight limit), >= 1")
    rates: list[float] = Field(default_factory=list, description="QPS, each > 0 and <= MAX_QPS")
    search: RateSearch | None = Field(default_factory=RateSearch)


class SloSpec(Params):
    """The SLO: corrected p99 within ``p99_ms`` (ms), recall@k >= ``target_recall`` (null: not
    checked), failed queries at most ``max_error_rate`` (a fraction)."""

    p99_ms: float = Field(10.0, allow_inf_nan=False, description="ms, > 0")
    target_recall: float | None = Field(None, gt=0.0, le=1.0)
    max_error_rate: float = Field(0.001, ge=0.0, le=1.0)


#: the highest write rate (vectors per second) a writer spec may ask for
MAX_WRITE_RATE = 1_000_000.0


class WritesSpec(Params):
    """Searching while writing (:mod:`retrieval.bench.load.writing`): the index is built on the
    first ``initial_fraction`` of the dataset's base rows, then a writer thread inserts rows
    not yet indexed at ``insert_rate`` and deletes live ones at ``delete_rate`` (vectors per
    second, in batches of ``batch``; ids are ``id_offset`` + a generation number times the base
    size + the row, never row numbers) while the open loop searches at each of ``rates`` (QPS)
    and along the capacity ``search`` (null: no search). Recall@k over the live set is sampled
    every ``recall_every_s`` seconds on ``recall_queries`` queries (exact answers kept
    incrementally)."""

    initial_fraction: float = Field(0.5, gt=0.0, le=1.0, allow_inf_nan=False,
                                    description="of the base rows, built before the writes")
    insert_rate: float = Field(200.0, ge=0.0, le=MAX_WRITE_RATE, allow_inf_nan=False,
                               description="vectors inserted per second")
    delete_rate: float = Field(0.0, ge=0.0, le=MAX_WRITE_RATE, allow_inf_nan=False,
                               description="vectors deleted per second")
    batch: int = Field(50, ge=1, le=100_000, description="vectors per insert / delete call")
    id_offset: int = Field(1 << 32, ge=0, le=1 << 61, description="ids start here")
    recall_every_s: float = Field(0.25, gt=0.0, le=MAX_DURATION_S, allow_inf_nan=False,
                                  description="seconds between recall samples")
    recall_queries: int = Field(100, ge=1, le=10_000, description="queries of a recall sample")
    rates: list[float] = Field(default_factory=list, description="search QPS, each > 0")
    search: RateSearch | None = Field(default_factory=RateSearch)


class LoadSpec(Params):
    """A load benchmark over one or more configs (see the module docstring)."""

    name: RunName = "load"
    dataset: str | dict[str, Any] | None = Field(
        None, description="required unless every config is a sweep run (then its dataset)")
    k: int = Field(10, ge=1, le=1000)
    seed: int = 0
    threads: int = Field(1, ge=1, le=512, description="threads inside each index")
    queries: int | None = Field(None, ge=1, description="distinct queries cycled (None: all)")
    client: ClientKind = "threads"
    processes: int = Field(2, ge=1, le=256, description="client processes (client: processes)")
    warmup_s: float = Field(0.5, ge=0.0, le=MAX_DURATION_S, allow_inf_nan=False)
    duration_s: float = Field(3.0, allow_inf_nan=False,
                              description="seconds per point, warm-up included; "
                              ">= warmup_s + MIN_MEASURED_S, <= MAX_DURATION_S")
    timeout_ms: float = Field(1000.0, gt=0.0, le=MAX_DURATION_S * 1000.0, allow_inf_nan=False,
                              description="a later answer is a timeout")
    max_lag_us: float | None = Field(
        None, gt=0.0, allow_inf_nan=False,
        description="generator lag p99 allowed, us (None: a tenth of the SLO's "
        "p99: the generator's own lateness may use at most 10% of the latency budget)")
    abort_errors: int = Field(50, ge=1, description="consecutive errors that end a point")
    closed: ClosedSpec | None = Field(default_factory=ClosedSpec)
    open: OpenSpec | None = Field(default_factory=OpenSpec)
    slo: SloSpec = Field(default_factory=SloSpec)
    writes: WritesSpec | None = Field(None, description="searching while writing (null: none)")
    configs: list[LoadConfig] = Field(default_factory=list)
    cache: dict[str, Any] | None = Field(
        None, description="semantic-cache lookups under load (retrieval.cache.loadtarget."
        "CacheLoad, validated by the command that runs it)")
    source: str = Field("<memory>", exclude=True)


def max_lag_us(spec: LoadSpec) -> float:
    """The generator lag (p99, us) above which a point measures the client, not the server."""
    return spec.max_lag_us if spec.max_lag_us is not None else spec.slo.p99_ms * 100.0


def os_client_limit() -> int:
    """The most client threads this process may start now: RLIMIT_NPROC (soft, when finite)
    and the kernel's threads-max, less the threads already running."""
    limits = []
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and os.geteuid() != 0:
        limits.append(int(soft))
    with contextlib.suppress(OSError, ValueError):
        limits.append(int(Path("/proc/sys/kernel/threads-max").read_text().strip()))
    return max(1, min(limits or [1 << 20]) - threading.active_count())


def _check_rates(spec: LoadSpec) -> None:
    where = spec.source
    if not 0 < spec.duration_s <= MAX_DURATION_S:
        raise param_error("duration_s", f"a number of seconds > 0 and <= {MAX_DURATION_S:g} (an "
                          f"hour per point)", spec.duration_s, where=where)
    least = spec.warmup_s + MIN_MEASURED_S
    if spec.duration_s < least:
        raise param_error("duration_s", f">= warmup_s + {MIN_MEASURED_S:g} = {least:g} s (the "
                          f"warm-up of {spec.warmup_s:g} s leaves no measured window)",
                          spec.duration_s, where=where)
    if spec.slo.p99_ms <= 0:
        raise param_error("slo.p99_ms", "a number of ms > 0", spec.slo.p99_ms, where=where)
    o = spec.open
    if o is not None:
        rates = [(f"open.rates[{i}]", r) for i, r in enumerate(o.rates)]
        s = o.search
        if s is not None:
            rates += [("open.search.start_qps", s.start_qps), ("open.search.max_qps", s.max_qps)]
        most = min(MAX_QPS, MAX_SCHEDULED / spec.duration_s)
        for field, r in rates:
            if not 0 < r <= most:  # nan and inf fail too
                why = ("the most one load generator keeps to" if most == MAX_QPS else
                       f"{MAX_SCHEDULED:,} requests per point of duration_s "
                       f"{spec.duration_s:g} s")
                raise param_error(field, f"a rate in QPS > 0 and <= {most:,.0f} ({why})", r,
                                  where=where)
        if s is not None and s.max_qps < s.start_qps:
            raise param_error("open.search.max_qps", f">= start_qps ({s.start_qps:g})",
                              s.max_qps, where=where)
        if o.clients < 1:
            raise param_error("open.clients", "an integer >= 1", o.clients, where=where)
    _check_writes(spec)


def _check_writes(spec: LoadSpec) -> None:
    w, where = spec.writes, spec.source
    if w is None:
        return
    if w.insert_rate <= 0 and w.delete_rate <= 0:
        raise param_error("writes.insert_rate", "> 0 (or writes.delete_rate > 0: a writer that "
                          "writes)", w.insert_rate, where=where)
    if not w.rates and w.search is None:
        raise param_error("writes.rates", "a non-empty list of QPS (or a writes.search)", [],
                          where=where)
    most = min(MAX_QPS, MAX_SCHEDULED / spec.duration_s)
    rates = [(f"writes.rates[{i}]", r) for i, r in enumerate(w.rates)]
    if w.search is not None:
        rates += [("writes.search.start_qps", w.search.start_qps),
                  ("writes.search.max_qps", w.search.max_qps)]
        if w.search.max_qps < w.search.start_qps:
            raise param_error("writes.search.max_qps", f">= start_qps ({w.search.start_qps:g})",
                              w.search.max_qps, where=where)
    for field, r in rates:
        if not 0 < r <= most:
            raise param_error(field, f"a rate in QPS > 0 and <= {most:,.0f}", r, where=where)
    if w.recall_every_s > spec.duration_s - spec.warmup_s:
        raise param_error("writes.recall_every_s", f"<= duration_s - warmup_s "
                          f"({spec.duration_s - spec.warmup_s:g} s: at least one recall sample "
                          f"in the measured window)", w.recall_every_s, where=where)
    if spec.client != "threads":
        raise param_error("client", "threads when 'writes' is given (the writer and the "
                          "searches share one index in this process)", spec.client, where=where)


def _check_clients(spec: LoadSpec) -> None:
    limit = os_client_limit()
    asked = [("open.clients", spec.open.clients)] if spec.open else []
    asked += [(f"closed.clients[{i}]", c) for i, c in enumerate(spec.closed.clients)] \
        if spec.closed else []
    for field, c in asked:
        if c < 1:
            raise param_error(field, "an integer >= 1", c, where=spec.source)
        if c > limit:
            raise param_error(field, f"<= {limit} (the threads this OS lets this process "
                              f"start: RLIMIT_NPROC / kernel threads-max)", c, where=spec.source)


def validate_load_spec(spec: LoadSpec) -> LoadSpec:
    """Cross-field checks (rates, durations, clients vs the OS) and every index entry against
    its backend's own models."""
    _check_rates(spec)
    _check_clients(spec)
    if spec.closed is None and spec.open is None and spec.writes is None:
        raise ConfigError(f"{spec.source}: give 'closed', 'open', 'writes' or several; "
                          f"received none")
    if not spec.configs and spec.cache is None:
        raise param_error("configs", "a non-empty list (or a 'cache' section)", [],
                          where=spec.source)
    for i, c in enumerate(spec.configs):
        field = f"configs[{i}]"
        if c.run:
            if not Path(c.run).is_dir():
                raise param_error(f"{field}.run", "a sweep run directory", c.run,
                                  where=spec.source)
            continue
        if c.backend in TEST_BACKENDS:
            import importlib

            importlib.import_module(TEST_BACKENDS[c.backend])
        check_entry(c, spec.k, where=spec.source, field=field)
        check_server_flag(c.server, c.backend, f"{field}.server", spec.source)
    if spec.dataset is None and (spec.cache is not None or any(c.backend for c in spec.configs)):
        raise param_error("dataset", "a dataset name, path or mapping (index entries and the "
                          "cache need one)", None, where=spec.source)
    return spec


def parse_load_spec(data: Any, source: str = "<memory>") -> LoadSpec:
    return load_model(data, LoadSpec, source=source, what="a load spec",
                      extra={"source": source}, check=validate_load_spec)


def load_load_spec(path: str | Path) -> LoadSpec:
    """Read and validate a load spec file; errors name the file and the field."""
    p = Path(path)
    return load_model(p, LoadSpec, what="a load spec", extra={"source": str(p)},
                      check=validate_load_spec)


__all__ = [
    "ClientKind",
    "ClosedSpec",
    "LoadConfig",
    "LoadSpec",
    "OpenSpec",
    "RateSearch",
    "SloSpec",
    "WritesSpec",
    "load_load_spec",
    "max_lag_us",
    "os_client_limit",
    "parse_load_spec",
    "validate_load_spec",
]
