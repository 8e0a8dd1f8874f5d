"""``scale.sampling: cells``: samples of whole k-means cells (nested, every row in one cell,
sizes near the asked ones), the query membership rule, and the point of it: the smallest
sample keeps the full collection's local density where a uniform one thins it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.tune import scale as sc
from retrieval.tune import scale_cells as cells
from retrieval.tune.spec import SweepSpec, parse_spec
from tests.helpers import one_line

N, D, CENTRES, NQ, K = 8000, 16, 40, 200, 10
SIZES = [500, 1000, 2000]  # 1/16, 1/8, 1/4


def _blobs() -> VectorDataset:
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(CENTRES, D)).astype(np.float32) * 6
    base = centres[rng.integers(0, CENTRES, N)] + rng.normal(size=(N, D)).astype(np.float32)
    queries = centres[rng.integers(0, CENTRES, NQ)] + rng.normal(size=(NQ, D)).astype(np.float32)
    return VectorDataset.from_arrays(base, queries, "l2", name="blobs-cells")


def _knn(base: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest (rows, squared L2 distances), brute force."""
    d = (queries ** 2).sum(1)[:, None] - 2 * queries @ base.T + (base ** 2).sum(1)[None, :]
    rows = np.argsort(d, axis=1)[:, :k]
    return rows, np.take_along_axis(d, rows, axis=1)


Plan = tuple[VectorDataset, np.ndarray, np.ndarray, cells.CellPlan]


@pytest.fixture(scope="module")
def plan() -> Plan:
    ds = _blobs()
    tune = np.arange(0, NQ, 2)
    neighbours, _ = _knn(ds.base, ds.queries[tune], K)
    return ds, tune, neighbours, cells.plan_cells(ds, SIZES, 7, tune, neighbours)


def test_the_cell_count_rule() -> None:
    assert cells.cell_count(8000, 500) == 64  # 4 * N / smallest
    assert cells.cell_count(1000, 500) == 16  # at least 16
    assert cells.cell_count(10**9, 1000) == 4096  # at most 4096
    assert cells.cell_count(10, 1) == 10  # never more cells than rows


def test_samples_are_whole_nested_cells_of_about_the_asked_size(plan: Plan) -> None:
    ds, tune, _, p = plan
    count = p.summary["count"]
    assert count == cells.cell_count(N, min(SIZES))
    km = cells.kmeans_cells(ds, count, 7)  # seeded: the same partition again
    assert km.of_row.shape == (N,) and km.of_row.min() >= 0 and km.of_row.max() < count
    assert km.sizes().sum() == N  # every base row in exactly one cell
    for small, big in zip(p.rows, p.rows[1:], strict=False):
        assert np.isin(small, big).all() and big.size > small.size  # nested, growing
    for r, want, row in zip(p.rows, SIZES, p.summary["samples"], strict=True):
        assert np.unique(r).size == r.size and r.max() < N
        kept = np.unique(km.of_row[r])
        assert np.isin(np.flatnonzero(np.isin(km.of_row, kept)), r).all()  # whole cells
        assert row["cells"] == kept.size and row["n"] == r.size
        assert abs(r.size - want) <= 0.5 * want  # whole cells: near, not exact
    # the cells holding more tuning queries come first
    order = cells.cell_order(count, km.home[tune], 7)
    held = np.bincount(km.home[tune], minlength=count)[order]
    assert (np.diff(held) <= 0).all() and held[0] > 0


def test_a_sample_judges_the_queries_whose_full_n_neighbours_it_holds(plan: Plan) -> None:
    _, _, neighbours, p = plan
    for r, q, row in zip(p.rows, p.queries, p.summary["samples"], strict=True):
        inside = np.isin(neighbours, r).all(axis=1)
        assert np.array_equal(np.flatnonzero(inside), q)  # rule knn, exactly
        assert row["tuning_queries"] == q.size > 0 and row["query_rule"] == "knn"
    assert all(np.isin(a, b).all() for a, b in zip(p.queries, p.queries[1:], strict=False))


