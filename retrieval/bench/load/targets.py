"""The live side before any load: resolve each config (an index entry, or the chosen config of a
sweep run directory), build it through the backend registry (any registered backend; a Milvus
config with ``server: true`` on a Milvus Lite server process by URI), and wrap it as a
:class:`~retrieval.bench.load.drivers.Target`. The semantic cache's target lives in
:mod:`retrieval.cache.loadtarget` (the CLI hands it in: bench and cache are sibling layers).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bench.load.drivers import Target
from retrieval.bench.load.spec import LoadConfig, LoadSpec
from retrieval.data import VectorDataset
from retrieval.errors import ConfigError, DataError
from retrieval.evaluation import per_query_recall
from retrieval.indexes.base import (
    SupportsAsyncSearch,
    SupportsBruteForceCheck,
    SupportsHotSearch,
    SupportsServerAttach,
)
from retrieval.indexes.engine import local_server_of
from retrieval.indexes.entry import apply_search, check_entry, check_search
from retrieval.params import validate_params

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resolved:
    """A config ready to build: ``source_run`` / ``source_label`` when it came from a sweep."""

    label: str
    backend: str
    build: dict[str, Any]
    search: dict[str, Any]
    server: bool
    dataset: Any
    source_run: str | None = None
    source_run_id: str | None = None
    source_label: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _label(c: LoadConfig, i: int) -> str:
    return c.label or f"{c.backend}{'-server' if c.server else ''}#{i}"


def from_sweep(run_dir: str, label: str | None, where: str) -> Resolved:
    """The chosen config of a sweep run (``label``: its index entry; default the chosen one
    with the lowest p95)."""
    from retrieval.runs import RunDir
    from retrieval.specfile import read_yaml

    run = RunDir.open(run_dir)
    summary = run.read_json("summary.json")  # plain JSON: tune is a sibling layer
    if not run.file("spec.yaml").is_file() or summary.get("kind") not in (None, "sweep"):
        raise DataError(f"{where}: run '{run_dir}' is not a sweep run (no spec.yaml, or kind "
                        f"{summary.get('kind')!r})")
    spec = read_yaml(run.file("spec.yaml"))
    spec = spec if isinstance(spec, dict) else {}
    chosen = {k: b for k, b in (summary.get("backends") or {}).items()
              if isinstance(b, dict) and b.get("chosen")}
    if not chosen:
        raise DataError(f"{where}: run '{run_dir}' has no chosen config (rwb sweep with "
                        f"--target-recall chooses one)")
    if label is None:
        label = min(chosen, key=lambda k: chosen[k]["chosen"].get("p95_ms") or 0.0)
    if label not in chosen:
        raise ConfigError(f"{where}: field 'label' must name an entry of run '{run_dir}' with a "
                          f"chosen config ({', '.join(sorted(chosen))}); received {label!r}")
    b = chosen[label]
    c = b["chosen"]
    return Resolved(label=f"{label} (chosen, {run.run_id})", backend=str(b.get("backend")),
                    # the resolved build, unset fields (None: faiss-ivf's pq_m) left out
                    build={k: v for k, v in (c.get("build_params") or c.get("build") or {}
                                             ).items() if v is not None},
                    search=dict(c.get("search") or {}), server=False,
                    dataset=spec.get("dataset"), source_run=str(Path(run_dir).resolve()),
                    source_run_id=summary.get("run_id") or run.run_id, source_label=label)


def _close_quietly(index: Any, label: str) -> None:
    """Close an index whose server may have died mid-run (the run's results come first)."""
    try:
        index.close()
    except Exception as exc:
        log.warning("load: closing config '%s' failed: %s", label, exc)


def _unloaded_recall(index: Any, rows: list[np.ndarray], exact: np.ndarray, k: int,
                     label: str) -> float | None:
    """Mean recall@k of the queries answered with no load (one batch search): the answers
    under load must give the same (None when the server failed it: the load run reports why)."""
    from retrieval.errors import BackendError

    try:
        return float(np.mean(per_query_recall(index.search(np.vstack(rows), k).ids, exact, k)))
    except BackendError as exc:
        log.warning("load: config '%s': the unloaded pass failed: %s", label, exc)
        return None


def resolve_configs(spec: LoadSpec) -> list[Resolved]:
    out = []
    for i, c in enumerate(spec.configs):
        where = f"{spec.source}: configs[{i}]"
        if c.run:
            r = from_sweep(c.run, c.label, where)
            out.append(r if spec.dataset is None else Resolved(**{**r.__dict__,
                                                                  "dataset": spec.dataset}))
            continue
        out.append(Resolved(_label(c, i), c.backend, dict(c.build), dict(c.search), c.server,
                            spec.dataset))
    return out


def query_rows(ds: VectorDataset, n: int | None) -> list[np.ndarray]:
    """The first ``n`` queries as contiguous float32 (1, dim) rows (prepared before timing)."""
    m = ds.n_queries if n is None else min(n, ds.n_queries)
    q = np.ascontiguousarray(ds.queries[:m], dtype=np.float32)
    return [q[i:i + 1] for i in range(m)]


@dataclass(frozen=True)
class Opened:
    """An index of a config, not built yet: its backend class, validated build params and the
    server URI it was given (None: in process or the backend's own default)."""

    index: Any
    cls: Any
    build: Any
    uri: str | None


@contextlib.contextmanager
def opened_index(r: Resolved, ds: VectorDataset, spec: LoadSpec,
                 workdir: Path) -> Iterator[Opened]:
    """The index of ``r`` (a private server started for it when ``server`` is set), unbuilt;
    closed (and the server stopped) after."""
    from retrieval.indexes.registry import get_backend

    cls = get_backend(r.backend, where=f"{spec.source}: config '{r.label}'")
    where = f"{spec.source}: config '{r.label}'"
    entry = validate_params(LoadConfig, {"backend": r.backend, "build": r.build,
                                         "search": r.search}, where=where)
    ce = check_entry(entry, spec.k, where=where, field=r.label)
    (bp,) = ce.builds()
    with contextlib.ExitStack() as stack:
        kwargs: dict[str, Any] = {}
        if r.extra.get("uri"):  # a client process on the parent's server
            kwargs["uri"] = r.extra["uri"]
        elif r.server and (serve := local_server_of(r.backend)) is not None:
            kwargs["uri"] = stack.enter_context(
                serve(workdir / f"server-{abs(hash(r.label))}", threads=spec.threads))
        index: Any = cls(ds.dim, ds.metric, bp, seed=spec.seed, threads=spec.threads,
                         workdir=workdir, **kwargs)
        stack.callback(_close_quietly, index, r.label)
        yield Opened(index, cls, bp, kwargs.get("uri"))


@contextlib.contextmanager
def index_target(r: Resolved, ds: VectorDataset, gt_ids: np.ndarray, spec: LoadSpec,
                 workdir: Path) -> Iterator[tuple[Target, dict[str, Any]]]:
    """Build ``r`` on ``ds`` and yield it as a Target with its build facts; closed after."""
    where = f"{spec.source}: config '{r.label}'"
    k = spec.k
    with opened_index(r, ds, spec, workdir) as opened:
        index, cls, bp = opened.index, opened.cls, opened.build
        kwargs = {"uri": opened.uri} if opened.uri else {}
        handle = r.extra.get("attach")
        if handle is not None and isinstance(index, SupportsServerAttach):
            # a client process: search the index the parent built on the server (no rebuild)
            index.attach(handle)
            build_s, memory = None, None
        else:
            info = index.build(ds.base)
            build_s, memory = info.build_s, info.memory_bytes
            if isinstance(index, SupportsBruteForceCheck) and cls.monotone_knobs_for(bp):
                n = min(ds.n_queries, 100)
                index.verify_not_brute_force(ds.queries[:n], k, gt_ids[:n])
            if isinstance(index, SupportsServerAttach):  # for client processes
                r.extra["attach"] = index.server_handle()
        apply_search(index, check_search(cls, bp, r.search, k, where=where))
        rows = query_rows(ds, spec.queries)
        exact = gt_ids[: len(rows), :k]
        if isinstance(index, SupportsHotSearch):
            hot, finish = index.hot_search(k)

            def call(qi: int) -> Any:
                return hot(rows[qi])

            def score(qi: int, raw: Any) -> float:
                return float(per_query_recall(finish(raw).ids, exact[qi:qi + 1], k)[0])
        else:
            search = index.search

            def call(qi: int) -> Any:
                return search(rows[qi], k)

            def score(qi: int, raw: Any) -> float:
                return float(per_query_recall(raw.ids, exact[qi:qi + 1], k)[0])

        acall = None
        if isinstance(index, SupportsAsyncSearch):
            asearch = index.asearch

            def acall(qi: int) -> Any:
                return asearch(rows[qi], k)

        unloaded = None if handle is not None else _unloaded_recall(index, rows, exact, k,
                                                                    r.label)
        r.extra["served_at"] = kwargs.get("uri")  # for client processes (not reported)
        facts = {"label": r.label, "backend": r.backend, "server": r.server,
                 "build": bp.model_dump(mode="json"), "search": dict(r.search),
                 "build_s": build_s, "memory_bytes": memory,
                 "hot_path": isinstance(index, SupportsHotSearch),
                 "native_async": acall is not None, "n_base": ds.n_base,
                 "queries": len(rows), "recall_unloaded": unloaded,
                 "source_run": r.source_run,
                 "source_run_id": r.source_run_id, "source_label": r.source_label}
        yield Target(r.label, len(rows), call, score, acall), facts


__all__ = ["Opened", "Resolved", "from_sweep", "index_target", "opened_index", "query_rows",
           "resolve_configs"]
