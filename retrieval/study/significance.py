"""Is the chosen configuration better than the untuned default? A paired test over the held-out
queries with ranx ``compare`` (Fisher's randomization test or a paired t-test) or, for the
Wilcoxon signed-rank test that ranx 0.3 does not implement, scipy's ``wilcoxon`` on ranx's
per-query scores, on the retrieval
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


_NONE = "__none__"  # the doc of a query with no results (ranx needs >= 1 per query)


def _ranx_run(rankings: Mapping[str, Sequence[str]], query_ids: Sequence[str], name: str,
              keys: Mapping[str, str]) -> Any:
    from ranx import Run

    run = {}
    for q in query_ids:
        docs = list(rankings.get(q, ()))
        run[q] = ({keys[str(d)]: float(len(docs) - i) for i, d in enumerate(docs)}
                  or {keys[_NONE]: 0.0})
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

    from retrieval.stats.irmetrics import ranx_keys, rekey

    judged = {q: dict(qrels[q]) for q in query_ids if qrels.get(q)}
    if len(judged) < 2:
        raise DataError(f"significance: need >= 2 judged queries; received {len(judged)}")
    ids = list(judged)
    # one key width for ranx whatever the ids (ranx_keys: no numba compile per id width)
    keys = ranx_keys(judged.values(), (baseline.get(q, ()) for q in ids),
                     (candidate.get(q, ()) for q in ids), [[_NONE]])
    runs = [_ranx_run(baseline, ids, "default", keys), _ranx_run(candidate, ids, "chosen", keys)]
    r_qrels = Qrels(rekey(judged, keys))
    if test == "wilcoxon":
        return _wilcoxon(r_qrels, runs, ids, metric=metric, alpha=alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = compare(r_qrels, runs, [metric], stat_test=test,
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


def _wilcoxon(qrels: Any, runs: Sequence[Any], ids: Sequence[str], *, metric: str,
              alpha: float) -> dict[str, Any]:
    """Two-sided Wilcoxon signed-rank test (scipy) on ranx's per-query ``metric`` scores of the
    two runs; p = 1.0 when every query ties (no signed rank to test)."""
    from ranx import evaluate
    from scipy.stats import wilcoxon

    per = []
    for run in runs:
        evaluate(qrels, run, metric, make_comparable=True)
        per.append([float(run.scores[metric].get(q, 0.0)) for q in ids])
    base_q, cand_q = per
    diffs = [c - b for b, c in zip(base_q, cand_q, strict=True)]
    wins = sum(d > 0 for d in diffs)
    losses = sum(d < 0 for d in diffs)
    if wins + losses == 0:
        p = 1.0
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = float(wilcoxon(cand_q, base_q, zero_method="wilcox",
                               alternative="two-sided").pvalue)
    base, cand = sum(base_q) / len(ids), sum(cand_q) / len(ids)
    return {
        "p_value_text": f"{p:.4g}",
        "metric": metric, "test": "wilcoxon", "test_name": TEST_NAMES["wilcoxon"],
        "library": "scipy.stats.wilcoxon on ranx per-query scores", "n_queries": len(ids),
        "n_permutations": None, "alpha": alpha, "default": base, "chosen": cand,
        "difference": cand - base, "p_value": p, "significant": bool(p < alpha),
        "wins": int(wins), "ties": int(len(ids) - wins - losses), "losses": int(losses),
    }


__all__ = ["TEST_NAMES", "compare_configs"]
