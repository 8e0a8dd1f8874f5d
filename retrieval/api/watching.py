"""``rwb watch SPEC``: watch the recall of a live collection in production (see docs/live.md,
"Watching recall in production").

:func:`watch` reads the spec (its ``live:``, ``queries:``, ``k``, ``target_recall`` and
``watch:`` keys; the sweep's own keys are left to the sweep), attaches READ-ONLY, sets the
exported config's search params (``--config``), samples the query log (followed as it grows, or
one pass with ``once``), and returns a :class:`WatchRun`: per window ``recall``,
``recall_lower``, ``p50_ms`` / ``p95_ms`` / ``p99_ms``, ``checked``, ``alarm``; the ``lab`` block
(the export's recorded figures next to the live ones); the alarms with their advice. Windows are
also written as JSON lines to ``<out>/windows.jsonl`` and the whole result to
``<out>/watch.json``.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import ConfigError
from retrieval.indexes.live import LiveCollection, LiveDescription, SupportsSnapshot
from retrieval.live.watch import WatchSpec, lab_gap
from retrieval.live.watch_log import LoggedQuery, collection_sample, log_queries
from retrieval.live.watch_run import Watcher, WatchMetrics
from retrieval.specfile import read_yaml, require_mapping, validate_model

logger = logging.getLogger(__name__)

PathLike = str | Path
#: the label of queries drawn from the collection itself
NOT_PRODUCTION = "not production traffic (queries sampled from the collection itself)"
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class WatchRun:
    """What a watch saw. ``windows``: one dict per closed window (``recall``,
    ``recall_lower``, ``p50_ms`` / ``p95_ms`` / ``p99_ms`` in ms, ``checked``, ``alarm``, ...);
    ``partial``: the unfinished last window's figures (no alarm judged on it) or None;
    ``alarm``: whether the alarm was raised at any window; ``lab``: the export's recorded
    figures, the live ones over every checked query, and the gap (live minus lab)."""

    out: Path
    engine: str
    collection: str
    k: int
    target_recall: float
    search_params: dict[str, Any]
    windows: list[dict[str, Any]]
    partial: dict[str, Any] | None
    alarms: list[dict[str, Any]]
    lab: dict[str, Any]
    logged: int
    checked: int
    stopped: str
    queries: str
    metrics_port: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def alarm(self) -> bool:
        return bool(self.alarms)

    def to_dict(self) -> dict[str, Any]:
        return {"rwb": "watch", "engine": self.engine, "collection": self.collection,
                "k": self.k, "target_recall": self.target_recall,
                "search_params": self.search_params, "queries": self.queries,
                "logged": self.logged, "checked": self.checked, "stopped": self.stopped,
                "alarm": self.alarm, "alarms": self.alarms, "windows": self.windows,
                "partial": self.partial, "lab": self.lab, "metrics_port": self.metrics_port,
                "out": str(self.out), "notes": self.notes}


def expand_env(value: Any, where: str) -> Any:
    """``${NAME}`` in every string of ``value`` replaced by the environment's value (secrets
    stay out of YAML); an unset name is a ConfigError naming it."""
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in os.environ:
                raise ConfigError(f"{where}: environment variable '{name}' (written ${{{name}}}) "
                                  f"is not set")
            return os.environ[name]
        return _ENV.sub(sub, value)
    if isinstance(value, Mapping):
        return {k: expand_env(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, where) for v in value]
    return value


def load_watch_spec(spec: PathLike | Mapping[str, Any]) -> tuple[WatchSpec, str]:
    """The watch's keys of a live spec, validated (one line per error), and its source name.
    Keys the sweep spec knows (``tune``, ``threads``, ...) are the sweep's and skipped here."""
    from retrieval.tune.spec import SweepSpec

    where = str(spec) if isinstance(spec, str | Path) else "<watch mapping>"
    data = require_mapping(read_yaml(spec) if isinstance(spec, str | Path) else spec, where)
    if "dataset" in data and "live" not in data:
        raise ConfigError(f"{where}: rwb watch needs a 'live:' section (a collection you run); "
                          f"this spec has a 'dataset:' (use rwb sweep / rwb verify for it)")
    mine = set(WatchSpec.model_fields)
    sweep_only = set(SweepSpec.model_fields) - mine
    kept = {k: v for k, v in data.items() if k not in sweep_only}
    return validate_model(WatchSpec, kept, source=where), where


