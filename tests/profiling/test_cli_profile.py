"""`rwb profile` end to end on a small real pipeline (two collections of ../shared/data, MiniLM
queries, the tiny cross-encoder, BM25 fallback): per-stage percentiles and shares in the JSON,
stage durations adding up to the end-to-end time within the measured overhead, the measured
remedy waterfall, OTLP JSON lines with one trace per request, and those traces read back by
`--compare`; plus the one-line errors."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from retrieval.cli import main
from retrieval.paths import data_dir

needs_data = pytest.mark.skipif(
    not data_dir().is_dir(), reason=f"shared data folder absent ({data_dir()}); set RWB_DATA_DIR"
)

PIPELINE = textwrap.dedent("""\
    name: pipeline-small
    k: 5
    warmup: 1
    queries: {source: scifact, n: 8}
    retrieval:
      mode: serial
      collections:
        - {name: scifact, source: scifact, sample: 40, backend: hnswlib,
           build: {M: 8, ef_construction: 32}, search: {ef_search: 32}}
        - {name: qqp, source: qqp, sample: 60, backend: faiss-hnsw,
           build: {M: 8, ef_construction: 32}, search: {ef_search: 32}}
    rerank: {model: tiny, depth: 8}
    bm25: {collection: scifact}
    remedies:
      knobs: {qqp: {search: {ef_search: 8}}}
      rerank_depth: 4
      bm25_fallback: {collection: scifact}
      fallback_timeout_s: 0.5
""")


@needs_data
@pytest.mark.model
@pytest.mark.slow
def test_profile_cli_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("opentelemetry.sdk.trace", reason="the trace extra is not installed")
    spec = tmp_path / "pipeline.yaml"
    spec.write_text(PIPELINE)
    otlp = tmp_path / "otlp"
    assert main(["profile", str(spec), "--out", str(tmp_path / "run"), "--otlp-dir", str(otlp),
                 "--remedies", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    stages = {r["name"]: r for r in s["stages"]}
    for name in ("embed", "retrieve", "retrieve/scifact", "retrieve/qqp", "fuse", "rerank",
                 "overhead", "request"):
        assert {"name", "p50_ms", "p95_ms", "p99_ms"} <= set(stages[name]), name
    for q in ("p50", "p95", "p99"):
        top = [r for r in s["stages"] if "shares" in r and r["name"] != "request"]
        assert sum(r["shares"][q] for r in top) == pytest.approx(1.0)
    assert stages["request"]["n"] == 8
    assert s["tail"]["n"] == 1 and sum(s["tail"]["by_stage"].values()) == 1
    assert s["quality"]["n_queries"] == 8 and 0.0 <= s["quality"]["recall@5"] <= 1.0
    # the overhead is the time no stage covers, read off the spans' own clock readings: the
    # serial stages lie inside the request one after another, and the gaps between them (and
    # before the first, after the last) are the recorded overhead_ms (issue 34 pin 7: the
    # old check restated overhead's definition and could not fail)
    req = pd.read_parquet(tmp_path / "run" / "requests.parquet")
    base = req[req["pass"] == "baseline"].set_index("request")
    spans = pd.read_parquet(tmp_path / "run" / "spans.parquet")
    top = spans[(spans["pass"] == "baseline") & spans["parent"].isna()
                & (spans["stage"] != "request")]
    for request, group in top.groupby("request"):
        total = float(base.loc[request, "ms"])
        cursor, gaps = 0.0, 0.0
        for start, ms in sorted(zip(group["start_ms"], group["ms"], strict=True)):
            assert start >= cursor - 1e-6, (request, "stages overlap")
            gaps, cursor = gaps + (start - cursor), start + ms
        assert cursor <= total + 1e-6, (request, "a stage ends after the request")
        gaps += total - cursor
        assert float(base.loc[request, "overhead_ms"]) == pytest.approx(gaps, abs=1e-6)
    assert set(spans["stage"]) >= {"embed", "retrieve/qqp", "rerank", "request"}
    # the waterfall: each step measured or skipped with a reason
    steps = {r["step"]: r for r in s["remedies"]["steps"]}
    assert steps["baseline"]["applied"] and steps["parallel collections"]["applied"]
    assert steps["smaller rerank depth"]["applied"] and steps["tuned knobs"]["applied"]
    assert not steps["cache at tuned threshold"]["applied"] or steps["cache at tuned threshold"][
        "p95_ms"] is not None
    assert all(r["p95_ms"] is not None for r in steps.values() if r["applied"])
    # one trace per request, exemplars link to them
    lines = (otlp / "traces.jsonl").read_text().splitlines()
    docs = [json.loads(x) for x in lines]
    traces = {sp["traceId"] for d in docs for rs in d["resourceSpans"]
              for ss in rs["scopeSpans"] for sp in ss["spans"]}
    assert len(traces) == 8
    assert s["exemplars"] and s["exemplars"][0]["trace_id"] in traces
    # the traces read back through --compare: the same stage percentiles
    assert main(["profile", str(spec), "--out", str(tmp_path / "run2"), "--compare", str(otlp),
                 "--json"]) == 0
    cmp = json.loads(capsys.readouterr().out)["compare"]
    rows = {r["name"]: r for r in cmp["stages"]}
    assert cmp["traces"] == 8
    for name in ("embed", "retrieve/qqp", "rerank", "request"):
        assert rows[name]["n_prod"] == 8
        assert rows[name]["prod_p95_ms"] == pytest.approx(stages[name]["p95_ms"], abs=1e-3)


def test_profile_bad_spec_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("retrieval: {collections: [{name: a, source: scifact}]}\nbm25: "
                    "{collection: nope}\n")
    assert main(["profile", str(spec), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "bm25.collection" in err and "nope" in err and "Traceback" not in err
    assert main(["profile", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "r")]) == 2


def test_profile_compare_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "p.yaml"
    spec.write_text(PIPELINE)
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"nope": 1}\n')
    assert main(["profile", str(spec), "--out", str(tmp_path / "r"), "--compare",
                 str(bad)]) == 2
    assert "resourceSpans" in capsys.readouterr().err
