"""The administrative functions of the public API: what ``rwb backends``, ``rwb datasets``,
``rwb pareto`` and ``rwb services cleanup|start|stop|status`` do, callable from Python (nothing
is printed; errors raise :class:`retrieval.errors.RwbError` subclasses with the CLI's one-line
messages). Engines are read from their descriptors (:mod:`retrieval.indexes.engine`), never
named here: an engine with a local server (its ``service``) can be started, one that lists
what killed runs left on its server (its ``leftovers``) is cleaned up.

Example::

    from retrieval.api import service_start, service_stop, services_cleanup
    srv = service_start("redis", ".services/redis")   # srv.env == "REDIS_URL", srv.url
    report = services_cleanup(urls={srv.env: srv.url})  # lists; remove=True drops leftovers
    service_stop("redis", ".services/redis")
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.errors import ConfigError, unknown_name_error

if TYPE_CHECKING:
    from retrieval.indexes.registry import BackendStatus
    from retrieval.loaders.catalog import DatasetEntry

PathLike = str | Path


def list_backends() -> list[BackendStatus]:
    """Every registered index backend: family, whether importable here, library version and,
    when not, why (``rwb backends``)."""
    from retrieval.indexes import backend_status

    return backend_status()


def list_datasets() -> list[DatasetEntry]:
    """Every dataset manifest with its kind, files (present or missing) and size on disk
    (``rwb datasets``); an invalid manifest is listed with ``error`` set."""
    from retrieval.loaders.catalog import list_datasets as catalogue

    return catalogue()


def load_dataset_info(name: str) -> dict[str, Any]:
    """Load (and cache) the dataset ``name`` and describe it (``rwb datasets --load NAME``):
    shape, metric, fingerprint, the time to load and to fingerprint it (s), sizes (bytes),
    whether it is read memory-mapped (``out_of_core``) and the resident peak (bytes)."""
    from retrieval import phases
    from retrieval.data import footprint
    from retrieval.loaders.catalog import resolve_dataset

    t0 = time.perf_counter()
    ds = resolve_dataset(name, where="--load")
    load_s = time.perf_counter() - t0
    fingerprint = ds.fingerprint
    sizes = footprint(ds)
    return {
        "name": ds.name,
        "n_base": ds.n_base,
        "n_queries": ds.n_queries,
        "dim": ds.dim,
        "metric": ds.metric,
        "ground_truth_in_files": ds.gt_ids is not None,
        "fingerprint": fingerprint,
        "load_s": round(load_s, 3),
        "fingerprint_s": round(time.perf_counter() - t0 - load_s, 3),
        "out_of_core": sizes["out_of_core"],
        "base_bytes": sizes["base_bytes"],
        "on_disk_bytes": sizes["on_disk_bytes"],
        "resident_peak_bytes": phases.resident_peak_bytes(),
        "source": ds.source,
        "info": ds.info,
    }


@dataclass(frozen=True)
class ParetoFront:
    """The recall vs single-query p95 latency (ms) and recall vs batch QPS fronts of a run:
    ``points`` (dicts with ``fronts``, ``backend``, ``build``, ``search``, ``recall``,
    ``recall_lb``, ``p95_ms``, ``qps``), the run's id, ``k`` and target recall."""

    run: str
    run_id: str
    k: int | None
    target_recall: float | None
    points: tuple[dict[str, Any], ...]


def pareto_front(run: PathLike) -> ParetoFront:
    """The stored front of a sweep, or one computed from the rows of an eval run (``rwb
    pareto RUN``). A filtered-search run is refused (one trade-off per selectivity bucket), so
    is a tenants study (layouts judged per tenant)."""
    from retrieval.runs import WORKLOAD_FILTERED, WORKLOAD_TENANTS, RunDir, workload_kind
    from retrieval.tune.pareto import pareto

    summary = RunDir.open(str(run)).read_json("summary.json")
    why_not = {  # the workload shapes that have no single recall front, and where to look
        WORKLOAD_FILTERED: "a filtered-search run has one trade-off per selectivity bucket; "
                           "see its rows, operating_points",
        WORKLOAD_TENANTS: "a tenants study judges each layout per tenant (no single recall "
                          "front); see its layouts and answer",
    }.get(workload_kind(summary))
    if why_not is not None:
        raise ConfigError(f"{run}: {why_not}, or rwb report {run}")
    points = (list(summary["pareto"]) if "pareto" in summary
              else pareto(summary.get("rows") or []))
    return ParetoFront(str(run), str(summary.get("run_id", run)), summary.get("k"),
                       summary.get("target_recall"), tuple(points))


