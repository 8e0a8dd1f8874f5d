"""`rwb report` on real small runs: an `rwb eval` run (with a build grid) and an `rwb sweep` run
render to PNG files and one self-contained HTML page with the table and every image."""

from __future__ import annotations

import json
import struct
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from retrieval.cli import main
from retrieval.reporting import load_run

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

EVAL = textwrap.dedent("""\
    name: report-e2e
    dataset: synthetic-small
    k: 10
    warmup: 4
    batch_repeats: 1
    indexes:
      - backend: faiss-flat
      - backend: hnswlib
        build: {M: [4, 8], ef_construction: 20}
        search: {ef_search: [10, 20, 40]}
      - backend: faiss-ivf
        build: {nlist: [16, 32]}
        search: {nprobe: [1, 2, 4, 8]}
""")

SWEEP = textwrap.dedent("""\
    name: report-sweep
    dataset: synthetic-small
    k: 10
    warmup: 4
    batch_repeats: 1
    target_recall: 0.8
    tune: {strategy: grid, heldout_fraction: 0.5}
    indexes:
      - backend: hnswlib
        build: {M: 8, ef_construction: 40}
        search: {ef_search: [10, 40, 80]}
""")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("report")
    spec = d / "spec.yaml"
    spec.write_text(EVAL)
    run = d / "run"
    assert main(["eval", str(spec), "--out", str(run), "--json"]) == 0
    return run


def test_eval_run_stores_per_query_recall(eval_run):
    pq = pd.read_parquet(eval_run / "per_query.parquet")
    summary = json.loads((eval_run / "summary.json").read_text())
    assert len(pq) == len(summary["rows"]) * 100  # 100 queries in synthetic-small
    row = summary["rows"][3]
    mine = pq[(pq.backend == row["backend"]) & (pq.build == json.dumps(row["build"],
                                                                        sort_keys=True))
              & (pq.search == json.dumps(row["search"], sort_keys=True))]
    assert mine.recall.mean() == pytest.approx(row["recall"])


def test_report_of_eval_run(eval_run, tmp_path, capsys):
    out = tmp_path / "r" / "report.html"
    assert main(["report", str(eval_run), "--out", str(out), "--target-recall", "0.9"]) == 0
    printed = capsys.readouterr().out
    pngs = sorted(out.parent.glob("*.png"))
    names = {p.stem for p in pngs}
    assert {"report_recall_vs_p95", "report_recall_vs_qps", "report_per_query_recall",
            "report_build_costs"} <= names
    assert "report_surface_hnswlib_build_M_search_ef_search" in names
    assert "report_surface_faiss-ivf_build_nlist_search_nprobe".replace("-", "_") in names
    for p in pngs:
        assert str(p) in printed
        w, h = png_size(p)
        assert 500 <= w <= 2500 and 250 <= h <= 2000, (p.name, w, h)
        assert p.stat().st_size > 15_000, p.name
    page = out.read_text()
    assert page.count("data:image/png;base64,") == len(pngs)
    assert "<table>" in page and "faiss-ivf" in page and "Measured configs" in page
    assert "Manifest" in page and "rwb_version" in page
    assert 'class="hl"' in page  # the chosen rows (target 0.9)


def test_report_default_path_of_sweep_run(tmp_path):
    spec = tmp_path / "sweep.yaml"
    spec.write_text(SWEEP)
    run = tmp_path / "sweep"
    assert main(["sweep", str(spec), "--out", str(run), "--json"]) == 0
    assert main(["report", str(run), "--remeasure"]) == 0
    assert (run / "report.html").is_file()
    names = {p.stem for p in run.glob("report_*.png")}
    assert {"report_recall_vs_p95", "report_recall_vs_qps", "report_per_query_recall"} <= names
    page = (run / "report.html").read_text()
    assert "recall lower bound" in page


def test_eval_report_marks_the_pareto_front(eval_run):
    from retrieval.reporting.build import index_table

    t = index_table(load_run(eval_run))
    marks = [r[t.headers.index("Pareto")] for r in t.rows]
    assert "yes" in marks and "" in marks  # a front, and configs it dominates


def test_target_sweep_p95_plot_shows_its_search_steps(tmp_path):
    from retrieval.reporting.build import figures_for, tables_for

    spec = tmp_path / "sweep.yaml"
    spec.write_text(SWEEP.replace("strategy: grid", "strategy: target"))
    run = tmp_path / "sweep"
    assert main(["sweep", str(spec), "--out", str(run), "--json"]) == 0
    loaded = load_run(run)
    steps = [r for r in loaded.summary["rows"] if r.get("p95_ms") is None]
    assert steps  # a target search measures its steps without single-query timing
    figs = {name: (fig, caption) for name, _t, fig, caption in figures_for(loaded)}
    fig, caption = figs["recall_vs_p95"]
    side = fig.axes[1]
    # the chosen config's step is drawn with its full re-timing on the p95 axis
    chosen = len(loaded.summary["backends"])
    assert sum(len(c.get_offsets()) for c in side.collections) == len(steps) - chosen
    assert "ann-benchmarks" not in caption and "p95" in caption
    assert "timed again in full" in figs["recall_vs_qps"][1]
    (_, table), = [t for t in tables_for(loaded) if t[0] == "Measured configs"]
    assert "timed again in full" in table.caption


