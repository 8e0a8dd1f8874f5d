"""Bad input to rwb sweep: every case is a one-line ConfigError naming the field."""

import pytest

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.errors import ConfigError
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import apply_overrides, check_tunable
from retrieval.tune.units import plan_units


def spec(**over):
    data = {
        "name": "t",
        "dataset": "synthetic-small",
        "k": 10,
        "target_recall": 0.9,
        "indexes": [{"backend": "fake", "search": {"ef_search": [10, 20]}},
                    {"backend": "faiss-ivf", "build": {"nlist": 16}, "search": {"nprobe": 2}}],
    }
    data.update(over)
    return parse_spec(data, source="s.yaml")


@pytest.mark.parametrize("target", [0.0, -0.1, 1.5])
def test_target_outside_0_1(target):
    msg = rf"--target-recall' must be in \(0, 1\]; received {target}"
    with pytest.raises(ConfigError, match=msg):
        apply_overrides(spec(), target=target)
    with pytest.raises(ConfigError, match=r"s.yaml: field 'target_recall'"):
        spec(target_recall=target)


def test_unknown_strategy_suggests():
    with pytest.raises(ConfigError, match=r"unknown strategy 'targt'.*Did you mean 'target'"):
        apply_overrides(spec(), strategy="targt")


def test_target_strategy_needs_a_target():
    s = apply_overrides(spec(target_recall=None), strategy="target")
    with pytest.raises(ConfigError, match=r"strategy 'target' needs a target recall"):
        check_tunable(s)


def test_empty_search_range():
    with pytest.raises(ConfigError, match=r"tune.search_range.*'ef_search' is an empty range.*"
                                          r"received \[100, 10\]"):
        spec(tune={"search_range": {"ef_search": [100, 10]}})


def test_search_range_outside_the_allowed_range():
    s = spec(tune={"strategy": "target", "search_range": {"nprobe": [1, 64]}})
    with pytest.raises(ConfigError, match=r"tune.search_range.nprobe' must be within \[1, 16\]"):
        plan_units(s, "target")


def test_search_range_of_a_knob_no_backend_has():
    s = spec(tune={"strategy": "target", "search_range": {"efSearch": [1, 64]}})
    with pytest.raises(ConfigError, match=r"'efSearch' is not a monotone search knob.*allowed: "
                                          r"ef_search, k_factor, nprobe"):
        plan_units(s, "target")


def test_knob_that_is_not_monotone():
    s = spec(tune={"strategy": "target", "knobs": {"faiss-ivf": "nlist"}})
    with pytest.raises(ConfigError, match=r"tune.knobs.faiss-ivf.*'nlist'.*not a monotone knob"):
        plan_units(s, "target")


def test_objective_p95_needs_single_mode():
    s = spec(modes=["batch"])
    with pytest.raises(ConfigError, match=r"p95_ms needs mode 'single'"):
        check_tunable(s)


def test_target_units_span_the_range_and_grid_units_list_the_grid():
    s = spec(tune={"search_range": {"ef_search": [4, 200]}})
    target = plan_units(s, "target")
    assert [(u.backend, u.knob, u.low, u.high) for u in target] == [
        ("fake", "ef_search", 4, 200), ("faiss-ivf", "nprobe", 1, 16)]
    grid = plan_units(s, "grid")
    assert [len(u.grid) for u in grid] == [2, 1]
    assert len({u.key for u in target + grid}) == 4
