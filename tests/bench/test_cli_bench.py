"""`rwb bench embed` and `rwb bench fanout` end to end on small real samples of ../shared/data,
and their one-line errors for bad input (exit code 2)."""

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

FANOUT = textwrap.dedent("""\
    name: fanout-small
    k: 10
    warmup: 2
    queries: {source: scifact, n: 15}
    collections:
      - {name: qqp, source: qqp, sample: 300, backend: hnswlib,
         build: {M: 8, ef_construction: 64}, search: {ef_search: 32}}
      - {name: reuters, source: reuters, sample: 300, backend: faiss-hnsw,
         build: {M: 8, ef_construction: 64}, search: {ef_search: 32}}
      - {name: scifact, source: scifact, sample: 300, backend: milvus,
         build: {index_type: HNSW, M: 8, efConstruction: 64}, search: {ef: 32}}
""")


def _json(capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    return json.loads(capsys.readouterr().out)


@needs_data
@pytest.mark.slow
@pytest.mark.model
def test_bench_embed_json_and_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "embed"
    rc = main(["bench", "embed", "--collection", "qqp", "--sample", "60", "--batch-sizes",
               "1,8", "--token-budgets", "256", "--single-limit", "20", "--json",
               "--out", str(out)])
    assert rc == 0
    s = _json(capsys)
    assert s["max_abs_diff"] <= 1e-4 and s["agree"] is True
    settings = {r["setting"] for r in s["rows"]}
    assert {"single", "batch-8", "sorted-8", "tokens-256", "library-32"} <= settings
    # the speedup is the best batched setting's rate over one-at-a-time calls, and batching wins
    batched = {r["setting"]: r["texts_per_s"] for r in s["rows"]
               if r["mode"] in ("batch", "sorted", "tokens") and "@" not in r["setting"]}
    assert s["best_setting"] == max(batched, key=lambda k: batched[k])
    assert s["speedup"] == pytest.approx(batched[s["best_setting"]] / s["single_texts_per_s"])
    assert s["speedup"] > 1.0
    # bf16 is measured exactly when this CPU runs it natively, and says why either way
    from retrieval.bench.embed.engines import bf16_support

    supported, why = bf16_support()
    assert s["bf16"]["measured"] is supported and s["bf16"]["reason"] == why
    if supported:
        assert s["bf16"]["setting"] in settings and s["bf16"]["speedup_vs_fp32_best"] == (
            pytest.approx(s["bf16"]["texts_per_s"] / s["bf16"]["fp32_texts_per_s_same_pass"]))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["torch"]["threads"] >= 1 and "flags" in manifest["cpu"]
    assert manifest["config"]["sample"] == 60
    table = pd.read_parquet(out / "results.parquet")
    assert {"setting", "texts_per_s", "padding_waste", "call_p95_ms"} <= set(table.columns)
    # the table form prints without error too
    assert main(["bench", "embed", "--collection", "qqp", "--sample", "10", "--batch-sizes",
                 "1,4", "--token-budgets", "64", "--dtypes", "fp32", "--out",
                 str(tmp_path / "e2")]) == 0
    assert "max abs diff" in capsys.readouterr().out


@needs_data
@pytest.mark.slow
@pytest.mark.milvus
@pytest.mark.model
def test_bench_fanout_json_and_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "fanout.yaml"
    spec.write_text(FANOUT)
    out = tmp_path / "fanout"
    assert main(["bench", "fanout", str(spec), "--json", "--out", str(out)]) == 0
    s = _json(capsys)
    for mode in ("serial", "threads", "asyncio"):
        m = s["modes"][mode]
        assert 0 < m["p50_ms"] <= m["p95_ms"] and m["failures"] == {}
    assert set(s["speedup"]) == {"threads", "asyncio"}
    assert all(v == 1.0 for v in s["fused_identical_across_modes"].values())
    q = s["quality"]
    assert q["available"] and q["ranx_rrf"]["agrees"]
    labels = {r["ranking"] for r in q["rows"]}
    assert {"only scifact", "fused rrf", "fused score"} <= labels
    assert (out / "manifest.json").is_file() and (out / "spec.yaml").is_file()
    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) == 3 * 15 and {"mode", "latency_ms", "member_ms.scifact"} <= set(rows)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "embed", "--batch-sizes", "8,0"], "batch_sizes"),
        (["bench", "embed", "--batch-sizes", "x"], "comma-separated integers"),
        (["bench", "embed", "--model", "/no/such/model"], "looked in /no/such/model"),
        (["bench", "embed", "--sample", "0"], "field 'sample' must be >= 1"),
        (["bench", "fanout", "/no/such/spec.yaml"], "does not exist"),
    ],
)
def test_bench_bad_input_is_one_line_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rwb: error:") and message in err and "\n" not in err


@pytest.mark.model
def test_bench_empty_text_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "texts.txt"
    f.write_text("first\n   \nthird\n", encoding="utf-8")
    assert main(["bench", "embed", "--texts-file", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert "line 2 is empty" in err and "\n" not in err


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("{name: x, source: scifact, backend: hnswlib, search: {ef_search: 3}}", "ef_search"),
        ("{name: x, source: scifact, backend: nope}", "unknown backend 'nope'"),
        ("{name: x, source: scifact, backend: hnswlib, server: true}", "server"),
        ("{name: x, source: scifact, bogus: 1}", "bogus"),
    ],
)
def test_bench_fanout_bad_spec(tmp_path: Path, patch: str, message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"k: 10\ncollections:\n  - {patch}\n")
    assert main(["bench", "fanout", str(spec)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rwb: error:") and message in err and str(spec) in err
