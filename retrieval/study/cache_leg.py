"""The cache leg of the study: QQP-style traffic through the semantic cache on a live Redis.

Runs the semantic-cache experiment of :mod:`retrieval.cache.run` (the cache spec embedded in the
study spec: a seeded subset of the labelled pairs stored, the other sides probed, nearest
distances fetched once from Redis, a threshold grid swept offline on a tuning and a held-out
split) and keeps, per split and threshold, the hit / correct-hit / false-hit rates per probe and
the upper confidence bound on the false-hit rate, plus the measured single lookup latency (ms).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval.errors import DataError
from retrieval.study.spec import StudySpec

log = logging.getLogger(__name__)

#: the info key of the cache leg's Redis server facts (the cache run's ``SERVER_KEY``)
SERVER_KEY_OF_CACHE = "redis"

RATES = ("hit_rate", "correct_hit_rate", "false_hit_rate", "false_hit_upper_bound", "precision")


@dataclass(frozen=True, eq=False)
class CacheTables:
    """Per split (``tuning``/``heldout``), column arrays over ``grid`` (cosine distance)."""

    grid: np.ndarray
    tables: dict[str, dict[str, np.ndarray]]
    lookup_ms: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    def at(self, split: str, threshold: float) -> dict[str, float]:
        """Rates at the grid value nearest ``threshold`` (cosine distance)."""
        i = int(np.argmin(np.abs(self.grid - threshold)))
        t = self.tables[split]
        out = {"threshold": float(self.grid[i])}
        for key in RATES:
            v = float(t[key][i])
            out[key] = v if np.isfinite(v) else 0.0
        out["hits"] = int(t["hits"][i])
        out["false_hits"] = int(t["false_hits"][i])
        return out

    @property
    def lookup_mean_ms(self) -> float:
        return float(self.lookup_ms["mean_ms"])


def measure_cache(spec: StudySpec, redis_url: str | None = None) -> CacheTables:
    """Run the cache experiment once against Redis (``redis_url``, ``$REDIS_URL``, else a
    private server started from the PyPI wheels)."""
    from retrieval.cache.run import SERVER_KEY, run_cache_tuning

    out = run_cache_tuning(spec.cache, redis_url=redis_url, write=False)
    s = out.summary
    timed = {size: v for size, v in (s.get("latency_ms") or {}).items()
             if isinstance(v, dict) and "mean_ms" in v}
    if not timed:
        raise DataError(
            f"{spec.source}: field 'cache.latency.sizes': no lookup latency was measured "
            f"(every size exceeds the {s['design'].get('n_stored', '?')} stored entries); "
            f"received {spec.cache.latency.sizes}"
        )
    size = max(timed, key=int)
    tables = {split: {k: np.asarray(v) for k, v in t.items()}
              for split, t in out.sweep.tables.items()}
    grid = np.asarray(tables["tuning"]["threshold"], dtype=np.float64)
    info = {
        "dataset": spec.cache.data_name, "data": s.get("dataset"), "design": s.get("design"),
        "embedder": s.get("embedder"),
        SERVER_KEY_OF_CACHE: s.get(SERVER_KEY), "index": s.get("index"),
        "lookup_size": int(size),
        "cache_tune_choice": {"threshold": s.get("threshold"),
                              "heldout_hit_rate": s.get("heldout_hit_rate"),
                              "heldout_false_hit_rate": s.get("heldout_false_hit_rate")},
        "usd_per_llm_call": spec.cache.cost.usd_per_call,
        "knn_check": s.get("knn_check"), "timing_s": s.get("timing_s"),
    }
    return CacheTables(grid, tables, dict(timed[size]), info)


__all__ = ["RATES", "CacheTables", "measure_cache"]
