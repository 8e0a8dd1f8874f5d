"""Pure logic of the load harness (numpy + hdrhistogram, no I/O): arrival schedules, HDR
percentiles with and without coordinated-omission correction, Little's law, generator health.

Times are integers in **nanoseconds** on the ``time.perf_counter_ns`` clock (one clock for every
process on Linux: CLOCK_MONOTONIC) until they are reported, in **milliseconds** (latency) or
**microseconds** (schedule lag). Latencies are recorded into HDR histograms in microseconds
(3 significant figures, 1 us .. 1 h).

Two latencies per query of an open loop:

- **corrected**: ``done - intended`` (from the time the schedule meant to send it: a query that
  waited for a free client or for a stalled server is charged that wait);
- **uncorrected**: ``done - sent`` (what a naive closed-loop benchmark reports).

A closed loop has no schedule; its corrected histogram uses HdrHistogram's
``record_corrected_value(value, expected_interval)`` with the median latency of the run as the
expected interval (each client would have sent again after that long), the classic correction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Arrival = Literal["fixed", "poisson"]
HDR_LOWEST_US = 1
HDR_HIGHEST_US = 3_600_000_000  # 1 h
HDR_DIGITS = 3
PERCENTILES = (50.0, 95.0, 99.0, 99.9)
#: status codes of one recorded query
OK, ERROR, TIMEOUT, NOT_SENT = 0, 1, 2, 3


def schedule_offsets_ns(rate_qps: float, duration_s: float, arrival: Arrival,
                        seed: int = 0) -> np.ndarray:
    """Intended send times (ns after the start, int64, ascending) of an open loop at
    ``rate_qps`` for ``duration_s``: every ``1/rate`` s (``fixed``) or exponential gaps of mean
    ``1/rate`` (``poisson``, seeded)."""
    if not rate_qps > 0 or not math.isfinite(rate_qps):
        raise ValueError(f"rate_qps must be a finite number > 0; received {rate_qps!r}")
    if not duration_s > 0:
        raise ValueError(f"duration_s must be > 0; received {duration_s!r}")
    n = max(1, math.floor(rate_qps * duration_s))
    if arrival == "fixed":
        t = np.arange(n, dtype=np.float64) / rate_qps
    elif arrival == "poisson":
        size = n + int(10 * math.sqrt(n)) + 10
        gaps = np.random.default_rng(seed).exponential(1.0 / rate_qps, size=size)
        t = np.concatenate([[0.0], np.cumsum(gaps)[:-1]])
        t = t[t < duration_s]
    else:
        raise ValueError(f"arrival must be 'fixed' or 'poisson'; received {arrival!r}")
    return np.round(t * 1e9).astype(np.int64)


def histogram(latency_us: np.ndarray, expected_interval_us: int = 0) -> Any:
    """An HdrHistogram of ``latency_us`` (values clipped to [1 us, 1 h]); with
    ``expected_interval_us > 0`` each value is recorded with ``record_corrected_value``."""
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram(HDR_LOWEST_US, HDR_HIGHEST_US, HDR_DIGITS)
    vals = np.clip(np.asarray(latency_us, dtype=np.int64), HDR_LOWEST_US, HDR_HIGHEST_US)
    if expected_interval_us > 0:
        for v in vals.tolist():
            h.record_corrected_value(v, expected_interval_us)
    else:
        uniq, counts = np.unique(vals, return_counts=True)
        for v, c in zip(uniq.tolist(), counts.tolist()):
            h.record_value(v, c)
    return h


def percentiles_ms(h: Any, prefix: str = "", suffix: str = "") -> dict[str, float | None]:
    """p50/p95/p99/p99.9/max (ms) of an HDR histogram (None when it is empty)."""
    keys = {50.0: "p50", 95.0: "p95", 99.0: "p99", 99.9: "p999"}
    empty = h.get_total_count() == 0
    out: dict[str, float | None] = {}
    for p in PERCENTILES:
        out[f"{prefix}{keys[p]}_ms{suffix}"] = (
            None if empty else h.get_value_at_percentile(p) / 1000.0)
    out[f"{prefix}max_ms{suffix}"] = None if empty else h.get_max_value() / 1000.0
    return out


def hand_corrected_p(intended_ns: np.ndarray, done_ns: np.ndarray, q: float) -> float:
    """The ``q``-th percentile (ms) of ``done - intended`` computed by hand (numpy's
    'inverted_cdf', i.e. the smallest value with at least q% of the values at or below it):
    the reference that the HDR-based figure is checked against (within HDR's precision)."""
    lat_ms = (np.asarray(done_ns, np.int64) - np.asarray(intended_ns, np.int64)) / 1e6
    return float(np.percentile(lat_ms, q, method="inverted_cdf"))


@dataclass(frozen=True)
class Recording:
    """What one load point recorded, one entry per query in the measurement window (ns).

    ``intended``: scheduled send time (closed loop: the actual send); ``sent``/``done``: clock
    reads around the call; ``status``: OK / ERROR / TIMEOUT / NOT_SENT; ``waited``: the client
    was idle and waited for the intended time (so ``sent - intended`` is the generator's own
    lag, not queueing); ``recall``: the answer's recall@k (NaN where none). ``window_ns``: the
    measurement window's length; ``completed_in_window``: OK answers of any request that
    arrived inside the window (achieved QPS = that / window); ``in_system``: samples of the
    number of queries in the system (scheduled and not done) taken live; ``cpu_s``: client
    process CPU seconds in the window.
    """

    intended: np.ndarray
    sent: np.ndarray
    done: np.ndarray
    status: np.ndarray
    waited: np.ndarray
    recall: np.ndarray
    window_ns: int
    in_system: np.ndarray
    cpu_s: float
    aborted: str | None = None
    first_error: str | None = None
    completed_in_window: int = -1  # answers (any request) that arrived inside the window


def _us(ns: np.ndarray) -> np.ndarray:
    return np.maximum(np.asarray(ns, dtype=np.int64) // 1000, 0)


def summarise_point(rec: Recording, *, mode: str, closed: bool, max_lag_us: float,
                    timeout_ms: float, cpu_count: int | None = None) -> dict[str, Any]:
    """One point's row: counts, achieved QPS, corrected and uncorrected percentiles (ms), the
    generator's lag (us), client CPU (cores), Little's law check, health flags. A timeout or an
    error is a failed query and stays in the percentiles (its latency as recorded)."""
    n = int(rec.status.shape[0])
    window_s = rec.window_ns / 1e9 if rec.window_ns > 0 else float("nan")
    ok = rec.status == OK
    completed = rec.status != NOT_SENT
    lat_c = rec.done - rec.intended
    lat_u = np.where(completed, rec.done - rec.sent, lat_c)
    if closed:
        med = int(np.median(_us(lat_u))) if n else 0
        h_c = histogram(_us(lat_u), expected_interval_us=max(med, 1))
    else:
        h_c = histogram(_us(lat_c))
    h_u = histogram(_us(lat_u))
    lag = (rec.sent - rec.intended)[rec.waited & completed]
    lag_us = lag / 1000.0
    waited_late = (~rec.waited) & completed
    row: dict[str, Any] = {
        "mode": mode, "n": n, "ok": int(ok.sum()),
        "errors": int((rec.status == ERROR).sum()),
        "timeouts": int(((rec.status == TIMEOUT) | (rec.status == NOT_SENT)).sum()),
        "achieved_qps": float((rec.completed_in_window if rec.completed_in_window >= 0
                               else ok.sum()) / window_s) if n else 0.0,
        **percentiles_ms(h_c), **percentiles_ms(h_u, suffix="_uncorrected"),
        "mean_ms": float(lat_c.mean() / 1e6) if n else None,
        "recall": float(np.nanmean(rec.recall)) if np.isfinite(rec.recall).any() else None,
        "lag_p99_us": float(np.percentile(lag_us, 99)) if lag.size else None,
        "lag_max_us": float(lag_us.max()) if lag.size else None,
        "sent_late_fraction": float(waited_late.mean()) if n and not closed else 0.0,
        "client_cpu_cores": (rec.cpu_s / window_s) if n else None,
    }
    row["littles_law"] = littles_law(rec)
    row["generator_ok"] = closed or row["lag_p99_us"] is None or row["lag_p99_us"] <= max_lag_us
    cores = cpu_count or 1
    row["client_cpu_saturated"] = bool(
        row["client_cpu_cores"] is not None and row["client_cpu_cores"] >= 0.95 * cores)
    row["timeout_ms"] = timeout_ms
    row["partial"] = rec.aborted is not None
    row["aborted"] = rec.aborted
    row["first_error"] = rec.first_error
    return row


def littles_law(rec: Recording) -> dict[str, float | None]:
    """L = lambda * W: ``L_sampled`` is the mean number of queries in the system sampled live
    during the window; ``lambda_W`` is the completion rate (1/s) times the mean corrected
    latency (s); ``ratio`` = L_sampled / lambda_W (1.0 when the law holds)."""
    n = rec.status.shape[0]
    if n == 0 or rec.window_ns <= 0 or rec.in_system.size == 0:
        return {"L_sampled": None, "lambda_W": None, "ratio": None}
    lam = n / (rec.window_ns / 1e9)
    w = float((rec.done - rec.intended).mean()) / 1e9
    lw = lam * w
    ls = float(rec.in_system.mean())
    return {"L_sampled": ls, "lambda_W": lw, "ratio": ls / lw if lw > 0 else None}


def meets_slo(row: Mapping[str, Any], p99_ms: float, target_recall: float | None,
              max_error_rate: float) -> bool:
    """Whether a point keeps corrected p99 within ``p99_ms``, recall at or above the target and
    failed queries at or below ``max_error_rate`` (a fraction), with the generator healthy."""
    p99 = row.get("p99_ms")
    if p99 is None or p99 > p99_ms or not row.get("generator_ok", True) or row.get("partial"):
        return False
    n = max(int(row.get("n") or 0), 1)
    if (int(row.get("errors") or 0) + int(row.get("timeouts") or 0)) / n > max_error_rate:
        return False
    rec = row.get("recall")
    return not (target_recall is not None and (rec is None or rec < target_recall))


__all__ = [
    "ERROR",
    "NOT_SENT",
    "OK",
    "TIMEOUT",
    "Arrival",
    "Recording",
    "hand_corrected_p",
    "histogram",
    "littles_law",
    "meets_slo",
    "percentiles_ms",
    "schedule_offsets_ns",
    "summarise_point",
]