def test_home_rule_and_padding() -> None:
    of_row = np.array([0, 0, 1, 1, 2])
    kept = np.array([True, False, True])
    nb = np.array([[0, 1], [0, 2], [4, -1]])  # rows 0, 1: cell 0; row 2: cell 1; -1: padding
    assert cells.judged(nb, np.array([0, 1, 2]), kept, of_row, "knn").tolist() == [
        True, False, True]
    assert cells.judged(nb, np.array([0, 1, 2]), kept, of_row, "home").tolist() == [
        True, False, True]
    assert cells.judged(nb, np.array([1, 0, 0]), kept, of_row, "home").tolist() == [
        False, True, True]


def test_the_smallest_cells_sample_keeps_the_local_density(plan: Plan) -> None:
    """Mean k-NN distance of the judged tuning queries inside the smallest sample: cells' equals
    the full N's (whole clusters kept); a uniform sample of the same size is sparser."""
    ds, tune, _, p = plan
    rows, judged = p.rows[0], p.queries[0]
    q = ds.queries[tune[judged]]
    _, full_d = _knn(ds.base, q, K)
    _, cell_d = _knn(ds.base[rows], q, K)
    uniform = sc.nested_rows(N, [rows.size], 7)[0]
    _, uni_d = _knn(ds.base[uniform], q, K)
    full_m, cell_m, uni_m = (float(np.sqrt(np.maximum(x, 0)).mean())
                             for x in (full_d, cell_d, uni_d))
    assert cell_m == pytest.approx(full_m, rel=0.02)
    assert uni_m > 1.15 * full_m  # a 1/16 uniform sample thins every cluster


def test_curve_columns_map_a_draw_of_tuning_positions() -> None:
    c = sc.Curve(100, (10, 20), np.array([[1.0, 0.0], [1.0, 1.0]]), (0.0, 0.0), 40,
                 np.array([3, 5]))
    assert c.columns(np.array([3, 3, 4, 5])).tolist() == [0, 0, 1]
    assert c.columns(np.array([0, 1])).tolist() == [0, 1]  # judged none of the draw: all
    assert c.knob(1.0, np.array([3, 3])) == 10 and c.knob(1.0) == 20


def _spec(sampling: str) -> SweepSpec:
    return parse_spec({"name": "cells", "dataset": "synthetic-small", "target_recall": 0.9,
                       "indexes": [{"backend": "hnswlib"}], "tune": {"strategy": "target"},
                       "scale": {"fractions": [0.25, 0.5], "sampling": sampling}},
                      source="cells.yaml")


def test_the_spec_names_the_allowed_samplings() -> None:
    scale = _spec("cells").scale
    assert scale is not None and scale.sampling == "cells"
    with pytest.raises(ConfigError) as err:
        _spec("clusters")
    one_line(err, "cells.yaml", "scale.sampling", "'uniform', 'neighbourhood' or 'cells'",
             "'clusters'")


@pytest.mark.slow
def test_a_study_with_cells_reports_its_cells_and_the_queries_each_sample_judged(
        tmp_path: Path) -> None:
    from retrieval.tune.sweep import run_sweep

    spec = parse_spec({
        "name": "cells", "dataset": "synthetic-small", "k": K, "target_recall": 0.9,
        "warmup": 0, "batch_repeats": 1, "modes": ["batch"],
        "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "hnswlib", "build": {"M": 12, "ef_construction": 60},
                     "search": {"ef_search": 10}}],
        "scale": {"fractions": ["1/16", "1/8", "1/4"], "bootstrap": 20, "sampling": "cells"},
        "tune": {"strategy": "target", "objective": "qps"},
    }, source="cells.yaml")
    s = run_sweep(spec, tmp_path / "run", dataset=_blobs()).summary
    c = s["scale"]["cells"]
    assert s["scale"]["sampling"] == "cells" and c["count"] == cells.cell_count(N, 500)
    assert c["tuning_queries"] == s["queries"]["tuning"]
    assert [x["n"] for x in c["samples"]] == s["scale"]["sizes"]
    judged = [x["tuning_queries"] for x in c["samples"]]
    assert 0 < judged[0] <= judged[1] <= judged[2] < c["tuning_queries"]
    b = s["builds"][0]
    assert [r["n"] for r in b["samples"]] == s["scale"]["sizes"]
    assert b["exact"] is not None and b["transfer_error"] is not None
