"""The public Python API (`import retrieval`): each verb on tiny data, spec given as a path, a
mapping or a spec object, typed results with to_frame(), in-memory arrays; the CLI is untouched
(its own tests cover it). tune_rerank needs the shared SciFact data, tune_cache a Redis."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import retrieval
from retrieval.errors import ConfigError, DataError

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

ROOT = Path(__file__).resolve().parents[2]
TINY = {
    "name": "api-tiny",
    "k": 5,
    "warmup": 1,
    "batch_repeats": 1,
    "indexes": [
        {"backend": "faiss-flat"},
        {"backend": "faiss-ivf", "build": {"nlist": 8}, "search": {"nprobe": [1, 8]}},
    ],
}
NAMED = {**TINY, "dataset": {"name": "synthetic-small", "n": 1000, "n_queries": 60}}


def arrays(n: int = 400, nq: int = 30, dim: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, dim)), rng.standard_normal((nq, dim))


def test_import_retrieval_is_light():
    code = ("import sys, retrieval; retrieval.evaluate; retrieval.VectorDataset; "
            "print(sorted(m for m in ('numpy', 'pandas', 'faiss', 'optuna', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == "['numpy']"  # VectorDataset is numpy; the verbs load nothing heavy


def test_the_type_stub_names_exactly_the_public_names():
    tree = ast.parse((ROOT / "retrieval" / "__init__.pyi").read_text())
    stub = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom)
            for a in node.names}
    assert stub | {"__version__"} == set(retrieval.__all__)
    for name in retrieval.__all__:
        assert getattr(retrieval, name) is not None, name


def test_profile_is_a_verb_with_its_typed_results_whatever_was_imported_before():
    """``retrieval.profile`` stays the verb (a real signature) after the profiler's own package,
    :mod:`retrieval.profiling`, is imported; its typed results and spec come from the face."""
    code = ("import inspect, retrieval.profiling.run, retrieval; "
            "from retrieval import profile, ProfileRun, ProfileRunResult, ProfileSpec; "
            "import retrieval.api.profiler as m; "
            "assert retrieval.profile is profile is m.profile, retrieval.profile; "
            "sig = inspect.signature(retrieval.profile); "
            "assert issubclass(ProfileRunResult, retrieval.RunResult); "
            "assert ProfileSpec.model_config['extra'] == 'forbid'; "
            "print(list(sig.parameters)[:3], sig.return_annotation)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['spec', 'out', 'queries'] ProfileRun"
    for name in ("profile", "ProfileRun", "ProfileRunResult", "ProfileSpec"):
        assert name in retrieval.__all__ and name in dir(retrieval)


def test_from_arrays_checks_its_input():
    base, queries = arrays()
    ds = retrieval.VectorDataset.from_arrays(base, queries, "cosine", name="mine")
    assert (ds.n_base, ds.n_queries, ds.dim, ds.metric, ds.name) == (400, 30, 12, "cosine", "mine")
    assert ds.base.dtype == np.float32 and ds.gt_ids is None
    with pytest.raises(ConfigError, match="metric"):
        retrieval.VectorDataset.from_arrays(base, queries, "dot")
    with pytest.raises(DataError, match="query dimension 11 does not match base dimension 12"):
        retrieval.VectorDataset.from_arrays(base, queries[:, :11], "l2")
    bad = queries.copy()
    bad[3, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        retrieval.VectorDataset.from_arrays(base, bad, "l2")
    with pytest.raises(DataError, match="gt_ids: 2 rows for 30 queries"):
        retrieval.VectorDataset.from_arrays(base, queries, "l2", gt_ids=np.zeros((2, 5), int))
    with pytest.raises(DataError, match=r"ids must lie in \[0, 400\)"):
        retrieval.VectorDataset.from_arrays(base, queries, "l2",
                                            gt_ids=np.full((30, 5), 400))


def test_evaluate_in_memory_arrays_with_exact_ground_truth(tmp_path):
    base, queries = arrays()
    ds = retrieval.VectorDataset.from_arrays(base, queries, "l2")
    run = retrieval.evaluate(TINY, dataset=ds, out=tmp_path / "run")
    assert isinstance(run, retrieval.EvalRun) and run.path == tmp_path / "run"
    assert run.summary.dataset == "arrays" and run.summary.k == 5
    assert run.summary.dataset_fingerprint == ds.fingerprint
    frame = run.to_frame()
    assert len(frame) == 3 and {"backend", "search.nprobe", "recall", "p95_ms", "qps"} <= set(frame)
    flat = frame[frame.backend == "faiss-flat"].recall.iloc[0]
    assert flat == pytest.approx(1.0)  # exact search against exact ground truth
    ivf = frame[frame.backend == "faiss-ivf"].sort_values("search.nprobe").recall.tolist()
    assert ivf[0] < ivf[1] == pytest.approx(1.0)  # nprobe = nlist probes every list


def test_known_ground_truth_is_used_as_given(tmp_path):
    base, queries = arrays()
    wrong = np.tile(np.arange(5), (30, 1))  # deliberately not the true neighbours
    ds = retrieval.VectorDataset.from_arrays(base, queries, "l2", gt_ids=wrong)
    spec = {**TINY, "indexes": [{"backend": "faiss-flat"}]}
    recall = retrieval.evaluate(spec, dataset=ds, out=tmp_path / "r").to_frame().recall.iloc[0]
    assert recall < 0.5


def test_a_spec_as_path_mapping_or_object_gives_the_same_configs(tmp_path):
    from retrieval.tune.spec import parse_spec

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(NAMED))
    runs = [retrieval.evaluate(s, out=tmp_path / f"r{i}")
            for i, s in enumerate((path, str(path), NAMED, parse_spec(NAMED)))]
    keys = [sorted((r["backend"], str(r["search"])) for r in run.summary.rows) for run in runs]
    assert all(k == keys[0] for k in keys) and len(keys[0]) == 3
    assert {run.summary.dataset_fingerprint for run in runs} == {
        runs[0].summary.dataset_fingerprint}
    with pytest.raises(ConfigError, match="expected a YAML path, a mapping or a SweepSpec"):
        retrieval.evaluate(42)
    with pytest.raises(ConfigError, match="threads"):
        retrieval.evaluate(NAMED, threads=0, out=tmp_path / "bad")


def test_sweep_export_verify_report_open_run(tmp_path):
    spec = {**NAMED, "target_recall": 0.9, "tune": {"strategy": "grid", "heldout_fraction": 0.5}}
    tuned = retrieval.sweep(spec, out=tmp_path / "sweep")
    assert isinstance(tuned, retrieval.SweepRun) and tuned.summary.strategy == "grid"
    choices = tuned.choices()
    assert set(choices.label) == {"faiss-flat", "faiss-ivf"}
    ivf = choices[choices.label == "faiss-ivf"].iloc[0]
    assert ivf["search.nprobe"] == 8 and ivf.recall_lb >= 0.9  # nprobe 1 cannot reach 0.9
    assert len(tuned.to_frame()) == tuned.summary.evaluations == len(tuned.points())
    assert {c["label"] for c in tuned.chosen()} == {"faiss-flat", "faiss-ivf"}

    exported = retrieval.export(tuned, "faiss", tmp_path / "tuned.yaml", backend="faiss-ivf")
    assert isinstance(exported, retrieval.ExportedConfig) and exported.path.is_file()
    assert yaml.safe_load(exported.path.read_text())["kind"]
    assert exported.to_frame().iloc[0]["engine"] == "faiss"
    check = retrieval.verify(exported)
    assert isinstance(check, retrieval.Verification) and check.holds is True
    assert check.to_frame().iloc[0]["holds"]

    page = retrieval.report(tuned)
    assert page.html == tmp_path / "sweep" / "report.html" and page.html.is_file()
    files = page.to_frame()
    assert files.type.tolist()[0] == "html" and len(files) == 1 + len(page.pngs) >= 3

    again = retrieval.open_run(tmp_path / "sweep")
    assert isinstance(again, retrieval.SweepRun) and again.run_id == tuned.run_id
    assert again.to_frame().shape == tuned.to_frame().shape


def test_export_and_report_are_verbs_beside_their_packages(tmp_path):
    import retrieval.exporting.registry  # binds the subpackage on the package

    assert callable(retrieval.export) and callable(retrieval.report)
    assert retrieval.exporting.registry.engines()  # the subpackage, under its own name
    with pytest.raises(ConfigError, match="engine"):
        retrieval.export(tmp_path, "nope", tmp_path / "x.yaml")


@pytest.mark.slow
@pytest.mark.model
def test_tune_rerank_on_a_scifact_subset(tmp_path):
    from retrieval.loaders.shared import shared_folder

    try:
        shared_folder("scifact")
    except DataError as exc:
        pytest.skip(f"SciFact data folder absent: {exc}")
    # the shipped spec as a YAML path with a shorter depth grid and 1 timed query: the verb, its
    # overrides and its typed result are what is tested here (tests/rerank/test_tune_rerank_cli.py
    # runs the full grid and checks the curve). The timed rerank calls re-encode every passage:
    # depths up to 100 on 2 queries were ~45% of this run beyond embedding the corpus (which is
    # the bulk, ~4.5 min on 2 cores, and is shared through the cache with every later test that
    # embeds SciFact: test_tune_rerank_cli, notebook 03, test_rerank_golden, test_embed)
    spec = yaml.safe_load((ROOT / "sweeps" / "scifact-rerank.yaml").read_text())
    path = tmp_path / "scifact-rerank.yaml"
    path.write_text(yaml.safe_dump({**spec, "depths": [0, 5, 10, 20]}))
    run = retrieval.tune_rerank(path, out=tmp_path / "rr", max_queries=40, sample_queries=1)
    assert isinstance(run, retrieval.RerankRun) and run.summary.n_queries == 40
    frame = run.to_frame()
    depths = frame.depth.tolist()
    assert depths == [0, 5, 10, 20] and run.summary.chosen_depth in depths
    assert run.summary.latency_sample_queries == 1  # the override reached the timing
    rerank_ms = frame.set_index("depth")["latency.rerank_p50_ms"]
    assert rerank_ms[0] == 0 and rerank_ms[20] > 0
    assert {"tuning.ndcg@10", "heldout.ndcg@10", "latency.p50_ms"} <= set(frame)
    assert (tmp_path / "rr" / "summary.json").is_file()


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.model
def test_tune_cache_on_a_small_qqp_subset(tmp_path, redis_url):
    from retrieval.paths import data_dir

    if not (data_dir() / "gptcache_qqp").is_dir():
        pytest.skip(f"shared data folder {data_dir() / 'gptcache_qqp'} is absent")
    spec = {"name": "api-cache", "pairs": {"limit": 2000, "seed": 0},
            "cache": {"name": "rwb-test-api"},
            "latency": {"sizes": [1000], "queries": 50, "warmup": 5},
            "tuning": {"max_false_hit": 0.05}}
    run = retrieval.tune_cache(spec, redis_url=redis_url, out=tmp_path / "cache",
                               max_false_hit=0.03)
    assert isinstance(run, retrieval.CacheRun) and run.path == tmp_path / "cache"
    assert run.summary.max_false_hit == 0.03  # the override, not the spec's 0.05
    frame = run.to_frame()
    assert {"threshold", "split", "hit_rate", "false_hit_rate"} <= set(frame)
    if run.summary.threshold is not None:
        assert run.summary.false_hit_upper_bound <= 0.03


def test_api_refuses_a_non_empty_out_unless_forced(tmp_path):
    """The verbs take ``force`` like the CLI's --force: a second evaluate into the same folder is
    refused (one ConfigError naming force=True), and allowed with force=True."""
    base, queries = arrays()
    ds = retrieval.VectorDataset.from_arrays(base, queries, "l2")
    out = tmp_path / "ev"
    retrieval.evaluate(TINY, dataset=ds, out=out)
    with pytest.raises(ConfigError, match=r"force=True"):
        retrieval.evaluate(TINY, dataset=ds, out=out)
    again = retrieval.evaluate(TINY, dataset=ds, out=out, force=True)
    assert again.path == out and len(again.to_frame()) > 0
    foreign = tmp_path / "mine.yaml"
    foreign.write_text("my: own\n")
    with pytest.raises(ConfigError, match=r"not written by rwb"):
        retrieval.report(again, foreign)
    assert foreign.read_text() == "my: own\n"


def test_dataset_repr_and_dir_stay_short():
    base, queries = arrays(n=50, nq=5, dim=4)
    ds = retrieval.VectorDataset.from_arrays(base, queries, "cosine", name="mine")
    text = repr(ds)
    assert "(50, 4)" in text and "(5, 4)" in text and len(text) < 200
    names = dir(retrieval)
    assert "evaluate" in names and "VectorDataset" in names
    assert not {"Any", "sys", "importlib", "annotations"} & set(names)


def test_typed_spec_objects_and_frames_typed_like_the_parquet_files(tmp_path):
    """A typed spec object (exported from ``retrieval``) runs like its mapping; ``to_frame()``
    has the parquet files' dotted, typed columns (``search.nprobe`` Int64 with <NA> where a
    backend has no such knob)."""
    base, queries = arrays()
    ds = retrieval.VectorDataset.from_arrays(base, queries, "l2")
    spec = retrieval.SweepSpec(name="typed", k=5, dataset="arrays", warmup=1, batch_repeats=1,
                               indexes=[retrieval.IndexEntry(backend="faiss-flat"),
                                        TINY["indexes"][1]])
    run = retrieval.evaluate(spec, dataset=ds, out=tmp_path / "ev")
    frame = run.to_frame()
    parquet = pd.read_parquet(tmp_path / "ev" / "measurements.parquet")
    assert len(frame) == 3 and "search" not in frame
    for col in ("backend", "recall", "p95_ms", "memory_bytes", "build.nlist", "search.nprobe"):
        assert frame[col].dtype == parquet[col].dtype, col
    assert str(frame["search.nprobe"].dtype) == "Int64"
    assert frame["search.nprobe"].isna().sum() == 1
    tuned = retrieval.sweep(spec.model_copy(update={"name": "typed-sweep"}), dataset=ds,
                            out=tmp_path / "sw", strategy="grid")
    frame = tuned.to_frame()
    parquet = pd.read_parquet(tmp_path / "sw" / "trials.parquet")
    assert list(frame.columns) == [c for c in parquet.columns if c != "run_id"]
    assert (frame.dtypes == parquet.drop(columns="run_id").dtypes).all()
    with pytest.raises(retrieval.ConfigError, match="rerank spec"):
        retrieval.tune_rerank(42)
    bad = retrieval.RerankSweepSpec.model_construct(dataset="no-such-collection")
    with pytest.raises(retrieval.RwbError):
        retrieval.tune_rerank(bad)  # a typed object is validated like its YAML
