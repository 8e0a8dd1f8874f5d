"""The evaluation loop times with retrieval.timing: warm-up untimed with the collector on, every
timed call (single: one per query, through the hot path; batch: one per repeat) with it paused."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.evaluation import Evaluator
from retrieval.loaders.synthetic import make_synthetic
from retrieval.testing.fake import FakeIndex


def test_timed_calls_run_with_gc_paused_and_warmup_without(monkeypatch, tmp_path):
    calls: list[tuple[int, bool]] = []
    search = FakeIndex._search

    def spy(self: Any, x: np.ndarray, k: int) -> Any:
        calls.append((x.shape[0], gc.isenabled()))
        return search(self, x, k)

    monkeypatch.setattr(FakeIndex, "_search", spy)
    ds = make_synthetic(300, 8, 12, seed=2)
    assert gc.isenabled()
    with Evaluator(ds, 5, warmup=3, batch_repeats=2, workdir=tmp_path) as ev:
        built = ev.build("fake", {"half_ef": 4})
        single, batch = ev.measure(built, {"ef_search": 8})
    assert gc.isenabled()
    warm, timed = calls[:4], calls[4:]
    assert warm == [(1, True)] * 3 + [(3, True)]  # one by one, then one batch
    assert timed == [(1, False)] * 12 + [(12, False)] * 2
    assert single.latency_ms.shape == (12,) and batch.latency_ms.shape == (2,)
    assert single.latency_ms.dtype == np.float64 and (single.latency_ms > 0).all()
    assert batch.qps == 12 / (batch.latency_ms.min() / 1000.0)
