"""Tenants workload pieces without an engine: Zipf sizes, synthetic tenancy, the spec's one-line
errors, per-tenant recall, the judging rule (small tenants pooled per size class), the flat /
index crossover and the answer rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.errors import ConfigError, DataError
from retrieval.tune import tenants as tn
from retrieval.tune.spec import parse_spec
from retrieval.tune.tenants_run import answer, choose

ENTRY = {"backend": "hnswlib", "build": {"M": 8}, "search": {"ef_search": 20}}


def _spec(tenants: dict[str, Any]) -> Any:
    return parse_spec({"dataset": "x", "target_recall": 0.9, "indexes": [ENTRY],
                       "tenants": tenants})


def test_zipf_sizes_sum_to_n_and_fall_with_rank() -> None:
    sizes = tn.zipf_sizes(10_000, 100, 1.1)
    assert int(sizes.sum()) == 10_000 and sizes.min() >= 1
    assert np.all(np.diff(sizes) <= 0)
    assert sizes[0] / sizes[9] == pytest.approx(10 ** 1.1, rel=0.05)
    with pytest.raises(ConfigError, match=r"tenants\.count"):
        tn.zipf_sizes(10, 11, 1.1)


def test_synthetic_tenancy_spreads_queries_evenly() -> None:
    spec = _spec({"count": 7, "sizes": {"zipf": 1.1}}).tenants
    ten = tn.synthetic(500, 30, spec, seed=1)
    assert ten.count == 7 and int(ten.sizes().sum()) == 500
    per = np.bincount(ten.queries, minlength=7)
    assert per.max() - per.min() <= 1
    again = tn.synthetic(500, 30, spec, seed=1)
    assert np.array_equal(ten.base, again.base) and np.array_equal(ten.queries, again.queries)


@pytest.mark.parametrize("block, needle", [
    ({"count": 5, "labels": "a.npy", "query_labels": "b.npy"}, "both"),
    ({}, "neither"),
    ({"labels": "a.npy"}, "go together"),
    ({"sizes": {"zipf": 1.1}}, "sizes needs count"),
    ({"count": 5, "layouts": ["everything"]}, "layouts"),
])
def test_spec_errors_name_the_field(block: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        _spec(block)
    msg = str(err.value)
    assert "tenants" in msg and needle in msg and "\n" not in msg


def test_label_files_checked(tmp_path: Path) -> None:
    np.save(tmp_path / "b.npy", np.array([1, 1, 2]))
    np.save(tmp_path / "q.npy", np.array([1, 3]))
    spec = _spec({"labels": str(tmp_path / "b.npy"),
                  "query_labels": str(tmp_path / "q.npy")}).tenants
    with pytest.raises(DataError, match="one label per row"):
        tn.from_files(4, 2, spec, "<memory>")
    with pytest.raises(DataError, match=r"tenants\.query_labels.*'3'"):
        tn.from_files(3, 2, spec, "<memory>")
    np.save(tmp_path / "q.npy", np.array([2, 1]))
    ten = tn.from_files(3, 2, spec, "<memory>")
    assert ten.names == ("1", "2") and ten.queries.tolist() == [1, 0]


def test_recall_counts_only_the_tenants_rows() -> None:
    exact = np.array([[4, 5, 6, -1], [1, 2, 3, 8]])
    found = np.array([[6, 4, 9, -1], [1, -1, -1, -1]])
    assert tn.tenant_recall(found, exact, 4).tolist() == [pytest.approx(2 / 3), 0.25]


def test_small_tenants_are_judged_pooled_per_size_class() -> None:
    # tenants 0 and 1: size class [4, 8) with 2 queries each (pooled); tenant 2: own queries
    ten = tn.Tenancy(np.repeat([0, 1, 2], [5, 6, 40]), np.array([0, 0, 1, 1, 2, 2, 2, 2]),
                     ("a", "b", "c"), "test")
    per_query = np.array([1.0, 0.5, 0.0, 0.5, 1, 1, 1, 1])
    judged = tn.judge(per_query, ten, min_queries=3, bound=lambda x: float(x.mean()))
    assert judged.pooled.tolist() == [True, True, False]
    assert judged.lower.tolist() == [0.5, 0.5, 1.0]
    assert judged.mean.tolist() == [0.75, 0.25, 1.0]
    stats = judged.stats(target=0.9)
    assert stats["tenants_meeting"] == pytest.approx(1 / 3)
    assert stats["tenant_recall_worst1pct"] == 0.25


def test_crossover_is_where_the_index_wins_from_then_on() -> None:
    sizes = np.array([3, 20, 300, 5000])
    flat = [np.array([0.01]), np.array([0.02]), np.array([0.3]), np.array([5.0])]
    index = [np.array([0.05]), np.array([0.01]), np.array([0.5]), np.array([0.1])]
    ok = np.array([True, True, True, True])
    assert tn.crossover(sizes, index, flat, ok)["size"] == 4096  # 300's class loses
    index[2] = np.array([0.2])
    assert tn.crossover(sizes, index, flat, ok)["size"] == 16
    ok[3] = False  # the largest tenant misses the target: the index never qualifies
    assert tn.crossover(sizes, index, flat, ok)["size"] is None


def _p(layout: str, ef: int, meets: bool, p95: float, nbytes: float) -> dict[str, Any]:
    return {"layout": layout, "label": "h", "build": {}, "search": {"ef": ef}, "meets": meets,
            "p95_ms": p95, "bytes_per_vector": nbytes, "tenants_meeting": 1.0 if meets else 0.5}


def test_answer_is_the_cheapest_layout_that_meets() -> None:
    points = [_p("shared", 10, False, 0.1, 10.0), _p("shared", 40, False, 0.2, 10.0),
              _p("per_tenant", 10, False, 0.1, 200.0), _p("per_tenant", 40, True, 0.4, 200.0),
              _p("flat_index", 10, True, 0.6, 80.0), _p("flat_index", 40, True, 0.3, 80.0)]
    chosen = choose(points)
    # per layout: the first config (grid order) that meets, else the last
    assert [(p["layout"], p["search"]["ef"]) for p in chosen] == [
        ("shared", 40), ("per_tenant", 40), ("flat_index", 10)]
    ans = answer(chosen)
    assert ans["by_p95"]["layout"] == "per_tenant"  # 0.4 ms < 0.6 ms; shared never meets
    assert ans["by_bytes"]["layout"] == "flat_index"
    assert answer([p for p in chosen if not p["meets"]]) == {"by_p95": None, "by_bytes": None}


def _spec_file(tmp_path: Path, tenants: dict[str, Any], target: bool = True) -> str:
    import yaml

    tenants = dict(tenants)
    scale = tenants.pop("_scale", False)
    data: dict[str, Any] = {"name": "t", "dataset": {"kind": "synthetic", "n": 300, "dim": 8,
                                                     "n_queries": 20},
                            "indexes": [ENTRY], "tenants": tenants}
    if scale:
        data["scale"] = {"fractions": [0.25, 0.5]}
    if target:
        data["target_recall"] = 0.9
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("verb, tenants, target, message", [
    ("sweep", {"labels": "base.npy", "query_labels": "q.npy"}, True,
     "field 'tenants.labels': '"),
    ("sweep", {"count": 5}, False, "target_recall' must be a recall target"),
    ("sweep", {"count": 301}, True, "field 'tenants.count' must be <= the number of base"),
    ("eval", {"count": 5}, True, "field 'tenants': a tenants study"),
    ("sweep", {"count": 5, "_scale": True}, True, "drop 'scale' (or 'tenants')"),
])
def test_cli_bad_tenants_input_is_one_line_exit_2(tmp_path: Path, verb: str,
                                                  tenants: dict[str, Any], target: bool,
                                                  message: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from retrieval.cli import main

    np.save(tmp_path / "base.npy", np.zeros(299, dtype=np.int64))  # one short
    np.save(tmp_path / "q.npy", np.zeros(20, dtype=np.int64))
    code = main([verb, _spec_file(tmp_path, tenants, target), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and message in err, err


def test_pareto_refuses_a_tenants_run(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from retrieval.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"kind": "sweep", "workload": "tenants",
                                                  "layouts": []}))
    assert main(["pareto", str(run)]) == 2
    assert "judges each layout per tenant" in capsys.readouterr().err


def test_heldout_split_is_within_each_tenant() -> None:
    ten = tn.Tenancy(np.repeat([0, 1, 2], [5, 5, 5]), np.repeat([0, 1, 2], [1, 2, 7]),
                     ("a", "b", "c"), "test")
    held = tn.tenant_split(ten, 0.5, seed=3)
    per = [int(held[q].sum()) for q in ten.query_rows()]
    assert per == [0, 1, 4]  # one query stays tuning; round(7 * 0.5) = 4 held out
    assert not tn.tenant_split(ten, 0.0, seed=3).any()
    per_query = np.where(held, 0.0, 1.0)
    judged = tn.judge(per_query, ten, 1, lambda x: float(x.mean()), use=~held)
    assert judged.lower.tolist() == [1.0, 1.0, 1.0]  # tuning queries only
    assert judged.mean[2] == pytest.approx(3 / 7)  # recall over all of the tenant's queries
