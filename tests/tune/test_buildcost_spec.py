"""The spec fields of issue 33's cheaper tuning (``tune.concurrent_builds``,
``tune.query_subset``, ``tune.build_screen``, ``tune.dominated_builds``): defaults that change
nothing, and one clear line naming the field for a bad value."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval.errors import ConfigError
from retrieval.tune.spec import parse_spec


def _spec(**tune: Any) -> dict[str, Any]:
    return {"name": "s", "dataset": "synthetic-small", "k": 10, "target_recall": 0.9,
            "indexes": [{"backend": "faiss-hnsw", "build": {"M": 8}}], "tune": tune}


def test_defaults_change_nothing() -> None:
    t = parse_spec(_spec(), source="s.yaml").tune
    assert t.concurrent_builds == 1 and t.query_subset == 1.0 and t.build_screen is None
    assert t.dominated_builds == "skip"  # acts only with build_search: derived
    t = parse_spec(_spec(concurrent_builds="auto", query_subset=0.2,
                         build_screen={}), source="s.yaml").tune
    assert t.concurrent_builds == "auto" and t.query_subset == 0.2
    assert t.build_screen is not None and t.build_screen.fraction == 0.1
    assert t.build_screen.cost_margin == 1.0


@pytest.mark.parametrize(("tune", "field"), [
    ({"query_subset": 0}, "query_subset"),
    ({"query_subset": 1.5}, "query_subset"),
    ({"concurrent_builds": 0}, "concurrent_builds"),
    ({"concurrent_builds": "many"}, "concurrent_builds"),
    ({"build_screen": {"fraction": 1.0}}, "fraction"),
    ({"build_screen": {"fraction": 0.1, "sample": 3}}, "sample"),
    ({"build_screen": {"cost_margin": -1}}, "cost_margin"),
    ({"dominated_builds": "drop"}, "dominated_builds"),
])
def test_bad_values_are_one_line_naming_the_field(tune: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_spec(_spec(**tune), source="s.yaml")
    assert field in str(err.value) and "s.yaml" in str(err.value)
