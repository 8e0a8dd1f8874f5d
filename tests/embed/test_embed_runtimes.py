"""Embedding runtimes on the packaged MiniLM with real ONNX Runtime and OpenVINO: drift bounds
against torch fp32 on real QQP questions, the on-disk export cache (reused, a corrupt or
mismatched entry rebuilt with a warning, an unwritable folder one clear error), and
``rwb bench embed --runtimes`` end to end plus its bad-input line (exit 2)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from retrieval.cli import main
from retrieval.embed import RuntimeEmbedder, SentenceTransformerEmbedder, get_embedder
from retrieval.embed.runtimes import RUNTIMES, parse_runtimes
from retrieval.embed.runtimes.export import MANIFEST, check_entry, sha256_file
from retrieval.errors import ConfigError, DataError
from retrieval.paths import data_dir

pytestmark = [pytest.mark.slow, pytest.mark.model]

pytest.importorskip("onnxruntime")
needs_data = pytest.mark.skipif(
    not data_dir().is_dir(), reason=f"shared data folder absent ({data_dir()}); set RWB_DATA_DIR"
)
N_TEXTS = 200


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An rwb cache dir of this module (exports land in <it>/onnx, made once here)."""
    return tmp_path_factory.mktemp("rwb-cache")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    if not data_dir().is_dir():
        pytest.skip(f"shared data folder absent ({data_dir()}); set RWB_DATA_DIR")
    from retrieval.loaders.catalog import load_text_collection

    pool = [t for t in load_text_collection("qqp-questions").corpus.values() if t.strip()]
    rng = np.random.default_rng(7)
    return [pool[int(i)] for i in rng.permutation(len(pool))[:N_TEXTS]]


@pytest.fixture(scope="module")
def ref(texts: list[str]) -> np.ndarray:
    """torch fp32 embeddings (sentence-transformers encode) of the texts."""
    return SentenceTransformerEmbedder().embed(texts, batch_size=32)


def _onnx(cache_root: Path, runtime: str) -> RuntimeEmbedder:
    return RuntimeEmbedder(runtime=runtime, cache_dir=cache_root / "onnx")


def _cos_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return 1.0 - np.sum(a * b, axis=1)


def test_runtime_names_are_parsed_once() -> None:
    assert [r.name for r in parse_runtimes("torch, ORT,onnx-int8,onnx")] == [
        "torch", "onnx", "onnx-int8"]
    with pytest.raises(ConfigError) as exc:
        parse_runtimes("onnx,tensorrt")
    msg = str(exc.value)
    assert "'tensorrt'" in msg and all(name in msg for name in RUNTIMES) and "\n" not in msg


@needs_data
def test_onnx_and_openvino_fp32_match_torch(cache_root: Path, texts: list[str],
                                            ref: np.ndarray) -> None:
    onnx = _onnx(cache_root, "onnx")
    got = onnx.embed(texts, batch_size=32)
    assert got.shape == ref.shape and got.dtype == np.float32
    assert np.abs(got - ref).max() <= 1e-4
    assert _cos_dist(ref, got).max() <= 1e-5
    pytest.importorskip("openvino")
    ov = _onnx(cache_root, "openvino").embed(texts, batch_size=32)
    assert np.abs(ov - ref).max() <= 1e-4
    assert onnx.encoder.export.path == _onnx(cache_root, "openvino").encoder.export.path


@needs_data
def test_int8_drift_is_bounded_and_real(cache_root: Path, texts: list[str],
                                        ref: np.ndarray) -> None:
    from retrieval.bench.embed.plan import drift

    int8 = _onnx(cache_root, "onnx-int8")
    got = int8.embed(texts, batch_size=32)
    cos = _cos_dist(ref, got)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
    # really quantized (it drifts) but close: per-channel int8 gave mean ~0.006 here
    assert 1e-4 < cos.mean() <= 0.02 and cos.max() <= 0.05
    d = drift(ref, got, n_queries=50, k=10)
    assert 0.7 <= d["recall_at_k"] <= 1.0
    fp32 = _onnx(cache_root, "onnx").encoder.export.path
    assert int8.encoder.export.path.stat().st_size < 0.4 * fp32.stat().st_size


@needs_data
def test_cached_export_is_reused(cache_root: Path, texts: list[str]) -> None:
    first = _onnx(cache_root, "onnx")
    path = first.encoder.export.path
    mtime = path.stat().st_mtime_ns
    again = _onnx(cache_root, "onnx")
    assert again.encoder.export.reused is True
    assert path.stat().st_mtime_ns == mtime
    assert np.array_equal(first.embed(texts[:20]), again.embed(texts[:20]))
    # get_embedder(runtime=) wraps the same kind of embedder; its cache key names the runtime
    assert get_embedder(runtime="onnx").cache_tag.endswith("runtime=onnx")
    assert get_embedder().cache_tag == SentenceTransformerEmbedder().cache_tag  # default kept


