"""The sweep's bounds use the spec's confidence settings (issue 20 item 14): ``tune.confidence``
``method``, ``level`` and ``resamples`` reach the lower bound of every measured point, and the
recorded ``recall_lb`` is that bound (not one at the defaults: bootstrap, 0.95, 2000); the
filtered workload's measurer alike. Real sweeps on tiny data; the bound function is spied on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.loaders.synthetic import make_synthetic
from retrieval.tune import measure
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import binomial_lower, bootstrap_lower
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

SEED = 3


FILTERS = {"selectivities": [0.2], "attribute": "clustered", "strategies": ["engine"],
           "overfetch_max": 4}


@pytest.mark.parametrize(("conf", "filtered"), [
    ({"method": "bootstrap", "level": 0.8, "resamples": 300}, False),
    ({"method": "binomial", "level": 0.99}, False),
    ({"method": "bootstrap", "level": 0.7, "resamples": 200}, True),
])
def test_the_sweep_bounds_recall_with_the_specs_confidence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conf: dict[str, Any],
        filtered: bool) -> None:
    data = make_synthetic(1200, 16, 80, seed=1)
    np.save(tmp_path / "base.npy", data.base)
    np.save(tmp_path / "queries.npy", data.queries)
    dataset: dict[str, Any] = {"kind": "npy", "base": str(tmp_path / "base.npy"),
                               "queries": str(tmp_path / "queries.npy"), "metric": "l2"}
    if filtered:  # the filtered workload's measurer (per bucket) takes the same settings
        dataset = {"kind": "synthetic", "n": 1200, "dim": 16, "n_queries": 80,
                   "n_clusters": 6, "attributes": True}
    spec = parse_spec({
        "name": "conf", "seed": SEED, "dataset": dataset,
        **({"filters": FILTERS} if filtered else {}),
        "k": 10, "warmup": 1, "batch_repeats": 1, "target_recall": 0.5,
        "index_build": {"threads": 1},
        "indexes": [{"backend": "hnswlib", "build": {"M": 4, "ef_construction": 12},
                     "search": {"ef_search": [10, 16] if not filtered else [10, 64]}}],
        "tune": {"strategy": "target" if filtered else "grid", "confidence": conf},
    }, source="conf.yaml")
    calls: list[tuple[np.ndarray, int, ConfidenceSpec, float]] = []
    real = measure.lower_bound

    def spy(per_query: np.ndarray, k: int, c: ConfidenceSpec, seed: int) -> float:
        lb = real(per_query, k, c, seed)
        calls.append((np.array(per_query), k, c, lb))
        return lb

    monkeypatch.setattr(measure, "lower_bound", spy)
    run_sweep(spec, tmp_path / "run")
    assert calls
    for per_query, k, c, lb in calls:
        assert (c.method, c.level) == (conf["method"], conf["level"])
        if conf["method"] == "bootstrap":
            assert c.resamples == conf["resamples"]
            expected = bootstrap_lower(per_query, conf["level"], conf["resamples"], SEED)
        else:
            expected = binomial_lower(per_query, k, conf["level"])
        assert lb == pytest.approx(expected, abs=1e-12)  # the bound computed with them
    # the recorded bounds are these, and differ from the defaults' (so the test can fail)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    lbs = [lb for *_, lb in calls]
    if not filtered:
        chosen = summary["backends"]["hnswlib"]["chosen"]
        assert any(chosen["recall_lb"] == pytest.approx(lb, abs=1e-9) for lb in lbs), chosen
        for row in summary["rows"]:
            assert any(row["recall_lb"] == pytest.approx(lb, abs=1e-9) for lb in lbs), row
    defaults = [bootstrap_lower(pq, 0.95, 2000, SEED) for pq, *_ in calls]
    assert any(abs(a - b) > 1e-6 for a, b in zip(lbs, defaults, strict=True))
