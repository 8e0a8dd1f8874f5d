"""rwb sweep on the FakeIndex, whose recall curve is known exactly: the tuners must pick the exact
value, stay within their evaluation budget, and record every evaluation as an Optuna trial."""

import math

import optuna
import pytest

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.errors import ConfigError
from retrieval.testing.fake import fake_recall
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import apply_overrides, run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

TARGET = 0.8
# fake_recall(ef, 1.0, 10, half_ef=4) = floor(10 ef / (ef + 4)) / 10 >= 0.8  <=>  ef >= 16
ANSWER = 16
RANGE = [1, 24]


def fake_spec(quality=(1.0, 0.5), grid=RANGE, **tune):
    return parse_spec({
        "name": "fake-tune",
        "dataset": "synthetic-small",
        "k": 10,
        "warmup": 2,
        "batch_repeats": 1,
        "target_recall": TARGET,
        "indexes": [{
            "backend": "fake",
            "build": {"quality": list(quality), "half_ef": 4, "us_per_ef": 0.0},
            "search": {"ef_search": list(range(grid[0], grid[1] + 1))},
        }],
        "tune": {"search_range": {"ef_search": RANGE}, **tune},
    }, source="fake.yaml")


def by_quality(summary):
    return {b["build"]["quality"]: b for b in summary["builds"]}


def test_curve_is_what_the_test_assumes():
    assert fake_recall(ANSWER, 1.0, 10, 4) == TARGET > fake_recall(ANSWER - 1, 1.0, 10, 4)
    assert fake_recall(4096, 0.5, 10, 4) < TARGET


@pytest.fixture(scope="module")
def target_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("target")
    return run_sweep(apply_overrides(fake_spec(), strategy="target"), out)


def test_target_finds_the_exact_value_within_budget(target_run):
    s = target_run.summary
    assert s["strategy"] == "target" and s["target_recall"] == TARGET
    good, bad = by_quality(s)[1.0], by_quality(s)[0.5]
    assert good["chosen"]["search"] == {"ef_search": ANSWER}
    # the exact curve: every query has recall 0.8, so the bound equals the mean
    assert good["chosen"]["recall"] == pytest.approx(TARGET, abs=1e-12)
    assert good["chosen"]["recall_lb"] == pytest.approx(good["chosen"]["recall"])
    assert good["evaluations"] <= math.ceil(math.log2(RANGE[1] - RANGE[0] + 1)) + 2
    assert good["heldout_recall"] == pytest.approx(TARGET) and good["heldout_meets"] is True
    # the most accurate setting misses: infeasible after one evaluation
    assert bad["chosen"] is None and bad["infeasible"] and bad["evaluations"] == 1
    assert s["backends"]["fake"]["chosen"]["search"] == {"ef_search": ANSWER}
    assert s["pareto"] and all("fronts" in p for p in s["pareto"])


def test_every_evaluation_is_a_trial_with_the_constraint(target_run):
    s = target_run.summary
    study = optuna.load_study(study_name="fake-tune",
                              storage=f"sqlite:///{target_run.run.path / 'study.db'}")
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == s["evaluations"] == sum(b["evaluations"] for b in s["builds"])
    for t in done:
        ef = t.params["fake.search.ef_search"]
        quality = t.params["fake.build.quality"]
        meets = fake_recall(ef, quality, 10, 4) >= TARGET
        assert (t.constraints["recall_lb"] <= 0) == meets
    best = [t for t in study.best_trials if t.params["fake.build.quality"] == 1.0]
    assert best and all(t.params["fake.search.ef_search"] >= ANSWER for t in best)


def test_grid_agrees_with_target(tmp_path, target_run):
    grid = run_sweep(apply_overrides(fake_spec(quality=(1.0,)), strategy="grid"), tmp_path)
    b = by_quality(grid.summary)[1.0]
    assert b["evaluations"] == RANGE[1] - RANGE[0] + 1
    assert b["chosen"]["search"] == by_quality(target_run.summary)[1.0]["chosen"]["search"]


def test_optuna_solves_each_proposed_build(tmp_path):
    res = run_sweep(apply_overrides(fake_spec(), strategy="optuna", n_trials=2), tmp_path)
    good, bad = by_quality(res.summary)[1.0], by_quality(res.summary)[0.5]
    assert good["chosen"]["search"] == {"ef_search": ANSWER}
    assert bad["infeasible"] and bad["evaluations"] == 1


def test_resume_refuses_another_spec_naming_the_field(tmp_path, target_run):
    storage = f"sqlite:///{target_run.run.path / 'study.db'}"
    same = run_sweep(apply_overrides(fake_spec(), strategy="target", n_trials=7), tmp_path / "a",
                     storage=storage)
    assert same.points_measured == 0  # everything was already in the study
    assert same.summary["builds"] == target_run.summary["builds"]
    other = apply_overrides(fake_spec(search_range={"ef_search": [1, 30]}), strategy="target")
    with pytest.raises(ConfigError, match=r"different spec: field 'tune.search_range.ef_search"
                                          r"\[1\]' is 24 there and 30 here"):
        run_sweep(other, tmp_path / "b", storage=storage)


@pytest.mark.parametrize(
    "url,match",
    [
        ("foo://host/db", "unknown storage 'foo://host/db'; allowed: sqlite"),
        ("sqlite:////no/such/folder/s.db", "'sqlite:////no/such/folder/s.db': cannot be opened"),
        ("journal:/no/such/folder/s.log", "'journal:/no/such/folder/s.log': cannot be opened"),
        ("postgresql://bob:hunter2@127.0.0.1:1/rwb", "'postgresql://\\*\\*\\*@127.0.0.1:1/rwb'"),
    ],
)
def test_bad_storage_is_named_without_secrets(tmp_path, url, match):
    spec = apply_overrides(fake_spec(), strategy="target")
    with pytest.raises(ConfigError, match=match) as info:
        run_sweep(spec, tmp_path, storage=url)
    assert "hunter2" not in str(info.value)
    assert not list(tmp_path.glob("*.db")) and not (tmp_path / "summary.json").exists()


def test_missing_dataset_leaves_no_partial_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    spec = parse_spec({**fake_spec().model_dump(mode="json"), "dataset": "no-such-dataset"})
    with pytest.raises(ConfigError, match=r"no-such-dataset"):
        run_sweep(apply_overrides(spec, strategy="target"), tmp_path / "run", storage=storage)
    assert optuna.get_all_study_names(storage=storage) == []
