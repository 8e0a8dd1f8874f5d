"""The cross-layer study's pure parts: spec validation, the end-to-end scoring of a config from
both legs' tables, the Pareto front, the choice, and the Optuna search over tables."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from retrieval.errors import ConfigError
from retrieval.paths import REPO_ROOT
from retrieval.study.cache_leg import CacheTables
from retrieval.study.combine import Config, Scorer, pareto_indices, weighted_quantiles
from retrieval.study.optimize import choose, exhaustive_front, optuna_front, run_optuna
from retrieval.study.retrieval_leg import RetrievalTables
from retrieval.study.spec import is_study_spec, load_study_spec, parse_study_spec

SPEC_FILE = REPO_ROOT / "sweeps" / "rag-end-to-end.yaml"


def _data() -> dict:
    return yaml.safe_load(SPEC_FILE.read_text())


def test_shipped_spec_parses_and_is_recognised(tmp_path):
    spec = load_study_spec(SPEC_FILE)
    assert spec.kind == "rag-study" and spec.retrieval.index.knob == "nprobe"
    assert is_study_spec(SPEC_FILE)
    assert not is_study_spec(REPO_ROOT / "sweeps" / "quickstart.yaml")
    assert not is_study_spec(tmp_path / "missing.yaml")
    assert spec.default.threshold in spec.thresholds
    assert spec.fetch_sizes == [10, 20, 30, 50]


@pytest.mark.parametrize(("path", "value", "match"), [
    (("default", "knob"), 5, r"default\.knob must be one of retrieval\.index\.values"),
    (("default", "depth"), 7, r"default\.depth must be one of rerank\.depths"),
    (("default", "threshold"), 0.9, r"default\.threshold must be <= cache\.tuning"),
    (("retrieval", "index", "knob"), "ef_search", r"retrieval\.index\.knob.*nprobe.*ef_search"),
    (("retrieval", "index", "backend"), "nope", r"retrieval\.index\.backend"),
    (("retrieval", "index", "values"), [1, 64], r"nprobe.*nlist=32.*64"),
    (("retrieval", "index", "values"), [2, 2], r"distinct"),
    (("rerank", "depths"), [0, -1], r"depths"),
    (("constraints", "target_recall"), 1.5, r"target_recall"),
    (("optuna", "sampler"), "grid", r"optuna\.sampler"),
    (("surprise",), 1, r"surprise"),
])
def test_bad_spec_names_field_and_value(path, value, match):
    data = copy.deepcopy(_data())
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=match):
        parse_study_spec(data, source="s.yaml")


def test_bad_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: rag-study\n  x: [")
    with pytest.raises(ConfigError, match="malformed YAML"):
        load_study_spec(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_study_spec(tmp_path / "nope.yaml")


def test_weighted_quantiles_of_a_mixture():
    # 30% at 1 ms (hits), 70% spread over 10..16 ms (misses)
    hit, miss = np.array([1.0]), np.arange(10.0, 17.0)
    p25, p50, p95 = weighted_quantiles([hit, miss], [0.3, 0.7], (0.25, 0.5, 0.95))
    assert p25 == 1.0 and p50 == 11.0 and p95 == 16.0  # CDF: 1->.3, 10->.4, 11->.5, 16->1
    assert weighted_quantiles([hit, miss], [0.0, 1.0], (0.5,)) == [13.0]


def test_pareto_indices_three_objectives():
    objs = [(0.6, 10.0, 3.0), (0.6, 12.0, 3.0), (0.5, 5.0, 3.0), (0.7, 20.0, 4.0),
            (0.5, 5.0, 3.5)]
    assert pareto_indices(objs) == [0, 2, 3]


def _tables(spec):
    """Two knob values x two depths x 4 queries; cache with a linear false-hit curve."""
    values, depths = [1, 32], [0, 50]
    spec = spec.model_copy(update={
        "retrieval": spec.retrieval.model_copy(update={"index": spec.retrieval.index.model_copy(
            update={"values": values})}),
        "rerank": spec.rerank.model_copy(update={"depths": depths}),
        "default": spec.default.model_copy(update={"knob": 1, "depth": 50}),
    })
    ndcg = np.zeros((2, 2, 4))
    ndcg[0, 0], ndcg[0, 1] = 0.3, 0.4
    ndcg[1, 0], ndcg[1, 1] = 0.55, 0.65
    recall = np.zeros_like(ndcg)
    recall[0], recall[1, 0], recall[1, 1] = 0.5, 0.7, 0.95
    fetch = spec.fetch_sizes
    rt = RetrievalTables(
        query_ids=["a", "b", "c", "d"], tuning=np.array([True, True, False, False]),
        values=values, depths=depths, fetch_sizes=fetch, ndcg=ndcg, recall=recall,
        embed_ms=np.array([5.0, 5.0]), search_ms=np.full((2, len(fetch), 4), 1.0),
        rerank_ms=np.array([[0.0, 0.0], [100.0, 100.0]]), sample=np.array([0, 2]),
        rankings={}, qrels={},
    )
    grid = np.round(np.arange(0, 0.301, 0.001), 6)
    table = {"threshold": grid, "hits": (grid * 1000).astype(int),
             "false_hits": (grid * 200).astype(int), "hit_rate": 2 * grid,
             "correct_hit_rate": 1.6 * grid, "false_hit_rate": 0.4 * grid,
             "false_hit_upper_bound": 0.4 * grid + 0.01, "precision": np.full_like(grid, 0.8)}
    ct = CacheTables(grid, {"tuning": table, "heldout": table}, {"mean_ms": 0.5})
    return spec, rt, ct


def test_scorer_combines_both_legs():
    spec, rt, ct = _tables(load_study_spec(SPEC_FILE))
    sc = Scorer(spec, rt, ct)
    o = sc.score(Config(32, 50, 0.1), "tuning")
    assert o.ndcg_path == pytest.approx(0.65)
    assert o.ndcg_e2e == pytest.approx((1 - 0.04) * 0.65)
    assert o.hit_rate == pytest.approx(0.2) and o.recall == pytest.approx(0.95)
    # hits cost embed + lookup = 5.5 ms; misses 5.5 + 1 (search) + 100 (rerank) = 106.5 ms
    assert o.p50_ms == pytest.approx(106.5) and o.p95_ms == pytest.approx(106.5)
    assert o.mean_ms == pytest.approx(0.2 * 5.5 + 0.8 * 106.5)
    llm = spec.cache.cost.usd_per_call
    host = o.mean_ms / 3.6e6 * spec.cost.usd_per_host_hour
    assert o.usd_per_1k == pytest.approx(1000 * (0.8 * llm + host))
    assert o.false_hit_violation == pytest.approx(0.05 - spec.cache.tuning.max_false_hit)
    low = sc.score(Config(1, 0, 0.0), "tuning")
    assert not low.feasible and low.recall_violation > 0
    assert low.p95_ms == pytest.approx(6.5)


def test_front_choice_and_optuna_agree_on_a_tiny_grid():
    spec, rt, ct = _tables(load_study_spec(SPEC_FILE))
    spec = spec.model_copy(update={"constraints": spec.constraints.model_copy(
        update={"target_recall": 0.9}), "optuna": spec.optuna.model_copy(
        update={"n_trials": 60, "threshold_step": 0.05})})
    sc = Scorer(spec, rt, ct)
    front, n, feasible = exhaustive_front(spec, sc)
    assert n == 2 * 2 * len(spec.thresholds)
    assert all(p.config.knob == 32 and p.config.depth == 50 for p in front)
    assert feasible == len(front)  # only (32, 50) meets recall; every threshold is a trade-off
    best = choose(front, tolerance=0.0)
    assert best is not None and best.config.threshold == 0.0  # no false hits: best nDCG
    study = run_optuna(spec, sc, storage=None, study_name="t")
    found = optuna_front(study, spec, sc)
    assert {p.config for p in found} <= {p.config for p in front}
    assert len(found) >= len(front) // 2
    for t in study.trials:
        ok = t.params["nprobe"] == 32 and t.params["depth"] == 50 and t.params["threshold"] < 0.1
        assert t.user_attrs["feasible"] == ok, t.params


def test_is_study_spec_false_for_non_mapping(tmp_path: Path):
    p = tmp_path / "x.yaml"
    p.write_text("- 1\n- 2\n")
    assert not is_study_spec(p)


def test_cli_sweep_dispatches_study_and_rejects_index_only_flags(capsys):
    from retrieval.cli import main

    assert main(["sweep", str(SPEC_FILE), "--strategy", "grid"]) == 2
    err = capsys.readouterr().err
    assert "rag-study always runs Optuna" in err and "'grid'" in err
    assert main(["sweep", str(SPEC_FILE), "--target-recall", "1.5"]) == 2
    assert "--target-recall" in capsys.readouterr().err
    assert main(["sweep", str(SPEC_FILE), "--threads", "2"]) == 2
    assert "--threads" in capsys.readouterr().err


def test_study_names_objectives_and_constraints():
    spec, rt, ct = _tables(load_study_spec(SPEC_FILE))
    spec = spec.model_copy(update={"constraints": spec.constraints.model_copy(
        update={"target_recall": 0.9}), "optuna": spec.optuna.model_copy(
        update={"n_trials": 20})})
    from retrieval.study.optimize import OBJECTIVE_NAMES

    study = run_optuna(spec, Scorer(spec, rt, ct), storage=None, study_name="dash")
    assert study.metric_names == list(OBJECTIVE_NAMES)
    infeasible = set()
    for t in study.trials:
        listed = t.system_attrs["constraints"]
        assert listed == [t.constraints["recall"], t.constraints["false_hit"]]
        if max(listed) > 0:
            infeasible.add(t.number)
    assert infeasible
    assert not infeasible & {t.number for t in study.best_trials}
