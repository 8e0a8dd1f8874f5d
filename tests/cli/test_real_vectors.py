"""The real-vector dataset end to end: MiniLM embeddings of Quora questions (the CI-sized
manifest, its base cut to 5,000 by an override) through `rwb eval` with every in-process ANN
family and Milvus Lite (slow: embeds once, then cached).

The cut: embedding the manifest's whole 20,500 questions was ~140 of this file's 150 CPU-s in a
fresh-clone suite; the eval path is the same at 5,000 rows, and tests/embed/test_embed.py loads
the same cut (one embedding for both) and checks the manifest's own sizes."""

import json
import textwrap

import pytest

from retrieval.cli import main
from retrieval.paths import data_dir

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (data_dir() / "gptcache_qqp").is_dir(),
                       reason=f"shared data folder absent: {data_dir() / 'gptcache_qqp'}"),
]


@pytest.mark.model
def test_eval_on_qqp_minilm_20k(tmp_path, capsys):
    spec = tmp_path / "qqp.yaml"
    spec.write_text(textwrap.dedent("""\
        name: qqp-real
        dataset: {name: qqp-minilm-20k, n_base: 5000}
        k: 10
        warmup: 8
        batch_repeats: 1
        indexes:
          - backend: hnswlib
            build: {M: 16, ef_construction: 100}
            search: {ef_search: [10, 40, 160]}
          - backend: faiss-ivf
            build: {nlist: 128}
            search: {nprobe: [1, 8, 64]}
          - backend: milvus
            build: {index_type: HNSW, M: 16, efConstruction: 100}
            search: {ef: [10, 160]}
    """))
    assert main(["eval", str(spec), "--out", str(tmp_path / "run"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["metric"] == "cosine" and summary["dataset"] == "qqp-minilm-20k[n_base=5000]"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["dataset"]["dim"] == 384 and manifest["dataset"]["n_base"] == 5000
    by_backend: dict[str, list[float]] = {}
    for row in summary["rows"]:
        by_backend.setdefault(row["backend"], []).append(row["recall"])
    assert set(by_backend) == {"hnswlib", "faiss-ivf", "milvus"}
    for backend, recalls in by_backend.items():
        # rows come in knob order: recall grows with the knob and reaches ~1 at the top
        assert recalls == sorted(recalls), (backend, recalls)
        assert recalls[-1] >= 0.97 and recalls[0] < recalls[-1], (backend, recalls)
