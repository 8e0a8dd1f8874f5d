"""The study's paired significance tests: every test the spec allows runs (ranx 0.3 has no
Wilcoxon: rwb computes it with scipy on ranx's per-query scores) and gives the p-value an
independent computation gives."""

from __future__ import annotations

import math

import pytest

from retrieval.study.significance import compare_configs
from retrieval.study.spec import STAT_TESTS


def _case(n: int = 30) -> tuple[dict, dict, dict]:
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(n)}
    # the chosen config puts the relevant doc first on 2 of 3 queries, the default second
    base = {f"q{i}": ["x", f"d{i}"] for i in range(n)}
    cand = {f"q{i}": ([f"d{i}", "x"] if i % 3 else ["y", "x"]) for i in range(n)}
    return qrels, base, cand


@pytest.mark.parametrize("test", STAT_TESTS)
def test_every_allowed_test_runs(test: str) -> None:
    qrels, base, cand = _case()
    out = compare_configs(qrels, base, cand, list(qrels), metric="ndcg@10", test=test)
    assert out["test"] == test
    assert 0.0 <= out["p_value"] <= 1.0
    assert out["wins"] + out["ties"] + out["losses"] == 30
    assert out["wins"] == 20 and out["losses"] == 10


def test_wilcoxon_equals_scipy_on_the_per_query_ndcg() -> None:
    from scipy.stats import wilcoxon

    qrels, base, cand = _case()
    out = compare_configs(qrels, base, cand, list(qrels), metric="ndcg@10", test="wilcoxon")
    second = 1 / math.log2(3)  # nDCG of the relevant doc at rank 2
    b = [second] * 30
    c = [0.0 if i % 3 == 0 else 1.0 for i in range(30)]
    assert out["p_value"] == pytest.approx(wilcoxon(c, b).pvalue, rel=1e-9)
    assert out["default"] == pytest.approx(second)
    assert out["significant"] is (out["p_value"] < 0.05)


def test_wilcoxon_with_every_query_tied_is_not_significant() -> None:
    qrels, base, _ = _case(10)
    out = compare_configs(qrels, base, base, list(qrels), metric="ndcg@10", test="wilcoxon")
    assert out["p_value"] == 1.0 and out["ties"] == 10 and not out["significant"]
