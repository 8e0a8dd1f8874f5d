import textwrap

import pytest

from retrieval.errors import BackendError, ConfigError
from retrieval.tune.spec import build_grid, load_spec, parse_spec, search_grid

BASE = {"dataset": "synthetic-small", "k": 10}


def spec(**entry):
    return {**BASE, "indexes": [entry]}


def test_grid_expansion_and_resolution():
    s = parse_spec(spec(backend="hnswlib", build={"M": [8, 16], "ef_construction": 50},
                        search={"ef_search": [10, 20, 40]}))
    e = s.indexes[0]
    assert build_grid(e) == [{"M": 8, "ef_construction": 50}, {"M": 16, "ef_construction": 50}]
    assert [g["ef_search"] for g in search_grid(e)] == [10, 20, 40]


def test_quickstart_spec_is_valid():
    s = load_spec("sweeps/quickstart.yaml")
    assert {e.backend for e in s.indexes} == {"faiss-flat", "hnswlib", "faiss-hnsw", "faiss-ivf",
                                             "milvus"}


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (spec(backend="hnswlb"), r"unknown backend 'hnswlb'.*Did you mean 'hnswlib'"),
        (spec(backend="hnswlib", search={"ef_serch": 10}),
         r"unknown parameter.*'ef_serch'.*Did you mean 'ef_search'"),
        (spec(backend="hnswlib", search={"ef_search": [5, 20]}),
         r"ef_search.*>= k \(10\).*received 5"),
        (spec(backend="faiss-ivf", build={"nlist": 16}, search={"nprobe": [4, 32]}),
         r"nprobe.*nlist=16.*received 32"),
        (spec(backend="hnswlib", build={"M": "sixteen"}),
         r"field 'indexes\[0\]\.build\.M' must be an integer; received 'sixteen'"),
        (spec(backend="hnswlib", search={"ef_search": []}), r"non-empty list"),
        ({**BASE, "k": "ten", "indexes": [{"backend": "faiss-flat"}]},
         r"field 'k' must be an integer; received 'ten'"),
        ({**BASE, "indexes": []}, r"indexes"),
        ({"k": 10, "indexes": [{"backend": "faiss-flat"}]}, r"field 'dataset' must be given"),
        ({**BASE, "bogus": 1, "indexes": [{"backend": "faiss-flat"}]}, r"bogus"),
        ({**BASE, "target_recall": 1.5, "indexes": [{"backend": "faiss-flat"}]},
         r"target_recall' must be <= 1"),
    ],
)
def test_bad_specs_name_field_allowed_and_received(data, match):
    with pytest.raises((ConfigError, BackendError), match=match):
        parse_spec(data, source="x.yaml")


def test_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("dataset: synthetic-small\nindexes:\n  - backend: hnswlib\n    build: {M: -3}\n")
    with pytest.raises(ConfigError, match=rf"{p}: field 'indexes\[0\]\.build\.M' must be >= 2; "
                                          r"received -3"):
        load_spec(p)


def test_malformed_yaml_names_file_and_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text(textwrap.dedent("""\
        dataset: synthetic-small
        indexes:
          - backend: hnswlib
            build: {M: 16
    """))
    with pytest.raises(ConfigError, match=rf"{p}: malformed YAML at line \d+"):
        load_spec(p)


def test_missing_and_non_mapping_spec(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    p = tmp_path / "list.yaml"
    p.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping; received list"):
        load_spec(p)


@pytest.mark.parametrize("loader", [
    "retrieval.tune.spec:load_spec",
    "retrieval.cache.spec:load_cache_spec",
    "retrieval.rerank.spec:load_rerank_spec",
    "retrieval.bench.fanout.spec:load_fanout_spec",
    "retrieval.study.spec:load_study_spec",
])
def test_every_spec_loader_names_file_and_line_of_bad_yaml(tmp_path, loader):
    import importlib

    module, name = loader.split(":")
    load = getattr(importlib.import_module(module), name)
    p = tmp_path / "broken.yaml"
    p.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigError, match=rf"{p}: malformed YAML at line \d+, column \d+"):
        load(p)
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "missing.yaml")
