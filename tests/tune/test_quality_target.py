"""A target in the user's metric (issue 32 item 2): ``target: {ndcg_non_inferior: M}`` in sweep
specs, the cheapest knob whose nDCG@10 against the qrels is non-inferior to exact search's by a
paired one-sided t-test, reported beside the recall-0.95 choice (``knob_recall``,
``knob_quality``, ``agree``) with both costs.

The built case: near-duplicate queries whose only relevant document is the query's own source
vector (the exact top 1), so ranks 2-10 do not matter for nDCG@10 while recall@10 0.95 needs a
larger ef. Faiss HNSW (M 16, one build thread, seeded) finds the near duplicate at every ef of
the range on these 40 tuning queries (checked first, independently of the tuner)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from retrieval.cli.cmd_sweep import print_result
from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.tune.quality import non_inferiority
from retrieval.tune.spec import parse_spec
from retrieval.tune.summary import SweepSummary
from retrieval.tune.sweep import run_sweep

N, NQ = 2000, 80


def near_duplicates(dim: int, seed: int = 0) -> tuple[VectorDataset, dict[str, dict[str, int]],
                                                       np.ndarray]:
    """Gaussian base vectors; each query a source vector plus 0.05 noise, judged relevant
    (grade 1) to that source alone. Ids are the caller's (``d<row>`` / ``q<i>``)."""
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((N, dim)).astype("float32")
    src = rng.choice(N, NQ, replace=False)
    queries = base[src] + 0.05 * rng.standard_normal((NQ, dim)).astype("float32")
    ds = VectorDataset.from_arrays(base, queries, metric="l2", name=f"near-dup-{dim}",
                                   ids=np.array([f"d{i}" for i in range(N)]),
                                   query_ids=np.array([f"q{i}" for i in range(NQ)]))
    qrels = {f"q{i}": {f"d{int(s)}": 1} for i, s in enumerate(src)}
    return ds, qrels, src


def spec_doc(**over: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "name": "quality", "dataset": "synthetic-small", "k": 10, "warmup": 0,
        "batch_repeats": 1, "target": {"ndcg_non_inferior": 0.01},
        "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "faiss-hnsw", "build": {"M": 16, "ef_construction": 100},
                     "search": {"ef_search": 10}}],
        "tune": {"search_range": {"ef_search": [10, 128]}},
    }
    doc.update(over)
    return doc


# --- the test itself, by hand -------------------------------------------------------------------
def test_non_inferiority_is_the_paired_one_sided_t_test_computed_by_hand() -> None:
    d = [0.0, -0.1, 0.05, 0.0, -0.02]
    mean = -0.014
    sd = math.sqrt((0.014**2 + 0.086**2 + 0.064**2 + 0.014**2 + 0.006**2) / 4)
    t95_df4 = 2.131847  # one-sided 95% quantile of Student's t, 4 degrees of freedom (table)
    lower = mean - t95_df4 * sd / math.sqrt(5)
    assert lower == pytest.approx(-0.066045, abs=1e-6)
    r = non_inferiority(d, margin=0.05, alpha=0.05)
    assert r.n == 5 and r.mean_diff == pytest.approx(mean) and r.sd == pytest.approx(sd)
    assert r.lower_bound == pytest.approx(lower, abs=1e-6)
    assert not r.holds and r.p_value > 0.05  # -0.066 <= -0.05: inferior not ruled out
    wide = non_inferiority(d, margin=0.07, alpha=0.05)
    assert wide.holds and wide.p_value < 0.05  # -0.066 > -0.07
    # the p-value is alpha exactly where the bound meets the margin
    edge = non_inferiority(d, margin=-lower, alpha=0.05)
    assert edge.p_value == pytest.approx(0.05, abs=1e-6)


def test_non_inferiority_without_spread_or_without_queries() -> None:
    same = non_inferiority([0.0] * 10, margin=0.005)
    assert same.holds and same.lower_bound == 0.0 and same.p_value == 0.0
    worse = non_inferiority([-0.01] * 10, margin=0.005)
    assert not worse.holds and worse.p_value == 1.0
    one = non_inferiority([0.0], margin=0.005)
    assert not one.holds and one.lower_bound is None


# --- the spec ---------------------------------------------------------------------------------
def test_spec_target_defaults_the_recall_target_and_keeps_old_dumps() -> None:
    spec = parse_spec(spec_doc())
    assert spec.target is not None and spec.target.ndcg_non_inferior == 0.01
    assert spec.target.alpha == 0.05 and spec.target_recall == 0.95
    assert spec.tune.strategy == "target"
    assert parse_spec(spec_doc(target_recall=0.9)).target_recall == 0.9
    plain = spec_doc(target_recall=0.9)
    plain.pop("target")
    assert "target" not in parse_spec(plain).model_dump(mode="json")