def _attach(section: Mapping[str, Any], where: str) -> LiveCollection:
    """The live collection of ``section`` through ``retrieval.live.attach`` when present, else
    the engine descriptor's ``attach`` hook."""
    import importlib

    attach = getattr(importlib.import_module("retrieval.live"), "attach", None)
    if attach is not None:
        return attach(section, where)
    from retrieval.indexes.engine import all_engines

    name = str(section.get("engine", ""))
    hooks = {n: d.attach for n, d in all_engines().items() if d.attach is not None}
    hook = hooks.get(name)
    if hook is None:
        raise ConfigError(f"{where}: field 'live.engine' must be one of "
                          f"{', '.join(sorted(hooks)) or '(none installed)'}; received {name!r}")
    return hook(section, where)


def _mapping(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def read_lab(config: PathLike | None, k: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(search params, lab figures) of an exported config: ``config.search_params`` and the
    evidence's ``recall``, ``recall_lower_bound``, ``latency_ms`` p50 / p95 / p99 (ms),
    ``target_recall`` and ``k``. No file: ({}, a block saying so)."""
    if config is None:
        return {}, {"config": None, "note": "no --config: the collection's current search "
                                            "params, no lab figures to compare"}
    from retrieval.exporting.files import read_config

    doc = read_config(config)
    cfg = _mapping(doc.get("config"))
    params = cfg.get("search_params")
    if not isinstance(params, Mapping):
        raise ConfigError(f"{config}: field 'config.search_params' is missing; is this a file "
                          f"from rwb export?")
    ev = _mapping(doc.get("evidence"))
    lat = _mapping(ev.get("latency_ms"))
    lab = {"config": str(config), "engine": doc.get("engine"), "k": ev.get("k"),
           "target_recall": ev.get("target_recall"), "recall": ev.get("recall"),
           "recall_lower": ev.get("recall_lower_bound"), "p50_ms": lat.get("p50"),
           "p95_ms": lat.get("p95"), "p99_ms": lat.get("p99"),
           "dataset": _mapping(ev.get("dataset")).get("name")}
    if k is not None and ev.get("k") not in (None, k):
        logger.warning("the export was measured at k=%s, the spec watches k=%s", ev.get("k"), k)
    return dict(params), lab


def _queries(spec: WatchSpec, where: str, live: LiveCollection, dim: int, *, follow: bool,
             stop: threading.Event) -> tuple[Iterator[LoggedQuery], str]:
    q = spec.queries
    if q.log is not None:
        path = Path(q.log)
        if not path.is_absolute() and isinstance(where, str) and Path(where).is_file():
            path = Path(where).parent / path
        return (log_queries(path, dim, follow=follow, poll_s=spec.watch.poll_s, stop=stop),
                f"log {path}{' (followed)' if follow and path.suffix == '.jsonl' else ''}")
    if q.sample is not None:
        if not isinstance(live, SupportsSnapshot):
            raise ConfigError(f"{where}: field 'queries.sample' needs an engine that streams its "
                              f"vectors; give a query log (queries: {{log: FILE}})")
        ids, vecs, got = [], [], 0
        for b_ids, b_vecs in live.iter_vectors(batch=min(10_000, q.sample)):
            ids.append(b_ids)
            vecs.append(b_vecs)
            got += len(b_ids)
            if got >= q.sample:
                break
        all_ids = np.concatenate(ids)[: q.sample] if ids else np.empty(0, np.int64)
        all_vecs = np.concatenate(vecs)[: q.sample] if vecs else np.empty((0, dim), np.float32)
        return collection_sample(all_vecs, all_ids), NOT_PRODUCTION
    raise ConfigError(f"{where}: field 'queries' must be {{log: FILE}} (.jsonl / .npy / "
                      f".parquet) or {{sample: N}} for rwb watch; received "
                      f"{q.model_dump(exclude_none=True)}")


def watch(spec: PathLike | Mapping[str, Any], *, config: PathLike | None = None,
          once: bool = False, metrics_port: int | None = None, metrics_addr: str = "127.0.0.1",
          max_windows: int | None = None, out: PathLike | None = None, force: bool = False,
          on_window: Callable[[dict[str, Any]], None] | None = None,
          on_alarm: Callable[[dict[str, Any]], None] | None = None,
          on_ready: Callable[[dict[str, Any]], None] | None = None,
          stop: threading.Event | None = None) -> WatchRun:
    """Watch a live collection (see the module). ``once``: one pass over the log as it is now;
    else the log is followed until ``max_windows`` windows closed, ``stop`` is set or the
    caller is interrupted (KeyboardInterrupt passes through after ``watch.json`` is written)."""
    from retrieval.runs import RunDir

    wspec, where = load_watch_spec(spec)
    target = wspec.watch.target_recall or wspec.target_recall
    if target is None:
        raise ConfigError(f"{where}: field 'watch.target_recall' (or 'target_recall') is "
                          f"missing; the alarm needs a recall target in (0, 1]")
    if max_windows is not None and max_windows < 1:
        raise ConfigError(f"--max-windows must be >= 1; received {max_windows}")
    params, lab = read_lab(config, wspec.k)
    k = wspec.k or (lab.get("k") if isinstance(lab.get("k"), int) else None) or 10
    live = _attach(expand_env(wspec.live, where), where)
    stop = stop or threading.Event()
    metrics: WatchMetrics | None = None
    try:
        desc = live.describe()
        if desc.untested:
            logger.warning("%s", desc.untested)
        run = RunDir.create(out, wspec.name, force=force)
        if metrics_port is not None:
            metrics = WatchMetrics(metrics_port, metrics_addr, desc.engine, desc.name)
        jsonl = run.file("windows.jsonl")
        jsonl.write_text("", encoding="utf-8")
        watcher = Watcher(live, k=k, section=wspec.watch, target=target, params=params,
                          labels=(desc.engine, desc.name), jsonl=jsonl, metrics=metrics,
                          on_window=on_window, on_alarm=on_alarm)
        source, label = _queries(wspec, where, live, desc.dim, follow=not once, stop=stop)
        if on_ready is not None:
            on_ready({"engine": desc.engine, "collection": desc.name, "queries": label,
                      "metrics_port": metrics.port if metrics else None, "out": str(run.path),
                      "untested": desc.untested})
        stopped = "interrupted"
        try:
            stopped = watcher.run(source, max_windows)
            if stopped == "log-end" and stop.is_set():
                stopped = "stopped"
        finally:
            result = _result(run, desc, watcher, k, target, params, lab, stopped, label,
                             metrics)
    finally:
        stop.set()
        if metrics is not None:
            metrics.close()
        live.close()
    return result


def _result(run: Any, desc: LiveDescription, watcher: Watcher, k: int, target: float,
            params: dict[str, Any], lab: dict[str, Any], stopped: str, label: str,
            metrics: WatchMetrics | None) -> WatchRun:
    """The run's result, written to ``<out>/watch.json``."""
    live_fig = watcher.state.pooled(k, watcher.section.confidence)
    notes = [NOT_PRODUCTION] if label == NOT_PRODUCTION else []
    if desc.untested:
        notes.append(desc.untested)
    res = WatchRun(out=run.path, engine=desc.engine, collection=desc.name, k=k,
                   target_recall=target, search_params=params,
                   windows=watcher.state.windows, partial=watcher.partial(),
                   alarms=watcher.state.alarms,
                   lab={**lab, "live": live_fig, "gap": lab_gap(lab, live_fig)},
                   logged=watcher.state.logged, checked=watcher.state.checked,
                   stopped=stopped, queries=label,
                   metrics_port=metrics.port if metrics else None, notes=notes)
    run.write_json("watch.json", res.to_dict())
    return res


__all__ = ["NOT_PRODUCTION", "WatchRun", "expand_env", "load_watch_spec", "read_lab", "watch"]
