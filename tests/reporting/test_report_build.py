"""rwb report: run kinds recognised, the HTML page self-contained, bad input named."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from retrieval.cli import main
from retrieval.errors import ConfigError, DataError
from retrieval.reporting import load_run, write_report
from retrieval.reporting.html import Section, Table, render
from retrieval.reporting.load import detect_kind


def _run(tmp_path: Path, summary: dict, manifest: dict | None = None) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(summary))
    if manifest is not None:
        (d / "manifest.json").write_text(json.dumps(manifest))
    return d


CACHE_SUMMARY = {
    "kind": "cache-tune", "threshold": 0.08, "threshold_unit": "cosine_distance",
    "max_false_hit": 0.05, "bound": "wilson", "confidence": 0.95, "heldout_hit_rate": 0.2,
    "heldout_false_hit_rate": 0.04,
    "curve": [{"threshold": t / 100, "threshold_unit": "cosine_distance", "split": s,
               "hit_rate": t / 50, "correct_hit_rate": t / 100, "false_hit_rate": t / 300,
               "false_hit_upper_bound": t / 250, "precision": 0.6}
              for s in ("tuning", "heldout") for t in range(0, 31)],
}


@pytest.mark.parametrize(("summary", "manifest", "kind"), [
    ({"rows": [], "dataset": "x"}, {}, "eval"),
    ({"kind": "sweep", "rows": []}, {}, "sweep"),
    ({"x": 1}, {"kind": "bench-embed"}, "bench-embed"),
    ({"x": 1}, {"kind": "bench-fanout"}, "bench-fanout"),
    ({"chosen_depth": 5, "curve": []}, {"kind": "rerank-sweep"}, "rerank-sweep"),
    ({"chosen_depth": 5, "curve": []}, {}, "rerank-sweep"),
    ({"threshold": 0.1, "curve": [], "max_false_hit": 0.05}, {}, "cache-tune"),
    ({"kind": "rag-study"}, {"kind": "rag-study"}, "rag-study"),
    ({"nothing": 1}, {}, None),
])
def test_detect_kind(summary, manifest, kind):
    assert detect_kind(summary, manifest) == kind


def test_load_run_bad_input(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_run(tmp_path / "missing")
    with pytest.raises(DataError, match=r"no summary\.json"):
        load_run(tmp_path)
    bad = _run(tmp_path, {"nothing": 1}, {"kind": "mystery"})
    with pytest.raises(DataError, match=r"known kinds: eval, sweep"):
        load_run(bad)
    (bad / "summary.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="JSON object"):
        load_run(bad)


def test_render_is_self_contained():
    page = render(title="t <x>", meta=["m"], sections=[Section("a", "A", b"\x89PNGdata", "c")],
                  tables=[("S", Table(["k", "v"], [["a", 1.23456], ["b", None]], [True, False]))],
                  manifest={"secret": "<script>"})
    assert page.count("data:image/png;base64,") == 1
    assert base64.b64encode(b"\x89PNGdata").decode() in page
    assert "<table>" in page and "class=\"hl\"" in page and "1.235" in page
    assert "<script>" not in page and "t &lt;x&gt;" in page
    assert "http" not in page  # nothing fetched from elsewhere


def test_cache_run_report_writes_png_and_html(tmp_path):
    run = _run(tmp_path, CACHE_SUMMARY, {"kind": "cache-tune", "rwb_version": "0.1.0"})
    res = write_report(run)
    assert res.kind == "cache-tune" and res.html == run / "report.html"
    assert [p.name for p in res.pngs] == ["report_cache_curve.png"]
    assert res.pngs[0].stat().st_size > 20_000
    page = res.html.read_text()
    assert page.count("data:image/png;base64,") == 1 and "max_false_hit" in page
    assert '"rwb_version": "0.1.0"' in page


def test_report_bad_out_and_target(tmp_path):
    run = _run(tmp_path, CACHE_SUMMARY)
    with pytest.raises(ConfigError, match=r"\.html"):
        write_report(run, tmp_path / "report.png")
    with pytest.raises(ConfigError, match="eval runs only"):
        write_report(run, target=0.9)
    eval_run = tmp_path / "e"
    eval_run.mkdir()
    (eval_run / "summary.json").write_text(json.dumps({"rows": [], "dataset": "d", "k": 10}))
    with pytest.raises(ConfigError, match=r"--target-recall.*\(0, 1\].*1\.5"):
        write_report(eval_run, target=1.5)


def test_cli_report_errors_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and "does not exist" in err


EVAL_ROWS = [
    {"backend": "hnswlib", "build": {"M": 8}, "search": {"ef_search": ef}, "recall": rec,
     "recall_p5": rec - 0.1, "p95_ms": p95, "qps": 1000.0 / p95, "build_s": 0.1,
     "memory_bytes": 1_000_000}
    for ef, rec, p95 in ((10, 0.80, 0.10), (20, 0.90, 0.20), (40, 0.95, 0.40))
] + [
    # dominated: slower and less accurate than ef_search=20
    {"backend": "faiss-ivf", "build": {"nlist": 8}, "search": {"nprobe": 1}, "recall": 0.85,
     "recall_p5": 0.7, "p95_ms": 0.30, "qps": 98830.4, "build_s": 0.1,
     "memory_bytes": 1_000_000},
]


def test_eval_report_pareto_column_marks_the_front(tmp_path):
    from retrieval.reporting.build import index_table

    run = _run(tmp_path, {"kind": "eval", "dataset": "x", "k": 10, "rows": EVAL_ROWS},
               {"kind": "eval"})
    t = index_table(load_run(run))
    col = t.headers.index("Pareto")
    marks = [r[col] for r in t.rows]
    assert marks == ["yes", "yes", "yes", ""]  # the ivf row is dominated


def test_one_number_format_in_cli_and_report_tables(tmp_path):
    from retrieval.cli._common import fmt
    from retrieval.reporting.html import fmt_cell, table_html

    for v, text in ((98830.4, "98,830"), (72712.0, "72,712"), (1234567.0, "1,234,567"),
                    (0.95312, "0.9531"), (4.2171, "4.217"), (2345.6, "2346"),
                    (float("nan"), "-")):
        assert fmt(v) == fmt_cell(v) == text, v
    run = _run(tmp_path, {"kind": "eval", "dataset": "x", "k": 10, "rows": EVAL_ROWS},
               {"kind": "eval"})
    from retrieval.reporting.build import index_table

    page = table_html(index_table(load_run(run)))
    assert "98,830" in page and "e+0" not in page


def test_exports_table_lists_only_exports_rwb_can_write():
    """A row per engine whose translator takes the chosen config (an IVF config is not
    offered to HNSW-only engines)."""
    from retrieval.exporting.engines import ANN_ENGINES
    from retrieval.reporting.exports import exportable, exports_table

    ivf = {"backend": "faiss-ivf", "label": "faiss-ivf", "build": {"nlist": 16},
           "build_params": {"nlist": 16}, "search": {"nprobe": 2}}
    hnsw = {"backend": "hnswlib", "label": "hnswlib", "build": {"M": 8, "ef_construction": 40},
            "search": {"ef_search": 20}}
    t = exports_table([ivf, hnsw], metric="l2", dim=32, k=10)
    assert t is not None
    by = {(r[0], r[2]) for r in t.rows}
    ivf_engines = {e for label, e in by if label == "faiss-ivf"}
    assert "faiss" in ivf_engines and not {"qdrant", "hnswlib"} & ivf_engines
    assert {"faiss", "hnswlib", "milvus", "qdrant"} <= {e for label, e in by
                                                        if label == "hnswlib"}
    assert len(t.rows) < 2 * len(ANN_ENGINES)
    for c in (ivf, hnsw):
        assert {e for label, e in by if label == c["label"]} == {
            e for e in ANN_ENGINES if exportable(c, e, "l2", 32, 10)}
    assert exports_table([], metric="l2", dim=32, k=10) is None