@pytest.mark.parametrize("key, metric, depth", [
    ("ndcg_non_inferior", "ndcg@10", 10), ("mrr_non_inferior", "mrr@10", 10),
    ("recall@100_non_inferior", "recall@100", 100)])
def test_each_metric_key_reads_and_dumps_as_written(key: str, metric: str, depth: int) -> None:
    spec = parse_spec(spec_doc(target={key: 0.02}, k=100, tune={}, indexes=[
        {"backend": "faiss-hnsw", "build": {"M": 16}, "search": {"ef_search": 100}}]))
    assert spec.target is not None
    assert (spec.target.key, spec.target.metric, spec.target.depth) == (key, metric, depth)
    assert spec.target.margin == 0.02
    dumped = spec.model_dump(mode="json")
    assert dumped["target"] == {key: 0.02, "alpha": 0.05}
    assert parse_spec(dumped).target == spec.target  # spec.yaml reloads


@pytest.mark.parametrize("target, word", [
    ({"ndcg_non_inferior": 0}, "ndcg_non_inferior"),
    ({"ndcg_non_inferior": 0.01, "mrr": 0.1}, "mrr"),
    ({"ndcg_non_inferior": 0.01, "mrr_non_inferior": 0.01}, "exactly one of"),
    ({"alpha": 0.1}, "exactly one of"),
    ({"recall_at_100_non_inferior": 0.01}, "recall_at_100_non_inferior"),
])
def test_spec_target_is_checked(target: dict[str, object], word: str) -> None:
    with pytest.raises(ConfigError, match=word):
        parse_spec(spec_doc(target=target))


def test_a_quality_target_without_qrels_is_refused_in_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError) as exc:
        run_sweep(parse_spec(spec_doc()), tmp_path / "a")
    msg = str(exc.value)
    assert "\n" not in msg and "field 'target'" in msg and "qrels" in msg
    assert "kind synthetic" in msg and "synthetic-small" in msg
    assert not (tmp_path / "a").exists()  # refused before anything was written
    ds, _, _ = near_duplicates(8)
    reuters = {"kind": "text", "collection": "reuters", "n_queries": 10}
    with pytest.raises(ConfigError, match="collection reuters: no relevance judgments"):
        run_sweep(parse_spec(spec_doc(dataset=reuters)), tmp_path / "r")
    assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigError, match="qrels= given with an in-memory dataset"):
        run_sweep(parse_spec(spec_doc()), tmp_path / "b", dataset=ds)
    with pytest.raises(ConfigError, match=r"tune\.strategy must be target"):
        run_sweep(parse_spec(spec_doc(tune={"strategy": "grid"})), tmp_path / "c")
    with pytest.raises(ConfigError, match="'k' must be >= 10"):
        run_sweep(parse_spec(spec_doc(k=5)), tmp_path / "d")
    with pytest.raises(ConfigError,
                       match=r"'k' must be >= 100 with a quality target \(recall@100 needs 100"):
        run_sweep(parse_spec(spec_doc(target={"recall@100_non_inferior": 0.01})),
                  tmp_path / "e")


def test_rwb_sweep_refuses_it_with_exit_2(tmp_path, capsys) -> None:
    import yaml

    from retrieval.cli import main

    path = tmp_path / "q.yaml"
    path.write_text(yaml.safe_dump(spec_doc()))
    assert main(["sweep", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: field 'target'" in err and "qrels" in err


# --- the choice -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def top1(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    ds, qrels, _ = near_duplicates(32)
    out = tmp_path_factory.mktemp("q") / "run"
    return run_sweep(parse_spec(spec_doc()), out, dataset=ds, qrels=qrels).summary, out


@pytest.fixture(scope="module")
def top1_run(top1: tuple[dict, Path]) -> dict:
    return top1[0]


def test_the_case_is_built_as_assumed() -> None:
    """Independently of the tuner: the near duplicate is Faiss HNSW's top 1 at the lowest ef
    on every query, while recall@10 there is below 0.95."""
    import faiss

    ds, _, src = near_duplicates(32)
    index = faiss.IndexHNSWFlat(32, 16)
    index.hnsw.efConstruction = 100
    index.hnsw.rng = faiss.RandomGenerator(0)
    faiss.omp_set_num_threads(1)
    index.add(ds.base)
    _, got = index.search(ds.queries, 10, params=faiss.SearchParametersHNSW(efSearch=10))
    exact = faiss.IndexFlatL2(32)
    exact.add(ds.base)
    _, truth = exact.search(ds.queries, 10)
    assert (truth[:, 0] == src).all() and (got[:, 0] == src).all()
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, truth)])
    assert recall < 0.95


