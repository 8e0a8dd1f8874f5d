"""A quality target on real data: a small BEIR cut of SciFact (../shared/data; 40 seeded
judged claims, their cited abstracts and other abstracts up to 440, written by
retrieval.testing.byo.write_beir), embedded with the packaged MiniLM, tuned on hnswlib. The
exact-search reference is recomputed here (brute force on the same vectors, nDCG@10 by ranx)
and must equal the summary's; hnswlib counts no distance computations, so they are null."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import scifact_cut

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    from retrieval.tune.spec import parse_spec
    from retrieval.tune.sweep import run_sweep

    folder = scifact_cut(tmp_path_factory.mktemp("beir") / "scifact-cut")
    dataset = {"kind": "text", "collection": f"beir:{folder}"}
    spec = parse_spec({
        "name": "sf-quality", "dataset": dataset, "k": 10, "warmup": 0, "batch_repeats": 1,
        "target": {"ndcg_non_inferior": 0.01}, "index_build": {"threads": 1, "cache": False},
        "tune": {"heldout_fraction": 0.25, "search_range": {"ef_search": [10, 128]}},
        "indexes": [{"backend": "hnswlib", "build": {"M": 4, "ef_construction": 20},
                     "search": {"ef_search": 10}}],
    })
    out = tmp_path_factory.mktemp("sf") / "run"
    return run_sweep(spec, out).summary, dataset


def test_the_exact_reference_is_ranx_on_brute_force_top_10(run: tuple[dict, dict]) -> None:
    from retrieval.loaders.catalog import resolve_text_dataset
    from retrieval.stats.irmetrics import evaluate_rankings
    from retrieval.tune.decide import split_queries

    s, dataset = run
    q = s["quality"]
    td = resolve_text_dataset(dataset)
    ds = td.dataset
    tune = split_queries(ds.n_queries, 0.25, 0).tune
    top = np.argsort(1.0 - ds.queries[tune] @ ds.base.T, axis=1, kind="stable")[:, :10]
    ranked = {td.query_ids[i]: [td.base_ids[j] for j in row] for i, row in zip(tune, top)}
    want = evaluate_rankings(td.collection.qrels, ranked, ["ndcg@10"],
                            query_ids=list(ranked)).means["ndcg@10"]
    assert q["n_queries"] == len(tune) == 30
    assert q["exact"] == pytest.approx(want, abs=1e-6)


def test_both_knobs_are_reported_with_costs(run: tuple[dict, dict]) -> None:
    s, _ = run
    q = s["quality"]
    assert q["metric"] == "ndcg@10" and q["label"] == "hnswlib" and q["knob"] == "ef_search"
    assert q["knob_recall"] == s["backends"]["hnswlib"]["chosen"]["search"]["ef_search"]
    assert q["knob_quality"] is not None and q["quality"]["non_inferior"] is True
    assert q["quality"]["lower_bound"] > -0.01
    assert q["agree"] == (q["knob_recall"] == q["knob_quality"])
    for role in ("recall", "quality"):
        assert q[role]["distance_computations"] is None  # hnswlib has no counter
        assert q[role]["p50_ms"] > 0
