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


def test_duplicate_keys_in_a_sweep_spec_are_an_error(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("dataset: synthetic-small\nk: 10\nindexes:\n  - backend: hnswlib\n"
                 "    search: {ef_search: 10, ef_search: 20}\n")
    with pytest.raises(ConfigError, match=rf"{p}: malformed YAML at line 5, column \d+: "
                                          r"duplicate key 'ef_search'"):
        load_spec(p)
    p.write_text("dataset: synthetic-small\nk: 10\nk: 5\nindexes:\n  - backend: faiss-flat\n")
    with pytest.raises(ConfigError, match=rf"{p}: malformed YAML at line 3, column 1: "
                                          r"duplicate key 'k'"):
        load_spec(p)


def test_non_utf8_spec_names_the_byte(tmp_path):
    p = tmp_path / "latin1.yaml"
    p.write_bytes(b"dataset: synthetic-small\nname: caf\xe9\nindexes:\n  - backend: faiss-flat\n")
    with pytest.raises(ConfigError, match=rf"{p}: not UTF-8 text \(byte 0xe9 at offset 34\)"):
        load_spec(p)


def test_unknown_field_in_a_nested_block_lists_that_blocks_fields():
    from retrieval.tune.spec import TuneSpec

    allowed = ", ".join(sorted(TuneSpec.model_fields))
    with pytest.raises(ConfigError) as info:
        parse_spec({**BASE, "indexes": [{"backend": "faiss-flat"}], "tune": {"n_trial": 5}},
                   source="x.yaml")
    assert str(info.value) == (f"x.yaml: unknown parameter 'n_trial' (field 'tune.n_trial'); "
                               f"allowed: {allowed}. Did you mean 'n_trials'?")
    with pytest.raises(ConfigError, match=r"field 'tune\.confidence\.lvl'\); allowed: level, "
                                          r"method, resamples\. Did you mean 'level'\?"):
        parse_spec({**BASE, "indexes": [{"backend": "faiss-flat"}],
                    "tune": {"confidence": {"lvl": 0.9}}}, source="x.yaml")


def test_top_level_unknown_and_missing_fields_hide_internal_ones():
    with pytest.raises(ConfigError) as info:
        parse_spec({**BASE, "bogus": 1, "indexes": [{"backend": "faiss-flat"}]},
                   source="x.yaml")
    assert "allowed: adaptive, batch_repeats, cold, dataset," in str(info.value)
    assert "source" not in str(info.value)  # internal (excluded) field, never offered
    with pytest.raises(ConfigError) as info:
        parse_spec({"k": 10, "indexes": [{"backend": "faiss-flat"}]}, source="x.yaml")
    assert str(info.value) == "x.yaml: field 'dataset' must be given (it is required)"


@pytest.mark.parametrize(("url", "module", "extra"), [
    ("postgresql://u:hunter2@127.0.0.1:1/db", "psycopg", "postgresql+psycopg2://"),
    ("mysql://u:hunter2@127.0.0.1:1/db", "MySQLdb", "mysql+pymysql://"),
    ("mysql+pymysql://u:hunter2@127.0.0.1:1/db", "pymysql", None),
])
def test_missing_rdb_driver_gives_rwbs_install_hint(url, module, extra, monkeypatch):
    import sys

    from retrieval.tune.storage import open_storage

    # the driver made missing whether or not it is installed here (CI has psycopg for the
    # pgvector backend): ``import psycopg`` then fails the way it does without the package
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ConfigError) as info:
        open_storage(url)
    text = str(info.value)
    assert text.startswith(f"--storage '{url.split('://')[0]}://***@127.0.0.1:1/db': its "
                           f"database driver is not installed (module '{module}' is missing)")
    assert "pip install 'retrieval-workbench[storage]'" in text and "hunter2" not in text
    assert (extra in text) if extra else ("write the URL" not in text)


def test_pydantic_field_paths_use_the_index_form():
    """A field inside a list is named indexes[0].x, the form rwb's own checks use."""
    from retrieval.errors import ConfigError
    from retrieval.tune.spec import parse_spec

    with pytest.raises(ConfigError, match=r"indexes\[0\]\.dup"):
        parse_spec({"dataset": "synthetic-small", "indexes": [{"backend": "faiss-flat",
                                                                "dup": 1}]}, source="s.yaml")


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64])
def test_a_seed_outside_0_to_2_32_is_refused_by_rwb_sweep_in_one_line(tmp_path, capsys, seed):
    """Issue 34 MEDIUM 7: ``rwb sweep`` refused it only in a numpy traceback after the build."""
    import yaml

    from retrieval.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "name": "s", "seed": seed, "k": 10,
        "dataset": {"kind": "synthetic", "n": 300, "dim": 8, "n_queries": 20, "metric": "l2"},
        "indexes": [{"backend": "faiss-flat"}]}))
    assert main(["sweep", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "field 'seed'" in err and str(seed) in err, err
    assert not (tmp_path / "r").exists()


def test_an_alias_bomb_value_is_cut_in_the_error_line(tmp_path, capsys):
    """Issue 34 MEDIUM 7: the error repeated the expanded value (522 MB on one line)."""
    from retrieval.cli import main

    lines = ['_a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefg", "bcdefgh"):
        lines.append(f"_{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines += ["name: bomb", "dataset: *h", "k: 10", "indexes: [{backend: faiss-flat}]"]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert main(["eval", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "field 'dataset" in err and len(err) < 1000, err[:300]


@pytest.mark.parametrize("nest", [("[", "]", ""), ("{a: ", "}", "1")])
def test_a_spec_thousands_of_levels_deep_is_one_line(tmp_path, capsys, nest):
    """Issue 34 LOW: 5,000 nested levels were a RecursionError traceback."""
    from retrieval.cli import main

    open_, close, leaf = nest
    path = tmp_path / "deep.yaml"
    path.write_text("name: deep\nk: 10\nindexes: [{backend: faiss-flat}]\ndataset: "
                    + open_ * 5000 + leaf + close * 5000 + "\n")
    assert main(["eval", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nested too deeply" in err and "deep.yaml" in err
