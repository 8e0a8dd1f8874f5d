"""Long phases report progress (issue 21): out-of-core ground truth, fingerprinting a mapped
file and a scale study's sample sizes call :func:`retrieval.phases.report`; the CLI turns the
reports into plain lines on stderr in a pipe (a bar on a terminal); library code never prints."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from retrieval import phases
from retrieval.cli import _common, main
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep


def _npy(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(1)
    np.save(tmp_path / "b.npy", rng.standard_normal((3000, 8)).astype(np.float32))
    np.save(tmp_path / "q.npy", rng.standard_normal((20, 8)).astype(np.float32))
    return tmp_path / "b.npy", tmp_path / "q.npy"


def test_cli_prints_ground_truth_and_fingerprint_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RWB_PROGRESS_INTERVAL", "0")  # every update, instead of every 10 s
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # nothing cached yet
    monkeypatch.setattr(_common, "QUIET", False)
    base, queries = _npy(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""\
        name: phase-progress
        dataset: {{kind: npy, base: {base}, queries: {queries}, metric: l2}}
        k: 5
        warmup: 0
        batch_repeats: 1
        modes: [batch]
        indexes:
          - backend: faiss-flat
    """))
    assert main(["eval", str(spec), "--out", str(tmp_path / "run"), "--json"]) == 0
    captured = capsys.readouterr()
    err = captured.err
    gt = [ln for ln in err.splitlines() if ln.startswith("rwb ground truth:")]
    fp = [ln for ln in err.splitlines() if ln.startswith("rwb fingerprint:")]
    assert gt and "3000/3000 (100%)" in gt[-1], err
    assert fp and "3020/3020 (100%)" in fp[-1], err
    assert "rwb ground truth" not in captured.out  # stderr only: stdout stays JSON
    assert main(["eval", str(spec), "--out", str(tmp_path / "run2"), "--quiet"]) == 0
    assert "rwb ground truth" not in capsys.readouterr().err
    monkeypatch.setattr(_common, "QUIET", False)


def test_scale_study_reports_its_sample_sizes(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec = parse_spec({
        "name": "scale", "dataset": {"kind": "synthetic", "n": 2000, "dim": 8,
                                     "n_queries": 60},
        "k": 5, "target_recall": 0.9, "warmup": 0, "batch_repeats": 1, "modes": ["batch"],
        "index_build": {"threads": 1, "cache": False},
        "indexes": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                     "search": {"ef_search": 10}}],
        "scale": {"fractions": ["1/4", "1/2"], "bootstrap": 20},
        "tune": {"strategy": "target", "objective": "qps"},
    }, source="scale.yaml")
    seen: list[tuple[str, int, int, str]] = []
    with phases.progress_to(lambda *a: seen.append(a)):
        run_sweep(spec, tmp_path / "run")
    phases.report("scale study", 0, 1)  # no callback outside the block: nothing recorded
    stages = [(d, t, w) for p, d, t, w in seen if p == "scale study"]
    assert stages[0] == (0, 3, "sample N=500 (1 builds)")
    assert stages[1] == (1, 3, "sample N=1,000 (1 builds)")
    assert stages[-1] == (3, 3, "full N=2,000 checked")
    assert capsys.readouterr().err == ""  # the library printed nothing itself


@pytest.mark.model  # CachedEmbedder.embed (a fake inner model here; the guard counts it)
def test_embedding_reports_its_chunks(tmp_path: Path) -> None:
    """Embedding a corpus (``tune rerank``'s first stage, text datasets) reports each computed
    chunk, so a pipe sees progress lines while it embeds."""
    from retrieval.embed import CachedEmbedder

    class Tiny:
        model_id, dim = "tiny", 4

        def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
            return np.ones((len(texts), 4), dtype=np.float32)

    seen: list[tuple[str, int, int]] = []
    emb = CachedEmbedder(Tiny(), cache_dir=tmp_path, chunk_size=10)  # type: ignore[arg-type]
    with phases.progress_to(lambda name, done, total, what: seen.append((name, done, total))):
        emb.embed([f"text {i}" for i in range(25)])
    assert seen == [("embed", 10, 25), ("embed", 20, 25), ("embed", 25, 25)]
