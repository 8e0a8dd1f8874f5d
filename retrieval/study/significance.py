"""Is the chosen configuration better than the untuned default? A paired test over the held-out
queries with ranx ``compare`` (Fisher's randomization test or a paired t-test), on the retrieval
path's nDCG@k (the part of end-to-end quality that varies per query; the cache's false hits are
compared as rates beside it)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval.errors import DataError

log = logging.getLogger(__name__)

TEST_NAMES = {
    "fisher": "Fisher's randomization test (paired, two-sided)",
    "student": "paired Student's t-test (two-sided)",
    "wilcoxon": "Wilcoxon signed-rank test (paired)",
}


def _ranx_run(rankings: Mapping[str, Sequence[str]], query_ids: Sequence[str], name: str) -> Any:
    from ranx import Run

    run = {}
    for q in query_ids:
        docs = list(rankings.get(q, ()))
        run[q] = {d: float(len(docs) - i) for i, d in enumerate(docs)} or {"__none__": 0.0}
    return Run(run, name=name)


def compare_configs(
    qrels: Mapping[str, Mapping[str, int]],
    baseline: Mapping[str, Sequence[str]],
    candidate: Mapping[str, Sequence[str]],
    query_ids: Sequence[str],
    *,
    metric: str,
    test: str = "fisher",
    n_permutations: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, Any]:
    """``candidate`` vs ``baseline`` rankings (query id -> doc ids, best first) on ``query_ids``
    with ranx ``compare``: both means, the difference, the p-value and win/tie/loss counts."""
    from ranx import Qrels, compare

    judged = {q: dict(qrels[q]) for q in query_ids if qrels.get(q)}
    if len(judged) < 2:
        raise DataError(f"significance: need >= 2 judged queries; received {len(judged)}")
    ids = list(judged)
    runs = [_ranx_run(baseline, ids, "default"), _ranx_run(candidate, ids, "chosen")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = compare(Qrels(judged), runs, [metric], stat_test=test,
                         n_permutations=n_permutations, max_p=alpha, random_seed=seed,
                         make_comparable=True)
    d = report.to_dict()
    base, cand = d["default"]["scores"][metric], d["chosen"]["scores"][metric]
    p = float(d["chosen"]["comparisons"]["default"][metric])
    wtl = d["chosen"]["win_tie_loss"]["default"][metric]
    resolution = 1.0 / n_permutations if test == "fisher" else None
    shown = (f"< {resolution:.2g}" if resolution is not None and p < resolution
             else f"{p:.4g}")
    return {
        "p_value_text": shown,
        "metric": metric, "test": test, "test_name": TEST_NAMES.get(test, test),
        "library": "ranx.compare", "n_queries": len(ids), "n_permutations": n_permutations,
        "alpha": alpha, "default": float(base), "chosen": float(cand),
        "difference": float(cand - base), "p_value": p, "significant": bool(p < alpha),
        "wins": int(wtl["W"]), "ties": int(wtl["T"]), "losses": int(wtl["L"]),
    }


__all__ = ["TEST_NAMES", "compare_configs"]
