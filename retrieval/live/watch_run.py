"""`rwb watch`, the loop: sampled production queries run on the live collection at the exported
search params (timed, single query) and exactly (the engine's exact path); per window of checked
queries the figures of :mod:`retrieval.live.watch`, a JSONL line, Prometheus gauges and the alarm
(a callback line, an optional webhook POST in a thread).

Nothing here writes to the collection: only ``set_search_params`` (a session / request
setting), ``search`` and ``search_exact`` are called on it.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import ConfigError
from retrieval.indexes.live import LiveCollection, LiveKnob, SupportsExactSearch
from retrieval.live.watch import (
    AlarmRule,
    WatchSection,
    advice,
    knob_values,
    percentiles_ms,
    query_recall,
    recall_lower,
    sampled,
    window_figures,
)
from retrieval.live.watch_log import LoggedQuery
from retrieval.redact import mask, redact_uri
from retrieval.stats.binomial import wilson_upper
from retrieval.timing import timed

logger = logging.getLogger(__name__)

#: Prometheus metric names (labels ``engine``, ``collection``)
METRICS = {
    "recall_lower": "rwb_watch_recall_lower_bound",
    "recall": "rwb_watch_recall",
    "p99_ms": "rwb_watch_latency_p99_ms",
    "p95_ms": "rwb_watch_latency_p95_ms",
    "p50_ms": "rwb_watch_latency_p50_ms",
    "checked": "rwb_watch_checked_queries",
    "alarm": "rwb_watch_alarm",
}


class WatchMetrics:
    """The watch's gauges and counter in a registry of their own, served over HTTP on ``port``
    (``addr``) by prometheus-client; :meth:`close` stops the server."""

    def __init__(self, port: int, addr: str, engine: str, collection: str) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

        self.registry = CollectorRegistry()
        labels = ("engine", "collection")
        helps = {
            "recall_lower": "one-sided lower confidence bound on recall@k of the last window",
            "recall": "mean recall@k of the last window (ANN vs the engine's exact search)",
            "p99_ms": "p99 single-query ANN time of the last window, milliseconds",
            "p95_ms": "p95 single-query ANN time of the last window, milliseconds",
            "p50_ms": "p50 single-query ANN time of the last window, milliseconds",
            "alarm": "1 while the lower bound has stayed under the target for windows_to_alarm "
                     "windows, else 0",
        }
        self.gauges = {key: Gauge(METRICS[key], text, labels, registry=self.registry)
                       .labels(engine, collection) for key, text in helps.items()}
        self.checked = Counter(METRICS["checked"], "queries checked against exact search",
                               labels, registry=self.registry).labels(engine, collection)
        self.gauges["alarm"].set(0)
        try:
            self.server, self.thread = start_http_server(port, addr=addr,
                                                         registry=self.registry)
        except OSError as exc:
            raise ConfigError(f"--metrics-port {port}: cannot listen on {addr}:{port} "
                              f"({exc.strerror or exc}); choose a free port") from None
        self.port = int(self.server.server_port)

    def window(self, fig: Mapping[str, Any]) -> None:
        for key, gauge in self.gauges.items():
            value = fig.get(key)
            if value is not None:
                gauge.set(float(value))
        self.checked.inc(int(fig.get("checked") or 0))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def post_webhook(url: str, body: Mapping[str, Any], timeout_s: float) -> threading.Thread:
    """POST ``body`` as JSON to ``url`` in a daemon thread (``timeout_s`` seconds at most; a
    failure is logged, never raised): the watch never waits for it."""
    data = json.dumps(mask(dict(body)), default=str).encode()

    def send() -> None:
        req = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                resp.read(1024)
        except Exception as exc:  # a webhook never stops the watch
            logger.warning("webhook %s failed: %s", redact_uri(url), type(exc).__name__)

    t = threading.Thread(target=send, name="rwb-watch-webhook", daemon=True)
    t.start()
    return t


@dataclass
class WatchState:
    """What a watch has seen so far (``windows``: one dict per closed window)."""

    windows: list[dict[str, Any]] = field(default_factory=list)
    alarms: list[dict[str, Any]] = field(default_factory=list)
    logged: int = 0
    checked: int = 0
    webhooks: list[threading.Thread] = field(default_factory=list)
    #: over every checked query: summed recall@k, and the last ANN times (ms, bounded)
    recall_sum: float = 0.0
    hits: int = 0
    ms: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))

    def pooled(self, k: int, level: float) -> dict[str, Any]:
        """recall, its lower bound (slots of every checked query) and p50 / p95 / p99 ms (the
        last 100,000 checked queries) over the whole watch."""
        n = self.checked
        lower = (max(0.0, 1.0 - float(wilson_upper(n * k - self.hits, n * k, level)))
                 if n else None)
        return {"recall": self.recall_sum / n if n else None, "recall_lower": lower,
                **percentiles_ms(list(self.ms)), "checked": n, "windows": len(self.windows)}


def monotone_knob(knobs: Iterable[LiveKnob], params: Mapping[str, Any]) -> LiveKnob | None:
    """The knob the advice turns: the first one the search params set, else the first knob."""
    ks = list(knobs)
    return next((kn for kn in ks if kn.name in params), ks[0] if ks else None)


class Watcher:
    """One watch over ``live``: :meth:`feed` the logged queries, it closes a window every
    ``section.window`` checked ones. ``on_window(fig)`` / ``on_alarm(alarm)`` are the caller's
    (the CLI prints them); ``jsonl`` gets a line per window."""

    def __init__(self, live: LiveCollection, *, k: int, section: WatchSection, target: float,
                 params: Mapping[str, Any], labels: tuple[str, str],
                 jsonl: Path | None = None, metrics: WatchMetrics | None = None,
                 on_window: Callable[[dict[str, Any]], None] | None = None,
                 on_alarm: Callable[[dict[str, Any]], None] | None = None) -> None:
        if not isinstance(live, SupportsExactSearch):
            raise ConfigError(f"engine '{labels[0]}': the attached collection has no exact "
                              f"search path; rwb watch compares each query with exact search")
        self.live, self.exact = live, live
        self.k, self.section, self.target = k, section, target
        self.params = dict(params)
        self.labels, self.jsonl, self.metrics = labels, jsonl, metrics
        self.on_window, self.on_alarm = on_window, on_alarm
        self.rule = AlarmRule(target, section.windows_to_alarm)
        self.state = WatchState()
        self.knob = monotone_knob(live.knobs(), self.params)
        self._queries: list[np.ndarray] = []
        self._exact: list[np.ndarray] = []
        self._recalls: list[float] = []
        self._ms: list[float] = []
        self._ts: list[float] = []
        if self.params:
            live.set_search_params(**self.params)

    def feed(self, q: LoggedQuery) -> dict[str, Any] | None:
        """Check ``q`` if it is sampled; the closed window's figures when this closed one."""
        self.state.logged += 1
        if not sampled(q.key, self.section.sample, self.section.seed):
            return None
        vec = q.vector.reshape(1, -1)
        with timed() as sw:
            ann = self.live.search(vec, self.k)
        exact = self.exact.search_exact(vec, self.k)
        r = query_recall(ann.ids[0], exact.ids[0], self.k)
        self._recalls.append(r)
        self._ms.append(sw.ms)
        self.state.recall_sum += r
        self.state.hits += round(r * self.k)
        self.state.ms.append(sw.ms)
        self._queries.append(q.vector)
        self._exact.append(exact.ids[0])
        if q.ts is not None:
            self._ts.append(q.ts)
        self.state.checked += 1
        if len(self._recalls) >= self.section.window:
            return self.close_window()
        return None

    def close_window(self) -> dict[str, Any]:
        """Close the current window: figures, alarm rule, JSONL line, metrics, callbacks."""
        fig = window_figures(len(self.state.windows), self._recalls, self._ms, self.k,
                             self.section.confidence)
        if self._ts:
            fig["ts_first"], fig["ts_last"] = min(self._ts), max(self._ts)
        fig["logged"] = self.state.logged
        up, raised = self.rule.update(fig["recall_lower"])
        fig["alarm"] = up
        if raised:
            fig["advice"] = self._alarm(fig)
        self.state.windows.append(fig)
        if self.jsonl is not None:
            with open(self.jsonl, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(mask(fig)) + "\n")
        if self.metrics is not None:
            self.metrics.window(fig)
        if self.on_window is not None:
            self.on_window(fig)
        self._queries, self._exact, self._recalls, self._ms, self._ts = [], [], [], [], []
        return fig

    def _retune(self) -> tuple[int | None, list[int]]:
        """The smallest higher knob value whose lower bound on this window's queries meets the
        target (batch searches, untimed), and the values tried; the params are restored."""
        kn = self.knob
        if kn is None or not self.section.retune or not self._queries:
            return None, []
        value = int(self.params.get(kn.name, kn.default or kn.low))
        tried: list[int] = []
        queries = np.stack(self._queries).astype(np.float32)
        try:
            for v in knob_values(value, kn.high, self.section.retune_factors):
                tried.append(v)
                self.live.set_search_params(**{**self.params, kn.name: v})
                res = self.live.search(queries, self.k)
                per = [query_recall(res.ids[i], self._exact[i], self.k)
                       for i in range(len(self._exact))]
                if recall_lower(per, self.k, self.section.confidence) >= self.target:
                    return v, tried
        finally:
            self.live.set_search_params(**self.params)
        return None, tried

    def _alarm(self, fig: dict[str, Any]) -> dict[str, Any]:
        kn = self.knob
        tuned, tried = self._retune()
        value = int(self.params.get(kn.name, kn.default or kn.low)) if kn else None
        action, line = advice(target=self.target, lower=fig["recall_lower"],
                              windows=self.rule.streak, knob=kn.name if kn else None,
                              value=value, tuned=tuned, tried=tried)
        alarm = {"window": fig["window"], "engine": self.labels[0],
                 "collection": self.labels[1], "recall": fig["recall"],
                 "recall_lower": fig["recall_lower"], "target_recall": self.target,
                 "windows_under_target": self.rule.streak, "action": action, "line": line,
                 "knob": kn.name if kn else None, "value": value, "tuned": tuned,
                 "tried": tried}
        self.state.alarms.append(alarm)
        logger.warning("alarm: %s %s: %s", self.labels[0], self.labels[1], line)
        if self.section.webhook:
            self.state.webhooks.append(post_webhook(
                self.section.webhook, {"rwb": "watch", "alarm": alarm, "window": fig},
                self.section.webhook_timeout_s))
        if self.on_alarm is not None:
            self.on_alarm(alarm)
        return {"action": action, "line": line}

    def run(self, queries: Iterable[LoggedQuery], max_windows: int | None = None) -> str:
        """Feed ``queries`` until they end or ``max_windows`` windows closed: the stop reason
        (``log-end`` / ``max-windows``)."""
        for q in queries:
            fig = self.feed(q)
            if fig is not None and max_windows is not None and \
                    len(self.state.windows) >= max_windows:
                return "max-windows"
        return "log-end"

    def partial(self) -> dict[str, Any] | None:
        """The unfinished window's figures (``alarm`` None: not judged), or None."""
        if not self._recalls:
            return None
        fig = window_figures(len(self.state.windows), self._recalls, self._ms, self.k,
                             self.section.confidence)
        fig["alarm"] = None
        return fig


__all__ = ["METRICS", "WatchMetrics", "WatchState", "Watcher", "monotone_knob", "post_webhook"]
