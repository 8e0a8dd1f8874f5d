"""Vector/BEIR loaders and the dataset catalog, on small files written in tmp_path."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from retrieval.data import TextCollection
from retrieval.errors import ConfigError, DataError
from retrieval.loaders import catalog
from retrieval.loaders.beir import load_beir
from retrieval.loaders.embedded import embed_collection
from retrieval.loaders.vectors import (
    exact_distances,
    load_hdf5,
    load_npy,
    load_texmex,
    read_bvecs,
    read_fvecs,
    read_ivecs,
    write_bvecs,
    write_fvecs,
    write_hdf5,
    write_ivecs,
)

RNG = np.random.default_rng(7)
BASE = RNG.standard_normal((50, 8)).astype(np.float32)
QUERIES = RNG.standard_normal((5, 8)).astype(np.float32)


def brute_ids(base: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    d = ((queries[:, None, :] - base[None, :, :]) ** 2).sum(-1)
    return np.argsort(d, axis=1)[:, :k]


# --------------------------------------------------------------------------- HDF5


def test_hdf5_round_trip_euclidean_distances_become_squared(tmp_path: Path) -> None:
    ids = brute_ids(BASE, QUERIES, 10)
    euclid = np.sqrt(((QUERIES[:, None, :] - BASE[ids]) ** 2).sum(-1))
    path = write_hdf5(tmp_path / "toy-euclidean.hdf5", BASE, QUERIES, neighbors=ids,
                      distances=euclid, distance="euclidean")
    ds = load_hdf5(path)
    assert ds.name == "toy-euclidean" and ds.metric == "l2"
    np.testing.assert_array_equal(ds.base, BASE)
    np.testing.assert_array_equal(ds.gt_ids, ids)
    assert ds.gt_ids is not None and ds.gt_ids.dtype == np.int64
    assert ds.gt_distances is not None
    np.testing.assert_allclose(ds.gt_distances, euclid**2, rtol=1e-5)


def test_hdf5_angular_is_cosine_distance(tmp_path: Path) -> None:
    ids = brute_ids(BASE, QUERIES, 3)
    path = write_hdf5(tmp_path / "a.hdf5", BASE, QUERIES, neighbors=ids,
                      distances=np.zeros(ids.shape), distance="angular")
    ds = load_hdf5(path, name="ang")
    assert ds.metric == "cosine" and ds.name == "ang"
    b = BASE[ids[0, 0]]
    want = 1 - b @ QUERIES[0] / np.linalg.norm(b) / np.linalg.norm(QUERIES[0])
    assert ds.gt_distances is not None
    assert ds.gt_distances[0, 0] == pytest.approx(want, rel=1e-5)


def test_hdf5_missing_file_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"not found.*looked in .*nope\.hdf5"):
        load_hdf5(tmp_path / "nope.hdf5")


def test_hdf5_corrupt_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "corrupt.hdf5"
    bad.write_bytes(b"this is not hdf5 at all" * 10)
    with pytest.raises(DataError, match=r"corrupt\.hdf5.*not a readable HDF5"):
        load_hdf5(bad)


def test_hdf5_damage_met_while_reading_the_distance_attribute(tmp_path: Path) -> None:
    """The file opens and lists its datasets, but the 'distance' string lives in a global heap
    whose signature is damaged: reading the attribute fails inside HDF5."""
    import h5py

    path = tmp_path / "heap.hdf5"
    write_hdf5(path, BASE, QUERIES, distance="euclidean")
    raw = bytearray(path.read_bytes())
    at = raw.find(b"GCOL")
    assert at > 0
    raw[at: at + 4] = b"XXXX"
    path.write_bytes(bytes(raw))
    with h5py.File(path, "r") as fh:  # the damage is in the attribute, not the structure
        assert sorted(fh.keys()) == ["test", "train"]
    with pytest.raises(DataError, match=r"heap\.hdf5: damaged HDF5 content \(OSError: .*global "
                                        r"heap"):
        load_hdf5(path)
    assert load_hdf5(path, metric="l2").n_base == 50  # with metric= the attribute is not read


def test_hdf5_missing_keys_lists_keys_found(tmp_path: Path) -> None:
    import h5py

    path = tmp_path / "k.hdf5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("base", data=BASE)
        fh.create_dataset("test", data=QUERIES)
    with pytest.raises(DataError, match=r"missing dataset\(s\) train; keys found: base, test"):
        load_hdf5(path)


def test_hdf5_unknown_distance_attribute(tmp_path: Path) -> None:
    path = write_hdf5(tmp_path / "j.hdf5", BASE, QUERIES, distance="jaccard")
    with pytest.raises(DataError, match=r"distance.*received 'jaccard'"):
        load_hdf5(path)


def test_hdf5_wrong_query_dimension(tmp_path: Path) -> None:
    path = write_hdf5(tmp_path / "d.hdf5", BASE, QUERIES[:, :4])
    with pytest.raises(DataError, match=r"dimension must be 8; received 4"):
        load_hdf5(path)


def test_hdf5_nan_vectors_rejected(tmp_path: Path) -> None:
    base = BASE.copy()
    base[3, 2] = np.nan
    path = write_hdf5(tmp_path / "nan.hdf5", base, QUERIES)
    with pytest.raises(DataError, match=r"NaN or inf.*row 3"):
        load_hdf5(path)


def test_hdf5_empty_base_rejected(tmp_path: Path) -> None:
    path = write_hdf5(tmp_path / "e.hdf5", np.zeros((0, 8), np.float32), QUERIES)
    with pytest.raises(DataError, match=r"empty"):
        load_hdf5(path)


def test_hdf5_ground_truth_out_of_range(tmp_path: Path) -> None:
    path = write_hdf5(tmp_path / "g.hdf5", BASE, QUERIES, neighbors=np.full((5, 2), 50))
    with pytest.raises(DataError, match=r"ids must be in \[0, 50\)"):
        load_hdf5(path)


# --------------------------------------------------------------------------- TEXMEX / npy


def test_vecs_round_trips(tmp_path: Path) -> None:
    f = write_fvecs(tmp_path / "x.fvecs", BASE)
    np.testing.assert_array_equal(read_fvecs(f), BASE)
    ids = brute_ids(BASE, QUERIES, 4).astype(np.int32)
    np.testing.assert_array_equal(read_ivecs(write_ivecs(tmp_path / "x.ivecs", ids)), ids)
    u8 = RNG.integers(0, 255, (7, 16)).astype(np.uint8)
    np.testing.assert_array_equal(read_bvecs(write_bvecs(tmp_path / "x.bvecs", u8)), u8)


def test_load_texmex_with_groundtruth(tmp_path: Path) -> None:
    ids = brute_ids(BASE, QUERIES, 5)
    ds = load_texmex(write_fvecs(tmp_path / "sift_base.fvecs", BASE),
                     write_fvecs(tmp_path / "sift_query.fvecs", QUERIES),
                     write_ivecs(tmp_path / "sift_gt.ivecs", ids))
    assert ds.name == "sift" and ds.metric == "l2" and ds.n_base == 50
    np.testing.assert_array_equal(ds.gt_ids, ids)
    assert ds.gt_distances is not None
    assert np.all(np.diff(ds.gt_distances, axis=1) >= 0)  # exact top-k is sorted


def test_truncated_fvecs_is_named(tmp_path: Path) -> None:
    f = write_fvecs(tmp_path / "t.fvecs", BASE)
    f.write_bytes(f.read_bytes()[:-3])
    with pytest.raises(DataError, match=r"t\.fvecs.*not a multiple of the record size"):
        read_fvecs(f)


def test_texmex_wrong_query_dims(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"dimension must be 8; received 3"):
        load_texmex(write_fvecs(tmp_path / "b.fvecs", BASE),
                    write_fvecs(tmp_path / "q.fvecs", QUERIES[:, :3]))


def test_texmex_groundtruth_rows_must_match_queries(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"ground truth has 2 rows but there are 5 queries"):
        load_texmex(write_fvecs(tmp_path / "b.fvecs", BASE),
                    write_fvecs(tmp_path / "q.fvecs", QUERIES),
                    write_ivecs(tmp_path / "g.ivecs", np.zeros((2, 3), np.int32)))


def test_load_npy_round_trip_and_errors(tmp_path: Path) -> None:
    np.save(tmp_path / "b.npy", BASE)
    np.save(tmp_path / "q.npy", QUERIES)
    ds = load_npy(tmp_path / "b.npy", tmp_path / "q.npy", "ip")
    assert ds.metric == "ip" and ds.dim == 8
    with pytest.raises(ConfigError, match=r"metric.*received 'dot'"):
        load_npy(tmp_path / "b.npy", tmp_path / "q.npy", "dot")  # type: ignore[arg-type]
    (tmp_path / "bad.npy").write_text("nope")
    with pytest.raises(DataError, match=r"bad\.npy: not an \.npy file"):
        load_npy(tmp_path / "bad.npy", tmp_path / "q.npy", "l2")
    with pytest.raises(DataError, match=r"looked in .*missing\.npy"):
        load_npy(tmp_path / "missing.npy", tmp_path / "q.npy", "l2")


def test_exact_distances_ip_and_padding() -> None:
    ids = np.array([[0, -1]])
    d = exact_distances(BASE, QUERIES[:1], ids, "ip")
    assert d[0, 0] == pytest.approx(-(BASE[0] @ QUERIES[0]), rel=1e-5)
    assert np.isinf(d[0, 1])


# --------------------------------------------------------------------------- BEIR


def write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": "d1", "title": "Cats", "text": "Cats purr."},
            {"_id": "d2", "title": "", "text": "Dogs bark. "},
            {"_id": "d3", "title": "Birds", "text": "Birds sing."}]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    qs = [{"_id": "q1", "text": "what purrs"}, {"_id": "q2", "text": "who barks"},
          {"_id": "q3", "text": "not judged in test"}]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in qs))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\nq2\td3\t0\n")
    return folder


def test_beir_round_trip(tmp_path: Path) -> None:
    coll = load_beir(write_beir(tmp_path / "toy"))
    assert coll.name == "toy"
    assert coll.corpus == {"d1": "Cats Cats purr.", "d2": "Dogs bark.", "d3": "Birds Birds sing."}
    assert list(coll.queries) == ["q1", "q2"]  # only the queries judged in the split
    assert coll.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}}


def test_beir_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"folder not found.*looked in"):
        load_beir(tmp_path / "absent")
    folder = write_beir(tmp_path / "toy")
    with pytest.raises(DataError, match=r"no qrels for split 'dev'.*splits found: test"):
        load_beir(folder, split="dev")
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n{broken\n')
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: not valid JSON"):
        load_beir(folder)
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(DataError, match=r"file not found: corpus\.jsonl \(looked in"):
        load_beir(folder)


def test_beir_non_utf8_files_name_file_and_line(tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "toy")
    (folder / "corpus.jsonl").write_bytes(b'{"_id": "d1", "text": "x"}\n'
                                          b'{"_id": "d2", "text": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"corpus\.jsonl:2: not UTF-8 text \(byte 0xe9 at "
                                        r"column 27\)"):
        load_beir(folder)
    folder = write_beir(tmp_path / "toy2")
    (folder / "qrels" / "test.tsv").write_bytes(b"query-id\tcorpus-id\tscore\nq1\td\xff1\t1\n")
    with pytest.raises(DataError, match=r"test\.tsv:2: not UTF-8 text \(byte 0xff"):
        load_beir(folder)


# --------------------------------------------------------------------------- catalog


@pytest.fixture
def manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "manifests"
    folder.mkdir()
    monkeypatch.setenv("RWB_DATASETS_DIR", str(folder))
    return folder


def test_repo_manifests_are_valid() -> None:
    entries = catalog.list_datasets()
    names = {e.name for e in entries}
    assert {"synthetic-20k", "synthetic-small", "qqp-minilm", "qqp-minilm-20k",
            "reuters-minilm", "scifact-minilm"} <= names
    assert all(e.error is None for e in entries), [e.error for e in entries if e.error]


def test_resolve_synthetic_small() -> None:
    ds = catalog.resolve_dataset("synthetic-small")
    assert (ds.n_base, ds.dim, ds.n_queries, ds.metric) == (3000, 32, 100, "l2")
    assert ds.name == "synthetic-small"


def test_resolve_inline_and_override() -> None:
    ds = catalog.resolve_dataset({"kind": "synthetic", "n": 200, "dim": 4, "n_queries": 3})
    assert (ds.n_base, ds.dim, ds.n_queries) == (200, 4, 3)
    ov = catalog.resolve_dataset({"name": "synthetic-small", "n_queries": 7})
    assert ov.n_queries == 7 and ov.n_base == 3000 and ov.name.startswith("synthetic-small[")


def test_unknown_dataset_name_suggests_closest() -> None:
    with pytest.raises(ConfigError, match=r"sweep: unknown dataset 'synthetic-smal'.*"
                                          r"Did you mean 'synthetic-small'"):
        catalog.resolve_dataset("synthetic-smal", where="sweep")


def test_bad_manifest_field_names_file_and_field(manifests: Path) -> None:
    (manifests / "bad.yaml").write_text("kind: synthetic\nn: 100\ndim: 8\nn_querys: 5\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*n_querys.*Did you mean 'n_queries'"):
        catalog.resolve_dataset("bad")
    (manifests / "neg.yaml").write_text("kind: synthetic\nn: 0\n")
    with pytest.raises(ConfigError, match=r"neg\.yaml: field 'n' must be >= 1; received 0"):
        catalog.resolve_dataset("neg")
    (manifests / "kind.yaml").write_text("kind: parquet\npath: x\n")
    with pytest.raises(ConfigError, match=r"kind\.yaml: unknown dataset kind 'parquet'"):
        catalog.resolve_dataset("kind")
    (manifests / "coll.yaml").write_text("kind: text\ncollection: scifakt\n")
    with pytest.raises(ConfigError, match=r"coll\.yaml: field 'collection'.*did you mean "
                                          r"'scifact'.*received 'scifakt'"):
        catalog.resolve_dataset("coll")
    (manifests / "split.yaml").write_text("kind: text\ncollection: scifact\nsplit: dev\n")
    with pytest.raises(ConfigError, match=r"split\.yaml: field 'split': one of test, train "
                                          r"for scifact; received 'dev'"):
        catalog.resolve_dataset("split")
    (manifests / "nq.yaml").write_text("kind: text\ncollection: qqp-questions\n")
    with pytest.raises(ConfigError, match=r"nq\.yaml: field 'n_queries': an integer >= 1 for "
                                          r"collection 'qqp-questions' \(corpus only"):
        catalog.resolve_dataset("nq")
    (manifests / "yaml.yaml").write_text("kind: [unclosed\n")
    with pytest.raises(ConfigError, match=r"yaml\.yaml: invalid YAML"):
        catalog.resolve_dataset("yaml")
    listed = {e.name: e for e in catalog.list_datasets()}
    assert listed["bad"].kind == "invalid" and "n_querys" in (listed["bad"].error or "")


def test_bad_manifests_are_listed_beside_the_good_ones(manifests: Path) -> None:
    """Non-UTF-8, duplicate keys, a path no OS accepts, a '~user' of no user: each is one
    'invalid' row naming its file; the good manifest is still listed."""
    (manifests / "good.yaml").write_text("kind: synthetic\nn: 10\ndim: 4\nn_queries: 2\n")
    (manifests / "latin.yaml").write_bytes(b"kind: synthetic\ndescription: caf\xe9\n")
    (manifests / "dup.yaml").write_text("kind: synthetic\nn: 10\nn: 20\n")
    (manifests / "nul.yaml").write_text('kind: hdf5\npath: "a\\0b.hdf5"\n')
    (manifests / "tilde.yaml").write_text("kind: hdf5\npath: ~no-such-user-rwb/x.hdf5\n")
    listed = {e.name: e for e in catalog.list_datasets()}
    assert listed["good"].error is None and listed["good"].kind == "synthetic"
    errors = {n: listed[n].error or "" for n in ("latin", "dup", "nul", "tilde")}
    assert errors["latin"].startswith(f"{manifests / 'latin.yaml'}: not UTF-8 text (byte 0xe9")
    assert errors["dup"] == (f"{manifests / 'dup.yaml'}: invalid YAML at line 3, column 1: "
                             f"duplicate key 'n'")
    assert errors["nul"].startswith(f"{manifests / 'nul.yaml'}: field 'path' must be a file path "
                                    f"without NUL bytes")
    assert errors["tilde"].startswith(f"{manifests / 'tilde.yaml'}: field 'path' must be a path "
                                      f"whose '~' can be expanded")
    assert all("\n" not in e for e in errors.values())
    with pytest.raises(ConfigError, match=r"dup\.yaml: invalid YAML.*duplicate key 'n'"):
        catalog.resolve_dataset("dup")


def test_manifest_relative_paths_and_presence(manifests: Path) -> None:
    files = manifests / "files"
    files.mkdir()
    ids = brute_ids(BASE, QUERIES, 3)
    write_hdf5(files / "toy.hdf5", BASE, QUERIES, neighbors=ids, distance="euclidean")
    (manifests / "toy.yaml").write_text("kind: hdf5\ndescription: toy\npath: files/toy.hdf5\n")
    (manifests / "gone.yaml").write_text(
        "kind: texmex\nbase: files/b.fvecs\nqueries: files/q.fvecs\n")
    ds = catalog.resolve_dataset("toy")
    assert ds.name == "toy" and ds.gt_ids is not None
    listed = {e.name: e for e in catalog.list_datasets()}
    assert listed["toy"].available
    assert not listed["gone"].available
    assert [f.present for f in listed["gone"].files] == [False, False]
    with pytest.raises(DataError, match=r"b\.fvecs \(looked in .*manifests/files/b\.fvecs\)"):
        catalog.resolve_dataset("gone")


def test_load_text_collection_by_manifest_and_unknown(manifests: Path, tmp_path: Path) -> None:
    folder = write_beir(tmp_path / "toy")
    (manifests / "toy.yaml").write_text(f"kind: text\ncollection: beir:{folder}\n")
    coll = catalog.load_text_collection("toy")
    assert len(coll.corpus) == 3 and list(coll.queries) == ["q1", "q2"]
    with pytest.raises(ConfigError, match=r"unknown text collection 'reuter'.*'reuters'"):
        catalog.load_text_collection("reuter")


class HashEmbedder:
    """Deterministic stand-in beside the real MiniLM (tests/embed/test_embed.py):
    checks the sampling logic of embed_collection without loading a model."""

    model_id = "hash-test"
    dim = 6

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        seeds = [int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) for t in texts]
        return np.stack([np.random.default_rng(s).standard_normal(6) for s in seeds]).astype(
            np.float32)


def test_embed_collection_holds_out_queries_for_corpus_only() -> None:
    corpus = {f"d{i}": f"text number {i % 40}" for i in range(60)}  # 20 exact duplicates
    coll = TextCollection(name="toy", corpus=corpus)
    with pytest.raises(ConfigError, match=r"field 'n_queries' must be an integer >= 1"):
        embed_collection(coll, name="t", embedder=HashEmbedder())
    td = embed_collection(coll, name="t", n_queries=5, n_base=20, embedder=HashEmbedder())
    assert td.queries_held_out and len(td.query_ids) == 5 and len(td.base_ids) == 20
    assert not set(td.query_ids) & set(td.base_ids)
    assert td.dataset.info["n_duplicates_dropped"] == 20
    np.testing.assert_allclose(np.linalg.norm(td.dataset.base, axis=1), 1.0, rtol=1e-5)
    again = embed_collection(coll, name="t", n_queries=5, n_base=20, embedder=HashEmbedder())
    assert again.base_ids == td.base_ids  # seeded


def test_embed_collection_uses_collection_queries() -> None:
    coll = TextCollection(name="toy", corpus={"a": "x y", "b": "", "c": "z"},
                          queries={"q1": "x", "q2": "zz"}, qrels={"q1": {"a": 1}})
    td = embed_collection(coll, name="t", metric="ip", embedder=HashEmbedder())
    assert td.query_ids == ("q1", "q2") and td.base_ids == ("a", "c")
    assert td.dataset.info["n_blank_dropped"] == 1 and td.dataset.metric == "ip"
    with pytest.raises(ConfigError, match=r"n_queries.*<= the 2 queries"):
        embed_collection(coll, name="t", n_queries=3, embedder=HashEmbedder())


def test_shared_folder_missing_names_every_place(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval.loaders import shared

    places = [tmp_path / "env-data", tmp_path / "repo-data"]
    monkeypatch.setattr(shared, "data_dir_candidates", lambda: places)
    monkeypatch.setattr(catalog, "data_dir_candidates", lambda: places)
    with pytest.raises(DataError, match=r"'scifact' not found; looked in: .*env-data/scifact, "
                                        r".*repo-data/scifact"):
        shared.load_scifact()
    (places[1] / "gptcache_qqp").mkdir(parents=True)
    with pytest.raises(DataError, match=r"file not found: similiar_qqp_full\.json\.gz"):
        shared.load_qqp_questions()
    entry = {e.name: e for e in catalog.list_datasets()}["scifact-minilm"]
    assert [f.path for f in entry.files] == [str(p / "scifact") for p in places]
    assert not entry.available


def test_an_npy_larger_than_the_address_space_limit_is_one_line(tmp_path):
    """Issue 34 MEDIUM 7: under ``ulimit -v`` the map failed and rwb silently read the whole
    file instead, dying with MemoryError; now one line naming the file and the limit."""
    import subprocess
    import sys
    import textwrap

    header = np.lib.format.header_data_from_array_1_0(np.zeros((1, 16), dtype=np.float32))
    header["shape"] = (80_000_000, 16)  # 5.1 GB of float32, a sparse file here
    path = tmp_path / "big.npy"
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.truncate(fh.tell() + 80_000_000 * 16 * 4)
    np.save(tmp_path / "q.npy", np.zeros((2, 16), dtype=np.float32))
    code = textwrap.dedent(f"""
        import resource, sys
        from retrieval.loaders.vectors import load_npy
        from retrieval.errors import DataError
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))
        try:
            load_npy({str(path)!r}, {str(tmp_path / 'q.npy')!r}, "l2")
        except DataError as exc:
            print("DataError:", exc)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1",
                                            "OPENBLAS_NUM_THREADS": "1"})
    out = proc.stdout.strip()
    assert proc.returncode == 0 and out.startswith("DataError:"), proc.stderr[-1500:]
    assert "big.npy" in out and "ulimit -v" in out and "\n" not in out


def test_complex_vectors_and_unbounded_synthetic_sizes_are_one_line(tmp_path):
    """Issue 34 LOW: a complex64 .npy was accepted with its imaginary part dropped; synthetic
    sizes were unbounded (n: 10**12, dim: 10**7)."""
    from retrieval.errors import ConfigError
    from retrieval.loaders.synthetic import make_synthetic

    np.save(tmp_path / "b.npy", (np.ones((20, 4)) + 1j).astype(np.complex64))
    np.save(tmp_path / "q.npy", np.ones((2, 4), dtype=np.float32))
    with pytest.raises(DataError, match="expected real vectors; received complex dtype"):
        load_npy(tmp_path / "b.npy", tmp_path / "q.npy", "l2")
    for kw, field in (({"n": 10**12}, "'n'"), ({"dim": 10**7}, "'dim'"),
                      ({"n": 10**9, "dim": 4096}, "'n'")):
        with pytest.raises(ConfigError) as err:
            make_synthetic(**kw)
        assert field in str(err.value) and "\n" not in str(err.value), str(err.value)
