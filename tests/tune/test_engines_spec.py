"""sweeps/engines.yaml compares engines on one graph: every engine builds the same M and
ef_construction (in its own names) and searches the same ef values."""

from __future__ import annotations

from pathlib import Path

from retrieval.tune.spec import load_spec

SPEC = Path(__file__).resolve().parents[2] / "sweeps" / "engines.yaml"
GRAPH = {  # backend -> (its M name, its ef_construction name, its ef knob)
    "hnswlib": ("M", "ef_construction", "ef_search"),
    "faiss-hnsw": ("M", "ef_construction", "ef_search"),
    "milvus": ("M", "efConstruction", "ef"),
    "qdrant": ("m", "ef_construct", "hnsw_ef"),
    "redis": ("M", "EF_CONSTRUCTION", "EF_RUNTIME"),
    "pgvector": ("m", "ef_construction", "ef_search"),
}


def test_every_engine_builds_the_same_graph():
    spec = load_spec(SPEC)
    assert spec.dataset == "qqp-minilm-20k"  # real MiniLM vectors
    seen = {}
    for entry in spec.indexes:
        m, efc, ef = GRAPH[entry.backend]
        seen[entry.backend] = (entry.build[m], entry.build[efc], tuple(entry.search[ef]))
    assert set(seen) == set(GRAPH)
    assert len(set(seen.values())) == 1, seen
    assert spec.tune.strategy == "target"