@dataclass(frozen=True)
class CleanupReport:
    """What ``rwb services cleanup`` found: the servers looked at (URLs without credentials)
    and every rwb-marked object there (``server``, ``kind``, ``name``, ``alive``, ``removed``,
    and the engine's own fields: bytes or keys, host, pid, created)."""

    servers: tuple[str, ...]
    objects: tuple[dict[str, Any], ...]

    @property
    def removed(self) -> int:
        return sum(bool(o["removed"]) for o in self.objects)

    def to_dict(self) -> dict[str, Any]:
        return {"servers": list(self.servers), "removed": self.removed,
                "objects": list(self.objects)}


def cleanup_options() -> dict[str, str]:
    """The command-line option that overrides each cleanup server's variable (``--pg-url`` ->
    ``RWB_PG_URL``), from the engines' leftover hooks."""
    from retrieval.indexes.engine import leftover_hooks

    return {h.option: h.env for h in leftover_hooks().values()}


def services_cleanup(*, remove: bool = False,
                     urls: Mapping[str, str | None] | None = None) -> CleanupReport:
    """List (and with ``remove`` drop) what killed rwb runs left on the servers rwb runs
    against: for each engine with a leftover hook, the server at its variable (``RWB_PG_URL``,
    ``REDIS_URL``), or at ``urls[variable]`` when given. Only rwb-marked objects whose run is
    gone are removed; nothing without rwb's marker is listed or touched. ConfigError (one line)
    when no server is set."""
    from retrieval.indexes.engine import leftover_hooks
    from retrieval.redact import redact_uri

    hooks = leftover_hooks()
    given = dict(urls or {})
    unknown = sorted(set(given) - {h.env for h in hooks.values()})
    if unknown:
        raise unknown_name_error("server variable", unknown[0], [h.env for h in hooks.values()])
    targets = [(h, given.get(h.env) or os.environ.get(h.env) or "") for h in hooks.values()]
    targets = [(h, url) for h, url in targets if url]
    if not targets:
        envs = " and/or ".join(h.env for h in hooks.values())
        options = " / ".join(h.option for h in hooks.values())
        raise ConfigError(f"services cleanup: no server to look at: set {envs} (or pass "
                          f"{options})")
    servers: list[str] = []
    objects: list[dict[str, Any]] = []
    for hook, url in targets:
        servers.append(f"{hook.label} {redact_uri(url)}")
        objects += [{"server": servers[-1], **row} for row in hook.collect(url, remove)]
    return CleanupReport(tuple(servers), tuple(objects))


@dataclass(frozen=True)
class ServiceInfo:
    """A local server rwb started (or found running) in ``dir``: the engine's ``name``, the
    variable its URL goes to (``env``) and the ``url`` (loopback, no credentials)."""

    name: str
    env: str
    url: str
    dir: str

    @property
    def line(self) -> str:
        """``ENV=URL``, what the module entry points print."""
        return f"{self.env}={self.url}"


def service_names() -> tuple[str, ...]:
    """The engines whose local server ``rwb services start`` can run."""
    from retrieval.indexes.engine import services

    return tuple(services())


def _service(name: str) -> Any:
    from retrieval.indexes.engine import services

    known = services()
    if name not in known:
        raise unknown_name_error("service", name, known, where="rwb services")
    return known[name]


def service_start(name: str, dir: PathLike, *, port: int | None = None,
                  timeout_s: float | None = None) -> ServiceInfo:
    """Start engine ``name``'s local server with its files in ``dir`` (or reuse the live one
    recorded there); ``port`` None picks a free one; ``timeout_s`` (s) defaults to the
    engine's. The same server ``python -m retrieval.services.<x>_server start`` starts."""
    svc = _service(name)
    srv = svc.start(str(dir), port, timeout_s=svc.timeout_s if timeout_s is None else timeout_s)
    return ServiceInfo(name, svc.env, srv.url, str(dir))


def service_stop(name: str, dir: PathLike) -> bool:
    """Stop engine ``name``'s local server recorded in ``dir``; False when none was running."""
    return bool(_service(name).stop(str(dir)))


def service_status(name: str, dir: PathLike) -> ServiceInfo | None:
    """Engine ``name``'s local server recorded in ``dir`` when it runs and answers, else
    None."""
    svc = _service(name)
    srv = svc.running(str(dir))
    return None if srv is None else ServiceInfo(name, svc.env, srv.url, str(dir))


__all__ = ["CleanupReport", "ParetoFront", "ServiceInfo", "cleanup_options", "list_backends",
           "list_datasets", "load_dataset_info", "pareto_front", "service_names", "service_start",
           "service_status", "service_stop", "services_cleanup"]