def test_chosen_row_shows_its_full_timing(tmp_path):
    """The 'chosen' row of a target sweep's table carries the chosen config's full re-timing
    (summary.json's p95 / QPS), not its search step's numbers (no p95, one-pass QPS)."""
    from retrieval.reporting.build import chosen_points, index_table

    spec = tmp_path / "sweep.yaml"
    spec.write_text(SWEEP.replace("strategy: grid", "strategy: target"))
    run = tmp_path / "sweep"
    assert main(["sweep", str(spec), "--out", str(run), "--json"]) == 0
    loaded = load_run(run)
    chosen = chosen_points(loaded)
    assert chosen
    t = index_table(loaded)
    col = {h: i for i, h in enumerate(t.headers)}
    picked = [r for r in t.rows if r[col["chosen"]] == "yes"]
    assert len(picked) == len(chosen)
    assert sorted(r[col["p95 ms"]] for r in picked) == sorted(c["p95_ms"] for c in chosen)
    assert sorted(r[col["QPS"]] for r in picked) == sorted(c["qps"] for c in chosen)


TARGET_SWEEP = textwrap.dedent("""\
    name: report-target
    dataset: synthetic-small
    k: 10
    warmup: 4
    batch_repeats: 1
    target_recall: 0.9
    tune: {strategy: target, heldout_fraction: 0.5, search_range: {ef_search: [10, 128]}}
    indexes:
      - backend: faiss-flat
      - backend: hnswlib
        build: {M: 8, ef_construction: 40}
      - backend: faiss-ivf
        build: {nlist: 16}
""")


@pytest.fixture(scope="module")
def target_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("target")
    spec = d / "sweep.yaml"
    spec.write_text(TARGET_SWEEP)
    run = d / "run"
    assert main(["sweep", str(spec), "--out", str(run), "--json"]) == 0
    return run


def _offsets(ax) -> list[tuple[float, float]]:
    return [tuple(map(float, xy)) for c in ax.collections for xy in c.get_offsets()]


def test_target_sweep_report_draws_every_probe_point(target_run):
    """Every measured probe point is in the recall-vs-knob figure (per entry,
    with its lower bound), and on the recall-vs-p95 figure (timed, or in the steps panel); the
    p95 legend names every backend, not only the one with a timed row."""
    from retrieval.reporting.build import figures_for, sweep_knobs
    from retrieval.reporting.points import knob_curves

    loaded = load_run(target_run)
    rows = loaded.summary["rows"]
    knobs = sweep_knobs(loaded)
    assert knobs == {"hnswlib": "ef_search", "faiss-ivf": "nprobe"}
    figs = {name: fig for name, _t, fig, _c in figures_for(loaded)}
    curves = {c["label"]: c for c in knob_curves(rows, knobs)}
    probes = [r for r in rows if r["label"] in knobs]
    assert sum(len(c["x"]) for c in curves.values()) == len(probes) > 4
    for r in probes:
        c = curves[r["label"]]
        i = c["x"].index(float(r["search"][c["knob"]]))
        assert (c["recall"][i], c["recall_lb"][i]) == (r["recall"], r["recall_lb"])
    fig = figs["recall_vs_knob"]
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert set(panels) == set(knobs)
    for label, ax in panels.items():
        drawn = set(_offsets(ax))  # filled + hollow markers and the chosen star
        assert {(x, y) for x, y in zip(curves[label]["x"], curves[label]["recall"])} <= drawn
        assert any(set(line.get_ydata()) == {0.9} for line in ax.get_lines())  # target
        assert any(len(c.get_paths()) and "bound" in str(c.get_label())
                   for c in ax.collections)  # the lower-bound band
    p95 = figs["recall_vs_p95"]
    main_ax, side = p95.axes[0], p95.axes[1]
    timed_pts = {(float(x), float(y)) for line in main_ax.get_lines()
                 for x, y in zip(line.get_xdata(), line.get_ydata())}
    n_side = len(_offsets(side))
    assert n_side + sum(1 for r in rows if r["p95_ms"] is not None) + len(knobs) == len(rows)
    assert len(timed_pts) >= 1 + len(knobs)  # exact baseline + each chosen, re-timed
    legend = [t.get_text() for t in main_ax.get_legend().get_texts()]
    for label in ("faiss-flat", *knobs):
        assert any(t.startswith(label) for t in legend), legend


def test_target_sweep_table_sorted_by_entry_and_knob(target_run):
    from retrieval.reporting.build import index_table

    t = index_table(load_run(target_run))
    col = {h: i for i, h in enumerate(t.headers)}
    labels = [r[col["backend"]] for r in t.rows]
    assert labels == sorted(labels, key=["faiss-flat", "hnswlib", "faiss-ivf"].index)
    for label in ("hnswlib", "faiss-ivf"):
        values = [int(r[col["search"]].split("=")[1]) for r in t.rows
                  if r[col["backend"]] == label]
        assert values == sorted(values) and len(values) > 2
