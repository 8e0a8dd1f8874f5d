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
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError
from retrieval.indexes.live import LiveCollection, LiveDescription
from retrieval.live import attach
from retrieval.live.queries import NOT_PRODUCTION, load_queries, resolve
from retrieval.live.spec import LiveSweepSpec, parse_live_spec
from retrieval.live.watch import WatchSection, lab_gap, sampled
from retrieval.live.watch_log import LoggedQuery, follow_jsonl
from retrieval.live.watch_run import Watcher, WatchMetrics
from retrieval.specfile import read_yaml, require_mapping

logger = logging.getLogger(__name__)

PathLike = str | Path


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


def load_watch_spec(spec: PathLike | Mapping[str, Any]
                    ) -> tuple[LiveSweepSpec, WatchSection, str]:
    """A live spec (:mod:`retrieval.live.spec`, validated as ``rwb sweep`` does) and its
    ``watch:`` section (:class:`~retrieval.live.watch.WatchSection`), and the source name."""
    where = str(spec) if isinstance(spec, str | Path) else "<watch mapping>"
    data = require_mapping(read_yaml(spec) if isinstance(spec, str | Path) else spec, where)
    if "live" not in data:
        raise ConfigError(f"{where}: rwb watch needs a 'live:' section (the collection you run: "
                          f"live: {{engine: pgvector, dsn: ..., table: ...}})")
    live = parse_live_spec(data, where)
    section = live.watch or WatchSection()
    return live, section, where


def _mapping(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def read_lab(config: PathLike | None, k: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(search params in rwb's names, lab figures) of an exported config: a live export
    (``kind: live-index-config``: ``search``, ``evidence.recall`` / ``recall_lb`` /
    ``p50_ms`` / ``p95_ms`` / ``p99_ms``) or an index export (``config.search_params``,
    ``evidence.recall`` / ``recall_lower_bound`` / ``latency_ms``). Times in ms. No file:
    ({}, a block saying so)."""
    if config is None:
        return {}, {"config": None, "note": "no --config: the collection's current search "
                                            "params, no lab figures to compare"}
    from retrieval.exporting.files import read_config

    doc = read_config(config)
    ev = _mapping(doc.get("evidence"))
    if doc.get("kind") == "live-index-config":
        params: Any = doc.get("search")
        figures = {"recall": ev.get("recall"), "recall_lower": ev.get("recall_lb"),
                   "p50_ms": ev.get("p50_ms"), "p95_ms": ev.get("p95_ms"),
                   "p99_ms": ev.get("p99_ms"), "k": doc.get("k"),
                   "target_recall": doc.get("target_recall"),
                   "not_production_traffic": ev.get("not_production_traffic")}
        field_name = "search"
    else:
        params = _mapping(doc.get("config")).get("search_params")
        lat = _mapping(ev.get("latency_ms"))
        figures = {"recall": ev.get("recall"), "recall_lower": ev.get("recall_lower_bound"),
                   "p50_ms": lat.get("p50"), "p95_ms": lat.get("p95"),
                   "p99_ms": lat.get("p99"), "k": ev.get("k"),
                   "target_recall": ev.get("target_recall"),
                   "dataset": _mapping(ev.get("dataset")).get("name")}
        field_name = "config.search_params"
    if not isinstance(params, Mapping):
        raise ConfigError(f"{config}: field '{field_name}' is missing; is this a file from rwb "
                          f"export?")
    lab = {"config": str(config), "engine": doc.get("engine"), "kind": doc.get("kind"),
           **figures}
    if k is not None and figures["k"] not in (None, k):
        logger.warning("the export was measured at k=%s, the spec watches k=%s", figures["k"],
                       k)
    return dict(params), lab


def _queries(spec: LiveSweepSpec, section: WatchSection, where: str, live: LiveCollection,
             *, follow: bool, stop: threading.Event) -> tuple[Iterator[LoggedQuery], str]:
    """The logged queries: a ``.jsonl`` log followed as it grows (vectors only), else the
    queries of :func:`retrieval.live.queries.load_queries` (texts embedded, OTLP spans, a
    sample of the collection) in their order."""
    base = Path(where).parent if Path(where).is_file() else None
    q = spec.queries
    if follow and q.log is not None and resolve(q.log, base).suffix.lower() == ".jsonl":
        path = resolve(q.log, base)
        def keep(key: str) -> bool:
            return sampled(key, section.sample, section.seed)

        return (follow_jsonl(path, live.describe().dim, follow=True, poll_s=section.poll_s,
                             stop=stop, keep=keep), f"log {path} (followed)")
    got = load_queries(q, live, base=base, seed=spec.seed)
    ts = got.ts if len(got.ts) == len(got.ids) else [None] * len(got.ids)

    def entries() -> Iterator[LoggedQuery]:
        for i, key in enumerate(got.ids):
            yield LoggedQuery(str(key), got.vectors[i], _seconds(ts[i]))

    return entries(), (NOT_PRODUCTION if got.not_production else f"log {got.source}")


def _seconds(t: Any) -> float | None:
    """A log's timestamp in seconds since the epoch (OTLP nanoseconds converted)."""
    if isinstance(t, bool) or not isinstance(t, int | float | str):
        return None
    try:
        x = float(t)
    except ValueError:
        from retrieval.live.watch_log import parse_ts

        return parse_ts(t, "queries.log")
    return x / 1e9 if x > 1e14 else x


class WatchStop(threading.Event):
    """A ``stop`` for :func:`watch` that says why: :meth:`interrupt` (what ``rwb watch`` calls on
    Ctrl-C) ends the watch at the next logged query with ``stopped: interrupted``; ``set()``
    with ``stopped: stopped``."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = "stopped"

    def interrupt(self) -> None:
        self.reason = "interrupted"
        self.set()


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

    wspec, section, where = load_watch_spec(spec)
    target = section.target_recall or wspec.target_recall
    if max_windows is not None and max_windows < 1:
        raise ConfigError(f"--max-windows must be >= 1; received {max_windows}")
    params, lab = read_lab(config, wspec.k)
    k = wspec.k
    live = attach(wspec.live, where)
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
        watcher = Watcher(live, k=k, section=section, target=target, params=params,
                          labels=(desc.engine, desc.name), jsonl=jsonl, metrics=metrics,
                          on_window=on_window, on_alarm=on_alarm)
        source, label = _queries(wspec, section, where, live, follow=not once, stop=stop)
        if on_ready is not None:
            on_ready({"engine": desc.engine, "collection": desc.name, "queries": label,
                      "metrics_port": metrics.port if metrics else None, "out": str(run.path),
                      "untested": desc.untested})
        stopped = "interrupted"
        try:
            stopped = watcher.run(source, max_windows)
            if stopped == "log-end" and stop.is_set():
                stopped = stop.reason if isinstance(stop, WatchStop) else "stopped"
        finally:
            result = _result(run, desc, watcher, k, target, params, lab, stopped, label,
                             metrics)
            for hook in watcher.state.webhooks:  # sent before exit, each within its timeout
                hook.join(section.webhook_timeout_s)
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


__all__ = ["WatchRun", "WatchStop", "load_watch_spec", "read_lab", "watch"]
