"""Topology (issue 31): segments built as independent indexes, their top-k merged; the study's
summary keys; the per-segment rule; the segment-count warning; spec validation."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.indexes.registry import create_index
from retrieval.stats.metrics import recall_by_id
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep
from retrieval.tune.topology import (
    SegmentedIndex,
    compare_segments,
    fit_segment_rule,
    merge_topk,
    split_rows,
)

K = 10


def blobs(n: int = 3000, nq: int = 120, d: int = 16, seed: int = 0) -> VectorDataset:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(60, d)).astype(np.float32) * 3
    base = centres[rng.integers(0, 60, n)] + rng.normal(size=(n, d)).astype(np.float32)
    queries = centres[rng.integers(0, 60, nq)] + rng.normal(size=(nq, d)).astype(np.float32)
    return VectorDataset.from_arrays(base, queries, "l2", name=f"topo-blobs{n}")


def test_split_rows_is_a_seeded_partition_of_the_base():
    parts = split_rows(1003, 8, seed=3)
    allrows = np.concatenate(parts)
    assert sorted(allrows.tolist()) == list(range(1003))
    assert {p.size for p in parts} <= {125, 126}
    assert all(np.array_equal(a, b) for a, b in zip(parts, split_rows(1003, 8, seed=3),
                                                    strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(parts, split_rows(1003, 8, seed=4),
                                                        strict=True))


def test_merge_pads_and_orders_by_distance():
    a = (np.array([[5, 7, -1]]), np.array([[0.5, 2.0, np.inf]]))
    b = (np.array([[1, -1, -1]]), np.array([[1.0, np.inf, np.inf]]))
    ids, dist = merge_topk([a, b], 4)
    assert ids.tolist() == [[5, 1, 7, -1]]
    assert dist[0, :3].tolist() == [0.5, 1.0, 2.0] and np.isinf(dist[0, 3])


@pytest.mark.parametrize("segments", [4, 9])
def test_segmented_hnswlib_recall_equals_a_numpy_merge_of_its_segment_results(segments):
    """N segments of hnswlib, merged top-k: the recall rwb computes equals the recall of an
    independent merge (numpy, per query) of the same per-segment results against numpy's
    exact neighbours."""
    rng = np.random.default_rng(2)  # unclustered 48-d: a small graph misses neighbours
    ds = VectorDataset.from_arrays(rng.normal(size=(3000, 48)).astype(np.float32),
                                   rng.normal(size=(100, 48)).astype(np.float32), "l2",
                                   name="topo-gauss")
    rows = split_rows(ds.n_base, segments, seed=1)
    seg = SegmentedIndex(lambda: create_index("hnswlib", ds.dim, "l2",
                                              {"M": 4, "ef_construction": 10}, seed=0), rows)
    seg.build(ds.base)
    seg.set_search_params(ef_search=10)
    try:
        per_segment = seg.search_segments(ds.queries, K)
        merged = seg.search(ds.queries, K)
    finally:
        seg.close()
    # every segment answered from its own rows (the caller's row positions kept)
    for (ids, _), r in zip(per_segment, rows, strict=True):
        assert np.isin(ids[ids >= 0], r).all()
    # the test's own merge: per query, all (distance, id) pairs sorted, first K ids
    mine = np.full((ds.n_queries, K), -1, dtype=np.int64)
    for q in range(ds.n_queries):
        pairs = sorted((float(d), int(i)) for ids, dist in per_segment
                       for i, d in zip(ids[q], dist[q], strict=True) if i >= 0)
        got = [i for _, i in pairs[:K]]
        mine[q, : len(got)] = got
    d2 = ((ds.queries[:, None, :] - ds.base[None, :, :]) ** 2).sum(-1)
    exact = np.argsort(d2, axis=1, kind="stable")[:, :K]
    numpy_recall = np.array([len(set(mine[q]) & set(exact[q])) / K
                             for q in range(ds.n_queries)])
    rwb_recall = recall_by_id(merged.ids, exact, K)
    assert rwb_recall.mean() == pytest.approx(numpy_recall.mean(), abs=1e-12)
    assert np.allclose(rwb_recall, numpy_recall)
    assert 0.3 < rwb_recall.mean() < 0.999  # an approximate index, not a brute force


def topology_spec(**topology):
    return parse_spec({
        "name": "topo", "dataset": "synthetic-small", "k": K, "target_recall": 0.95,
        "warmup": 0, "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "hnswlib", "build": {"M": 4, "ef_construction": 12},
                     "search": {"ef_search": 10}}],
        "topology": topology,
    }, source="topo.yaml")


def test_topology_study_summary_has_the_interface_keys(tmp_path):
    res = run_sweep(topology_spec(segments=[1, 4, 16], collection_segments=8), tmp_path / "run",
                    dataset=blobs(2000, 100))
    s = res.summary
    assert s["workload"] == "topology"
    assert [r["segments"] for r in s["topology"]] == [1, 4, 16]
    for r in s["topology"]:
        assert {"segments", "knob", "recall_lower", "recall_p5", "p50_ms", "p95_ms", "p99_ms",
                "rule_knob"} <= set(r)
        if r["knob"] is not None:
            assert r["recall_lower"] <= r["recall"] and r["recall_p5"] <= r["recall"]
            assert r["p50_ms"] <= r["p99_ms"]
            lo, hi = r["range"]
            assert lo <= r["knob"] <= hi
    assert any(r.get("maintain") for r in s["topology"] if r["segments"] > 1)
    assert "8 segments" in s["topology_info"]["segments_warning"]


def test_topology_spec_refuses_bad_counts_in_one_line():
    with pytest.raises(ConfigError) as e:
        topology_spec(segments=[0, 4])
    assert "topology.segments" in str(e.value) and "received 0" in str(e.value)
    with pytest.raises(ConfigError):
        topology_spec(segments=[4], shards=2)


def test_segment_rule_and_warning():
    rule = fit_segment_rule(64_000, [1, 4, 16, 64], [80, 40, 24, 14])
    assert rule is not None
    predicted = [rule.predict(s, 10, 1000) for s in (1, 4, 16, 64)]
    assert predicted == sorted(predicted, reverse=True)  # bigger segments need a larger knob
    assert fit_segment_rule(1000, [1, 4], [None, None]) is None
    assert compare_segments([1, 4], 4, "x") is None
    assert "has 7 segments" in (compare_segments([1, 4], 7, "x") or "")


def test_cli_prints_the_topology_table_and_report_draws_it(tmp_path, capsys):
    from retrieval.cli import main

    path = tmp_path / "topo.yaml"
    path.write_text("name: topo\ndataset: synthetic-small\nk: 10\ntarget_recall: 0.9\n"
                    "warmup: 0\nindex_build: {cache: false}\nindexes:\n"
                    "  - backend: faiss-hnsw\n    build: {M: 8, ef_construction: 40}\n"
                    "topology: {segments: [1, 4]}\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "topology study" in out and "merge Δrecall" in out
    assert main(["report", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "report_topology.png").is_file()
    assert "Recall vs segment count" in (tmp_path / "run" / "report.html").read_text()


def test_a_topology_whose_segments_cannot_be_built_is_said_and_the_others_run(tmp_path):
    s = parse_spec({
        "name": "topo-ivf", "dataset": "synthetic-small", "k": K, "target_recall": 0.9,
        "warmup": 0, "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "faiss-ivf", "build": {"nlist": 64}, "search": {"nprobe": 1}}],
        "topology": {"segments": [1, 64], "maintain": False},
    }, source="topo.yaml")
    rows = run_sweep(s, tmp_path / "run", dataset=blobs(2000, 60)).summary["topology"]
    one, many = rows
    assert one["knob"] is not None and "message" not in one
    assert many["knob"] is None and "nlist" in many["message"] and "64 segments" in many["message"]


def test_parallel_segment_search_merges_the_same_top_k():
    ds = blobs(1500, 40)
    rows = split_rows(ds.n_base, 6, seed=0)
    got = []
    for workers in (1, 2):
        seg = SegmentedIndex(lambda: create_index("faiss-hnsw", ds.dim, "l2", {"M": 8},
                                                  seed=0, threads=1), rows, workers=workers)
        seg.build(ds.base)
        seg.set_search_params(ef_search=16)
        got.append(seg.search(ds.queries, K).ids)
        seg.close()
    assert np.array_equal(got[0], got[1])


def test_eval_and_ray_refuse_a_topology_spec_in_one_line(tmp_path):
    from retrieval.tune.runner import run_eval

    with pytest.raises(ConfigError) as e:
        run_eval(topology_spec(segments=[1, 4]), tmp_path / "eval")
    assert "measured by rwb sweep" in str(e.value)
    with pytest.raises(ConfigError) as e:
        run_sweep(topology_spec(segments=[1, 4]), tmp_path / "ray", executor="ray")
    assert "--executor local" in str(e.value)
