"""Fan-out bench pieces that need no data: spec validation, backend swap, the CPU verdict."""

from __future__ import annotations

import math

import pytest

from retrieval.bench.fanout.analysis import classify
from retrieval.bench.fanout.spec import parse_fanout_spec, with_backend
from retrieval.errors import ConfigError

BASE = {
    "k": 10,
    "collections": [
        {"name": "a", "source": "qqp", "sample": 100, "backend": "hnswlib",
         "search": {"ef_search": 32}},
        {"name": "b", "source": "scifact", "backend": "faiss-flat"},
    ],
}


def _mode(cores: float, wait: float = 0.0, child: float = 0.0,
          speedup: float | None = None) -> dict[str, float | None]:
    return {"cpu_cores": cores, "runq_wait_cores": wait, "child_cpu_cores": child,
            "child_runq_wait_cores": 0.0, "speedup_p50": speedup}


def test_spec_defaults_and_backend_swap() -> None:
    spec = parse_fanout_spec(BASE)
    assert spec.modes == ["serial", "threads", "asyncio"] and spec.fusion == "rrf"
    mv = with_backend(spec, "milvus", server=True)
    assert all(c.backend == "milvus" and c.server for c in mv.collections)
    assert mv.collections[0].search == {"ef": 64} and mv.name.endswith("-milvus-server")


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"k": 0}, "field 'k' must be >= 1"),
        ({"modes": ["serial", "processes"]}, "modes"),
        ({"collections": []}, "collections"),
        ({"collections": [{"name": "a b", "source": "qqp"}]}, "letters, digits"),
        ({"collections": [{"name": "a", "source": "qqp"}, {"name": "a", "source": "qqp"}]},
         "unique"),
        ({"collections": [{"name": "a", "source": "qqp", "backend": "milvus",
                           "search": {"ef": 4}}]}, "ef"),
        ({"fusion": "max"}, "fusion"),
    ],
)
def test_spec_errors(patch: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_fanout_spec({**BASE, **patch}, source="x.yaml")


def test_classify() -> None:
    v = classify({"serial": _mode(0.97), "threads": _mode(1.8, speedup=1.8)})
    assert v["serial"].startswith("CPU-bound in this process")
    assert v["threads"].startswith("parallel")
    # a shared machine: little CPU obtained but a lot wanted is still CPU-bound
    assert classify({"serial": _mode(0.3, wait=0.6)})["serial"].startswith("CPU-bound")
    gil = classify({"serial": _mode(0.95), "threads": _mode(1.0, speedup=0.98)})
    assert "serialised" in gil["threads"]
    server = classify({"serial": _mode(0.1, child=0.9), "asyncio": _mode(0.2, speedup=1.1)})
    assert server["serial"].startswith("CPU-bound in the server")
    assert classify({"serial": _mode(0.05, wait=math.nan)})["serial"].startswith("waiting")
    starved = classify({"serial": _mode(0.5, wait=0.5), "threads": _mode(0.5, 1.5, speedup=0.9)})
    assert starved["threads"].startswith("parallel-capable but starved")


def test_different_dims_fail_before_any_index_is_built() -> None:
    import numpy as np

    from retrieval.bench.fanout.prepare import PreparedCollection, PreparedQueries, check_dims
    from retrieval.data import TextCollection

    spec = parse_fanout_spec(BASE, source="x.yaml")
    prepared = [
        PreparedCollection(spec.collections[0], ("1",), np.zeros((1, 384), np.float32), "m1", ""),
        PreparedCollection(spec.collections[1], ("1",), np.zeros((1, 768), np.float32), "m2", ""),
    ]
    coll = TextCollection("q", {"d": "text"}, {"q1": "query"})
    queries = PreparedQueries(("q1",), np.zeros((1, 384), np.float32), coll)
    with pytest.raises(ConfigError, match=r"x.yaml: .*a=384 \(m1\), b=768 \(m2\)"):
        check_dims(spec, prepared, queries)
    check_dims(spec, prepared[:1], queries)


def test_round_speedup_is_the_median_of_same_round_ratios() -> None:
    import numpy as np

    from retrieval.bench.fanout.analysis import pool_runs as _pool_runs
    from retrieval.bench.fanout.analysis import round_speedups as _round_speedups
    from retrieval.bench.fanout.retriever import FanoutRun

    def run(mode: str, p50: float) -> FanoutRun:
        return FanoutRun(mode, [], np.full(5, p50), 1.0, 0.9, 0.0, {"a": np.full(5, p50)},
                         wait_s=0.1, child_wait_s=0.0)

    per_round = {"serial": [run("serial", 2.0), run("serial", 9.0), run("serial", 3.0)],
                 "threads": [run("threads", 1.0), run("threads", 9.0), run("threads", 1.0)]}
    summary = {"modes": {m: {"cpu_cores": 0.9, "runq_wait_cores": 0.1, "child_cpu_cores": 0.0,
                             "child_runq_wait_cores": 0.0} for m in per_round},
               "speedup": {}}
    _round_speedups(summary, per_round)
    assert summary["modes"]["threads"]["speedup_p50_rounds"] == [2.0, 1.0, 3.0]
    assert summary["speedup"]["threads"] == 2.0
    assert summary["verdict"]["threads"].startswith("parallel")
    pooled = _pool_runs(per_round["serial"])
    assert len(pooled.latency_ms) == 15 and pooled.wall_s == 3.0
