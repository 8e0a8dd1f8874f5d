"""Params are validated once at the spec boundary, and trusted by every later layer: one
ef_search value from a sweep spec to hnswlib's set_ef meets SearchParams once and
check_combination once."""

from __future__ import annotations

from typing import Any

import pytest

from retrieval.engines.hnswlib.index import HnswlibIndex
from retrieval.errors import ConfigError
from retrieval.indexes import create_index
from retrieval.indexes.entry import IndexEntry, SearchConfig, check_entry
from retrieval.indexes.hnsw_common import HnswBuild, HnswSearch
from retrieval.loaders.synthetic import make_synthetic
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import apply_overrides, run_sweep

SPEC = {
    "name": "once",
    "dataset": {"kind": "synthetic", "n": 500, "dim": 8, "n_queries": 20},
    "k": 10,
    "warmup": 2,
    "batch_repeats": 2,
    "target_recall": 0.5,
    "indexes": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                 "search": {"ef_search": 20}}],
}


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Calls of hnswlib's SearchParams.model_validate and check_combination (spied)."""
    seen = {"validate": 0, "combination": 0}
    validate = HnswSearch.model_validate.__func__  # type: ignore[attr-defined]
    combine = HnswlibIndex.check_combination.__func__  # type: ignore[attr-defined]

    def spy_validate(cls: Any, *args: Any, **kw: Any) -> Any:
        seen["validate"] += 1
        return validate(cls, *args, **kw)

    def spy_combination(cls: Any, *args: Any, **kw: Any) -> Any:
        seen["combination"] += 1
        return combine(cls, *args, **kw)

    monkeypatch.setattr(HnswSearch, "model_validate", classmethod(spy_validate))
    monkeypatch.setattr(HnswlibIndex, "check_combination", classmethod(spy_combination))
    return seen


def test_one_sweep_trial_validates_its_search_params_once(counts, tmp_path):
    spec = apply_overrides(parse_spec(SPEC, source="once.yaml"), threads=1, strategy="grid")
    assert counts == {"validate": 1, "combination": 1}  # the spec boundary
    result = run_sweep(spec, tmp_path / "run")
    assert result.points_measured == 1
    rows = result.summary["rows"]
    assert len(rows) == 1 and rows[0]["search"] == {"ef_search": 20}
    assert counts == {"validate": 1, "combination": 1}  # nothing after it validated again


def test_eval_validates_each_search_config_once(counts, tmp_path):
    from retrieval.tune.runner import run_eval

    spec = parse_spec(SPEC, source="once.yaml")
    run_eval(spec, tmp_path / "run")
    assert counts == {"validate": 1, "combination": 1}


def test_checked_config_is_trusted_by_the_backend_but_a_dict_is_validated(counts):
    ds = make_synthetic(200, 8, 5, seed=1)
    entry = IndexEntry(backend="hnswlib", build={"M": 8}, search={"ef_search": 16})
    checked = check_entry(entry, 10, where="t.yaml", field="index")
    assert check_entry(entry, 10, where="t.yaml", field="index") is checked  # remembered
    (build,) = checked.builds()
    (config,) = checked.configs(build)
    assert isinstance(config, SearchConfig) and isinstance(config.search, HnswSearch)
    assert counts == {"validate": 1, "combination": 1}
    index = create_index("hnswlib", ds.dim, ds.metric, build)
    index.build(ds.base)
    index.use_search(config)  # type: ignore[attr-defined]
    index.search(ds.queries, 10)
    assert counts == {"validate": 1, "combination": 1}
    index.search(ds.queries, 5)  # another k: checked again by the backend
    assert counts["combination"] == 2
    index.set_search_params(HnswSearch(ef_search=30))  # its own params instance: taken as is
    assert counts["validate"] == 1 and index.search_params.ef_search == 30
    index.set_search_params(ef_search=12)  # a plain value from a user: validated
    assert counts["validate"] == 2
    with pytest.raises(ConfigError, match="unknown parameter 'ef'"):
        index.set_search_params(ef=12)
    with pytest.raises(ConfigError, match="HnswSearch"):
        index.set_search_params(HnswBuild())
    with pytest.raises(ConfigError, match="ef_search"):
        index.set_search_params(HnswSearch(ef_search=5))  # trusted, but k is checked at search
        index.search(ds.queries, 10)
    index.close()


def test_a_config_checked_for_another_k_is_checked_again(counts):
    config = check_entry(IndexEntry(backend="hnswlib", search={"ef_search": 32}), 10,
                         where="t.yaml", field="index").configs({})[0]
    other = check_entry(IndexEntry(backend="hnswlib"), 40, where="t.yaml", field="index")
    assert config.fits("hnswlib", config.build, 10) and not config.fits("hnswlib", config.build, 40)
    with pytest.raises(ConfigError, match=r"t\.yaml: index: .*ef_search.*>= k \(40\)"):
        other.config({}, config)