def test_nDCG_needs_a_smaller_knob_than_recall_0_95(top1_run: dict) -> None:
    q = SweepSummary.model_validate(top1_run).quality
    assert q is not None and q.metric == "ndcg@10" and q.margin == 0.01
    assert q.knob == "ef_search" and q.label == "faiss-hnsw"
    assert q.knob_recall is not None and q.knob_quality is not None
    assert q.knob_quality < q.knob_recall and q.agree is False
    assert q.knob_quality == 10  # the near duplicate is found at the range's bottom
    assert q.knob_recall == top1_run["backends"]["faiss-hnsw"]["chosen"]["search"]["ef_search"]
    assert q.exact == 1.0 and q.n_queries == 40
    assert q.quality is not None and q.recall is not None
    assert q.quality.non_inferior and q.quality.value == 1.0 and q.quality.mean_diff == 0.0
    # costs: Faiss counts distance computations; the smaller knob computes fewer
    assert q.quality.distance_computations is not None and q.recall.distance_computations
    assert 0 < q.quality.distance_computations < q.recall.distance_computations
    assert q.quality.p50_ms is not None and q.recall.p50_ms is not None
    assert q.quality.recall is not None and q.quality.recall < 0.95


def test_an_mrr_target_is_solved_the_same_way(tmp_path) -> None:
    ds, qrels, _ = near_duplicates(32)
    spec = parse_spec(spec_doc(target={"mrr_non_inferior": 0.01}))
    q = run_sweep(spec, tmp_path / "run", dataset=ds, qrels=qrels).summary["quality"]
    assert q["metric"] == "mrr@10" and q["exact"] == 1.0
    assert q["knob_quality"] == 10 < q["knob_recall"] and q["agree"] is False
    assert q["quality"]["value"] == 1.0 and q["quality"]["non_inferior"] is True


def test_a_recall_at_100_target_reads_100_results(tmp_path) -> None:
    ds, qrels, _ = near_duplicates(32)
    spec = parse_spec(spec_doc(target={"recall@100_non_inferior": 0.01}, k=100, indexes=[
        {"backend": "faiss-hnsw", "build": {"M": 16, "ef_construction": 100},
         "search": {"ef_search": 100}}], tune={"search_range": {"ef_search": [100, 256]}}))
    q = run_sweep(spec, tmp_path / "run", dataset=ds, qrels=qrels).summary["quality"]
    assert q["metric"] == "recall@100" and q["exact"] == 1.0
    assert q["knob_quality"] == 100 and q["quality"]["value"] == 1.0


def test_the_sweep_printer_shows_both_knobs(top1_run: dict, capsys) -> None:
    print_result(top1_run, "runs/x")
    out = capsys.readouterr().out
    assert "quality target: ndcg@10 non-inferior to exact search by 0.01" in out
    assert "knob_recall" in out and "knob_quality" in out and "ef_search=10" in out


def test_they_agree_when_recall_is_met_at_the_bottom_too(tmp_path) -> None:
    """Low dimension: recall@10 is already met at ef 10, and so is nDCG (through the public
    API's ``sweep(..., dataset=, qrels=)``)."""
    from retrieval.api import sweep

    ds, qrels, _ = near_duplicates(4, seed=1)
    run = sweep(spec_doc(), out=tmp_path / "run", dataset=ds, qrels=qrels)  # the public API
    q = run.summary.to_json_dict()["quality"]
    assert q["knob_recall"] == q["knob_quality"] == 10 and q["agree"] is True
    assert q["recall"]["search"] == q["quality"]["search"] == {"ef_search": 10}


def test_the_report_has_a_quality_table(top1: tuple[dict, Path]) -> None:
    from retrieval.reporting.kinds.index import sweep_tables
    from retrieval.reporting.load import load_run

    run = load_run(top1[1])
    tables = dict(sweep_tables(run))
    t = tables["Quality target"]
    assert [r[1] for r in t.rows] == ["knob_recall", "knob_quality"]
    assert t.rows[1][2] == 10 and t.rows[0][2] > 10 and t.rows[1][8] is False
    assert "paired one-sided t-test" in t.caption


def test_an_export_carries_the_quality_evidence(top1: tuple[dict, Path], tmp_path) -> None:
    import yaml

    from retrieval.api import export

    export(top1[1], "faiss", tmp_path / "faiss.yaml")
    doc = yaml.safe_load((tmp_path / "faiss.yaml").read_text())
    q = doc["evidence"]["quality"]
    assert q["knob_quality"] == 10 and q["knob_recall"] > 10 and q["agree"] is False
    assert q["at_knob_quality"]["distance_computations"] > 0