@needs_data
def test_corrupt_or_mismatched_export_is_rebuilt_with_a_warning(
    cache_root: Path, texts: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    good = _onnx(cache_root, "onnx-int8")
    before = good.embed(texts[:30])
    path = good.encoder.export.path
    digest = sha256_file(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])  # a truncated file
    with caplog.at_level(logging.WARNING, logger="retrieval.embed.runtimes.export"):
        fixed = _onnx(cache_root, "onnx-int8")
    assert fixed.encoder.export.reused is False
    assert any("cannot be trusted" in r.getMessage() and "bytes" in r.getMessage()
               for r in caplog.records)
    assert sha256_file(path) == digest  # quantization is deterministic
    assert np.array_equal(fixed.embed(texts[:30]), before)
    # an entry written by other library versions (its manifest disagrees) is not trusted either
    man = json.loads((path.parent / MANIFEST).read_text())
    (path.parent / MANIFEST).write_text(json.dumps({**man, "key": "0" * 64}))
    assert "another model" in (check_entry(path.parent, "onnx-int8", man["key"]) or "")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="retrieval.embed.runtimes.export"):
        assert _onnx(cache_root, "onnx-int8").encoder.export.reused is False
    assert any("cannot be trusted" in r.getMessage() for r in caplog.records)


def test_unwritable_export_cache_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    emb = RuntimeEmbedder(runtime="onnx", cache_dir=blocker / "onnx")
    with pytest.raises(DataError) as exc:
        emb.embed(["hello"])
    msg = str(exc.value)
    assert "cannot write" in msg and "RWB_CACHE_DIR" in msg and "\n" not in msg


@needs_data
def test_bench_embed_runtimes_end_to_end(cache_root: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RWB_CACHE_DIR", str(cache_root))
    assert _onnx(cache_root, "onnx-int8").dim == 384  # both exports exist (any test order)
    runtimes = "torch,onnx,onnx-int8" + (",openvino" if _has("openvino") else "")
    rc = main(["bench", "embed", "--collection", "qqp", "--sample", "80", "--batch-sizes",
               "1,16", "--token-budgets", "1024", "--single-limit", "12", "--dtypes", "fp32",
               "--threads", "1", "--runtimes", runtimes, "--json", "--out", str(tmp_path / "r")])
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    rt = s["runtimes"]
    assert rt["measured"] == runtimes.split(",")
    by = rt["by_runtime"]
    for name, e in by.items():
        assert e["texts_per_s"] > 0 and e["call_p95_ms"] >= e["call_p50_ms"] > 0
        rows = [r for r in s["rows"] if r["runtime"] == name]
        assert {r["mode"] for r in rows} == {"single", "batch", "sorted", "tokens", "library"}
        if name != "torch":
            assert e["info"]["export_reused"] is True  # made by the tests above, reused here
            assert e["info"]["threads"] == 1
        # the verdict follows the stated rule
        assert e["within_tolerance"] == (e["drift"]["recall_at_k"] >= 0.99)
    assert by["onnx"]["drift"]["cos_dist_max"] <= 1e-5 and by["onnx"]["within_tolerance"]
    assert by["onnx-int8"]["drift"]["cos_dist_mean"] > 1e-4
    usable = {n: e["texts_per_s"] for n, e in by.items() if e["within_tolerance"]}
    fastest = rt["fastest_within_tolerance"]
    assert fastest["runtime"] == max(usable, key=lambda n: usable[n])
    assert fastest["speedup_vs_library"] == pytest.approx(
        usable[fastest["runtime"]] / s["library_texts_per_s"])
    assert (tmp_path / "r" / "summary.json").is_file()


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--runtimes", "torch,tensorrt"], "unknown runtime 'tensorrt'; allowed: torch, "
         "torch-bf16, onnx, onnx-int8, openvino"),
        (["--runtimes", "onnx", "--engine", "flagembedding", "--model", "."],
         "need engine 'sentence-transformers'"),
        (["--quality", "msmarco"], "field 'quality'"),
    ],
)
def test_bench_embed_bad_runtime_is_one_line_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "embed", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rwb: error:") and message in err and "\n" not in err


def test_example_runtimes_config_loads() -> None:
    from retrieval.bench.embed.spec import load_embed_config

    path = Path(__file__).resolve().parents[2] / "sweeps" / "embed-runtimes.yaml"
    cfg = load_embed_config(path, sample=50)
    assert cfg.runtimes == ["torch", "torch-bf16", "onnx", "onnx-int8", "openvino"]
    assert cfg.quality == "scifact" and cfg.quality_tolerance == 0.99 and cfg.sample == 50


@needs_data
def test_scifact_quality_per_runtime(cache_root: Path) -> None:
    from retrieval.bench.embed.engines import RuntimeEngine, STEngine
    from retrieval.bench.embed.runtimes import scifact_quality
    from retrieval.bench.embed.spec import EmbedBenchConfig
    from retrieval.embed.runtimes import parse_runtime

    cfg = EmbedBenchConfig(quality="scifact", quality_queries=15, quality_docs=60)
    engines = {"torch": STEngine(None),
               "onnx": RuntimeEngine(None, parse_runtime("onnx"), threads=1,
                                     cache_dir=cache_root / "onnx")}
    q = scifact_quality(cfg, engines)  # type: ignore[arg-type]
    assert q["n_queries"] == 15 and q["n_judged_docs"] <= q["n_docs"] == 60
    t, o = q["by_runtime"]["torch"], q["by_runtime"]["onnx"]
    assert 0.3 < t["ndcg@10"] <= 1.0 and 0.0 < t["recall@10"] <= 1.0
    assert t["ndcg_ratio"] == 1.0 and t["overlap_at_10_vs_fp32"] == 1.0
    # ONNX fp32 retrieves what torch fp32 retrieves (same top 10, same scores)
    assert o["overlap_at_10_vs_fp32"] >= 0.99
    assert o["ndcg@10"] == pytest.approx(t["ndcg@10"], abs=0.01)
