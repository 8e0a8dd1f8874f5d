"""Plot functions: headless figures with labelled axes (units), legends, log scales where the
ann-benchmarks convention uses them, and the target drawn; empty inputs say why."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.figure import Figure

from retrieval.reporting import ann, rag
from retrieval.reporting.points import cheapest_meeting, series_name
from retrieval.reporting.style import TARGET_COLOR, png_bytes


def _points() -> list[dict]:
    pts = []
    for m, scale in ((8, 1.0), (16, 1.4)):
        for ef, rec in ((10, 0.80), (20, 0.90), (40, 0.96), (80, 0.99)):
            pts.append({"backend": "hnswlib", "build": {"M": m, "ef_construction": 40},
                        "search": {"ef_search": ef}, "recall": min(1.0, rec + (m - 8) / 400),
                        "p95_ms": 0.01 * ef * scale, "qps": 1e5 / (ef * scale),
                        "build_s": 0.5 * scale, "memory_bytes": int(2e6 * scale)})
    for nlist in (16, 64):
        for nprobe, rec in ((1, 0.7), (4, 0.93), (16, 0.99)):
            pts.append({"backend": "faiss-ivf", "build": {"nlist": nlist},
                        "search": {"nprobe": nprobe}, "recall": rec - nlist / 10_000,
                        "p95_ms": 0.02 * nprobe * 64 / nlist, "qps": 5e4 / nprobe,
                        "build_s": 0.1, "memory_bytes": 1_500_000})
    return pts


def _target_lines(fig: Figure) -> list:
    return [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_color() == TARGET_COLOR]


def _check_axes(ax) -> None:
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()


def test_recall_vs_latency_log_x_front_target_and_chosen():
    pts = _points()
    chosen = cheapest_meeting(pts, 0.95)
    fig = ann.recall_vs_latency(pts, k=10, target=0.95, chosen=chosen)
    ax = fig.axes[0]
    _check_axes(ax)
    assert "ms" in ax.get_xlabel() and ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("Pareto front" in t for t in labels)
    assert any("target" in t for t in labels)
    assert len({series_name(p) for p in pts}) + 3 == len(labels)  # series, front, chosen, target
    (target,) = _target_lines(fig)
    assert set(target.get_ydata()) == {0.95}
    assert png_bytes(fig)[:8] == b"\x89PNG\r\n\x1a\n"


def test_recall_vs_qps_log_y_and_vertical_target():
    fig = ann.recall_vs_qps(_points(), k=10, target=0.9)
    ax = fig.axes[0]
    _check_axes(ax)
    assert ax.get_yscale() == "log" and "queries per second" in ax.get_ylabel()
    (target,) = _target_lines(fig)
    assert set(target.get_xdata()) == {0.9}


def test_cheapest_meeting_is_per_backend_lowest_p95():
    chosen = {c["backend"]: c for c in cheapest_meeting(_points(), 0.95)}
    assert chosen["hnswlib"]["search"] == {"ef_search": 40}
    assert chosen["hnswlib"]["build"]["M"] == 8
    assert chosen["faiss-ivf"]["search"] == {"nprobe": 16}
    assert cheapest_meeting(_points(), None) == []
    assert [c["search"] for c in cheapest_meeting(_points(), 0.9999)] == [{"ef_search": 80}]


def test_per_query_recall_counts_each_level():
    values = np.array([1.0] * 90 + [0.9] * 6 + [0.5] * 3 + [0.0])
    fig = ann.per_query_recall(values, k=10, target=0.95, config="x")
    ax = fig.axes[0]
    _check_axes(ax)
    heights = {round(p.get_x() + p.get_width() / 2, 3): p.get_height() for p in ax.patches
               if p.get_height() > 0}
    assert heights == {1.0: 0.9, 0.9: 0.06, 0.5: 0.03, 0.0: 0.01}
    assert _target_lines(fig)


def test_empty_inputs_render_a_message_not_an_error():
    for fig in (ann.recall_vs_latency([], k=10), ann.recall_vs_qps([], k=10),
                ann.per_query_recall([], k=10), rag.rerank_depth_curve({}),
                rag.cache_curve({}), rag.fanout_speedups({}), rag.embed_batch_sweep([])):
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert any(t.startswith("no ") for t in texts)


def test_param_surface_search_axis_outlines_cells_meeting_target():
    ivf = [p for p in _points() if p["backend"] == "faiss-ivf"]
    fig = ann.param_surface(ivf, "build.nlist", "search.nprobe", k=10, target=0.95)
    recall_ax = fig.axes[0]
    assert recall_ax.get_xlabel() == "nprobe" and recall_ax.get_ylabel() == "nlist"
    outlined = [p for p in recall_ax.patches if p.get_edgecolor()[:3] != (0, 0, 0)]
    assert len(outlined) == 2  # nprobe=16 for both nlist values
    titles = [ax.get_title() for ax in fig.axes]
    assert any("build time" in t for t in titles) and any("memory" in t for t in titles)


def test_param_surface_two_build_params():
    hnsw = [p for p in _points() if p["backend"] == "hnswlib"]
    for p in hnsw:
        p["build"] = {**p["build"], "ef_construction": 40 if p["build"]["M"] == 8 else 100}
    fig = ann.param_surface(hnsw, "build.M", "build.ef_construction", k=10, target=0.95)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "0.990" in texts  # most accurate ef for M=8
    assert fig.axes[0].get_xlabel() == "ef_construction"


def test_param_surface_unknown_column_says_so():
    fig = ann.param_surface(_points(), "build.nope", "search.nprobe")
    assert any("build.nope" in t.get_text() for ax in fig.axes for t in ax.texts)


def test_rerank_curve_draws_tolerance_band_and_chosen_depth():
    curve = [{"depth": d, "tuning": {"ndcg@10": q}, "heldout": {"ndcg@10": q - 0.01},
              "latency": {"p50_ms": 5 + d, "p95_ms": 8 + 2 * d}}
             for d, q in ((0, 0.60), (10, 0.66), (20, 0.67), (50, 0.671))]
    fig = rag.rerank_depth_curve({"curve": curve, "chosen_depth": 20, "tolerance": 0.005,
                                  "selection_metric": "ndcg@10", "sweep_first_stage": "bm25"})
    (band,) = _target_lines(fig)
    assert band.get_ydata()[0] == pytest.approx(0.671 - 0.005)
    assert fig.axes[1].get_yscale() == "log"
    for ax in fig.axes:
        _check_axes(ax)


def test_cache_curve_cap_and_threshold():
    rows = [{"threshold": t, "threshold_unit": "cosine_distance", "split": s,
             "hit_rate": t, "correct_hit_rate": t / 2, "false_hit_rate": t / 4,
             "false_hit_upper_bound": t / 3, "precision": 0.5}
            for s in ("tuning", "heldout") for t in np.linspace(0, 0.4, 21)]
    fig = rag.cache_curve({"curve": rows, "threshold": 0.15, "max_false_hit": 0.05,
                           "bound": "wilson", "confidence": 0.95})
    (cap,) = _target_lines(fig)
    assert set(cap.get_ydata()) == {0.05}
    assert "cosine distance" in fig.axes[0].get_xlabel()


def test_fanout_and_embed_goal_lines():
    fan = {"modes": {"serial": {"p50_ms": 3.0, "p95_ms": 4.0},
                     "threads": {"p50_ms": 1.6, "p95_ms": 2.4, "speedup_p50": 1.875}},
           "collections": [{"backend": "hnswlib"}] * 3, "n_queries": 10, "k": 10}
    fig = rag.fanout_speedups(fan)
    assert set(_target_lines(fig)[0].get_ydata()) == {rag.FANOUT_SPEEDUP_GOAL}
    rows = [{"mode": "single", "batch_size": 1, "texts_per_s": 100.0, "dtype": "fp32"},
            *[{"mode": m, "batch_size": b, "texts_per_s": 100.0 * b ** 0.5,
               "call_p95_ms": b * 2.0, "padding_waste": 0.1, "dtype": "fp32"}
              for m in ("batch", "sorted") for b in (8, 32, 128)],
            {"mode": "tokens", "token_budget": 4096, "mean_batch": 50, "texts_per_s": 700.0,
             "dtype": "fp32"},
            {"mode": "library", "batch_size": 32, "texts_per_s": 500.0, "dtype": "fp32"}]
    fig = rag.embed_batch_sweep(rows, {"best_setting": "batch-128", "speedup": 11.3})
    assert set(_target_lines(fig)[0].get_ydata()) == {100.0 * rag.EMBED_SPEEDUP_GOAL}
    assert fig.axes[0].get_xscale() == "log"


def _n_plotted(ax) -> int:
    """Points drawn on ``ax``: scatter offsets plus line vertices."""
    n = sum(len(c.get_offsets()) for c in ax.collections)
    return n + sum(len(ln.get_xdata()) for ln in ax.get_lines()
                   if ln.get_marker() not in (None, "", "None"))


def test_recall_vs_latency_draws_points_without_p95_beside_the_timed_ones():
    pts = _points()
    steps = [{**p, "p95_ms": None} for p in pts[:5]]  # a sweep's search steps
    timed_pts = pts[5:]
    fig = ann.recall_vs_latency([*steps, *timed_pts], k=10, target=0.95)
    main_ax, side = fig.axes[0], fig.axes[1]
    assert _n_plotted(main_ax) == len(timed_pts)
    assert _n_plotted(side) == len(steps)
    assert sorted(float(y) for c in side.collections for _, y in c.get_offsets()) == sorted(
        p["recall"] for p in steps)
    assert "search steps" in side.get_title()
    # a run of steps only still shows them
    fig = ann.recall_vs_latency(steps, k=10)
    assert _n_plotted(fig.axes[1]) == len(steps)
    # all timed: one panel, as before
    assert len(ann.recall_vs_latency(pts, k=10).axes) == 1


def test_embed_batch_axis_ticks_read_as_numbers():
    rows = [{"mode": m, "batch_size": b, "texts_per_s": 100.0 * b ** 0.5,
             "call_p95_ms": b * 2.0, "padding_waste": 0.1, "dtype": "fp32"}
            for m in ("batch", "sorted") for b in (1, 8, 32, 128)]
    fig = rag.embed_batch_sweep(rows)
    fig.canvas.draw()
    for ax in fig.axes[:2]:
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert {"8", "32", "128"} <= set(labels), labels
        assert not any("^" in t or "$" in t for t in labels), labels


def _bands(ax) -> list:
    from matplotlib.collections import PolyCollection

    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_rerank_curve_shades_each_splits_bootstrap_interval():
    from retrieval.reporting.bands import per_query_bands

    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(40)]
    rows = [{"depth": d, "query_id": q, "ndcg@10": float(v)}
            for d in (0, 10, 20) for q, v in zip(qids, rng.uniform(0.3, 1.0, 40))]
    bands = per_query_bands(rows, "ndcg@10", {"tuning": qids[:20], "heldout": qids[20:]})
    for split, ids in (("tuning", qids[:20]), ("heldout", qids[20:])):
        for d in (0, 10, 20):
            mean = np.mean([r["ndcg@10"] for r in rows if r["depth"] == d
                            and r["query_id"] in ids])
            lo, hi = bands[split][d]
            assert lo < mean < hi and hi - lo > 0.1  # 20 queries: a wide interval
    assert per_query_bands(rows, "ndcg@10", {"tuning": qids[:20]}) == {
        "tuning": bands["tuning"]}  # seeded: the same report twice
    curve = [{"depth": d, "tuning": {"ndcg@10": 0.6}, "heldout": {"ndcg@10": 0.62},
              "latency": {"p50_ms": 5 + d, "p95_ms": 8 + 2 * d}} for d in (0, 10, 20)]
    summary = {"curve": curve, "chosen_depth": 10, "tolerance": 0.005,
               "selection_metric": "ndcg@10"}
    assert not _bands(rag.rerank_depth_curve(summary).axes[0])
    fig = rag.rerank_depth_curve(summary, bands=bands)
    polys = _bands(fig.axes[0])
    assert len(polys) == 2
    ys = polys[0].get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(min(v[0] for v in bands["tuning"].values()))
    assert max(ys) == pytest.approx(max(v[1] for v in bands["tuning"].values()))


def test_cache_curve_shades_wilson_intervals_over_the_probes():
    from retrieval.reporting.bands import wilson_interval

    n = 40
    rows = [{"threshold": t / 100, "threshold_unit": "cosine_distance", "split": s,
             "hits": t, "correct_hits": t // 2, "false_hits": t // 4, "hit_rate": t / n,
             "correct_hit_rate": (t // 2) / n, "false_hit_rate": (t // 4) / n,
             "false_hit_upper_bound": 0.1, "precision": 0.5}
            for s in ("tuning", "heldout") for t in range(0, 21)]
    summary = {"curve": rows, "threshold": 0.1, "max_false_hit": 0.05}
    assert not _bands(rag.cache_curve(summary).axes[0])  # no probe counts: no band
    fig = rag.cache_curve({**summary, "design": {"n_tuning": n, "n_heldout": n}})
    assert len(_bands(fig.axes[0])) == 4 and len(_bands(fig.axes[1])) == 2
    lo, hi = wilson_interval([0, 20, 40], n)
    assert lo[0] == 0.0 and lo[1] < 0.5 < hi[1] and hi[2] == 1.0
    top = _bands(fig.axes[0])[0].get_paths()[0].vertices[:, 1].max()
    assert top == pytest.approx(float(wilson_interval([20], n)[1][0]))


def test_recall_vs_knob_one_panel_per_entry_one_line_per_build():
    import retrieval

    fig = retrieval.plots.recall_vs_knob(_points(), k=10, target=0.95)
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert set(panels) == {"hnswlib", "faiss-ivf"}
    hnsw = [line for line in panels["hnswlib"].get_lines() if len(line.get_xdata()) > 2]
    assert sorted(list(line.get_xdata()) for line in hnsw) == [[10, 20, 40, 80]] * 2
    assert panels["faiss-ivf"].get_xlabel().startswith("nprobe")
    empty = retrieval.plots.recall_vs_knob([{"backend": "faiss-flat", "recall": 1.0}])
    assert any("no series" in t.get_text() for ax in empty.axes for t in ax.texts)
