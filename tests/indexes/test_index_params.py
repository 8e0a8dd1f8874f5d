"""Every bad input of the in-process backends fails with a one-line rwb error naming the field,
what is allowed and what was received."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from retrieval.engines.faiss.ivf import IvfBuild, IvfSearch
from retrieval.engines.hnswlib.index import HnswlibIndex
from retrieval.errors import ConfigError, DataError
from retrieval.indexes import create_index, get_backend
from retrieval.params import validate_params

DIM = 16
BACKENDS = {
    "hnswlib": {"M": 8, "ef_construction": 32},
    "faiss-hnsw": {"M": 8, "ef_construction": 32},
    "faiss-ivf": {"nlist": 4},
}


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((200, DIM)).astype(np.float32),
            rng.standard_normal((5, DIM)).astype(np.float32))


def _built(name: str, base: np.ndarray, **search: Any) -> Any:
    index = create_index(name, DIM, "l2", BACKENDS[name])
    index.build(base)
    if search:
        index.set_search_params(**search)
    return index


@contextlib.contextmanager
def _raises(kind: type[Exception], *words: str) -> Iterator[None]:
    """pytest.raises that also checks the one-line message names each word."""
    with pytest.raises(kind) as info:
        yield
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    assert "\n" not in msg


# --- constructor ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"dim": 0}, ("'dim'", ">= 1", "0")),
        ({"dim": True}, ("'dim'",)),
        ({"metric": "dot"}, ("'metric'", "l2, ip, cosine", "'dot'")),
        ({"seed": -1}, ("'seed'", "-1")),
        ({"threads": 0}, ("'threads'", "[1, 1024]", "0")),
    ],
)
def test_constructor_rejects(name: str, kwargs: dict[str, Any], words: tuple[str, ...]) -> None:
    cls = get_backend(name)
    args: dict[str, Any] = {"dim": DIM, "metric": "l2", **kwargs}
    with _raises(ConfigError, f"backend '{name}'", *words):
        cls(args.pop("dim"), args.pop("metric"), None, **args)


def test_constructor_rejects_foreign_build_model() -> None:
    with _raises(ConfigError, "'build'", "HnswBuild"):
        HnswlibIndex(DIM, "l2", IvfBuild())


# --- build params --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "build", "words"),
    [
        ("hnswlib", {"M": 1}, ("'M'", ">= 2", "1")),
        ("hnswlib", {"M": 257}, ("'M'", "<= 256", "257")),
        ("faiss-hnsw", {"M": "many"}, ("'M'", "an integer", "'many'")),
        ("hnswlib", {"ef_construction": 0}, ("'ef_construction'", ">= 1", "0")),
        ("faiss-hnsw", {"ef_construction": 20000}, ("'ef_construction'", "<= 16384")),
        ("hnswlib", {"ef_constrction": 10},
         ("unknown parameter", "Did you mean 'ef_construction'")),
        ("faiss-hnsw", {"m": 16}, ("unknown parameter", "'m'", "Did you mean 'M'")),
        ("faiss-ivf", {"nlist": 0}, ("'nlist'", ">= 1", "0")),
        ("faiss-ivf", {"nlists": 8}, ("Did you mean 'nlist'",)),
        ("faiss-ivf", {"encoding": "opq"},
         ("'encoding'", "'flat', 'sq8', 'sq4', 'pq' or 'rabitq'", "'opq'")),
        ("faiss-ivf", {"encoding": "pq"}, ("'pq_m'", "must be given when encoding is 'pq'")),
        ("faiss-ivf", {"pq_m": 4}, ("'pq_m'", "only when encoding is 'pq'", "'flat'", "4")),
        ("faiss-ivf", {"encoding": "sq8", "pq_nbits": 4}, ("'pq_nbits'", "'sq8'")),
        ("faiss-ivf", {"encoding": "pq", "pq_m": 4, "pq_nbits": 17}, ("'pq_nbits'", "<= 16")),
        ("faiss-ivf", {"encoding": "pq", "pq_m": 0}, ("'pq_m'", ">= 1")),
        ("faiss-ivf", {"encoding": "pq", "pq_m": 5}, ("'pq_m'", "divisor of the dimension 16",
                                                       "5")),
        ("faiss-ivf", {"refine": "maybe"}, ("'refine'", "true or false", "'maybe'")),
        ("faiss-ivf", {"train_size": 0}, ("'train_size'", ">= 1", "0")),
    ],
)
def test_bad_build_params(name: str, build: dict[str, Any], words: tuple[str, ...]) -> None:
    with _raises(ConfigError, f"backend '{name}' build params", *words):
        create_index(name, DIM, "l2", build)


@pytest.mark.parametrize(
    ("build", "n", "words"),
    [
        ({"nlist": 300}, 200, ("'nlist'", "<= the number of vectors (200)", "300")),
        ({"nlist": 8, "train_size": 4}, 200, ("'train_size'", ">= nlist (8)", "4")),
        ({"nlist": 4, "encoding": "pq", "pq_m": 4, "pq_nbits": 8}, 200,
         ("'train_size'", "2**pq_nbits = 256", "200")),
    ],
)
def test_ivf_build_needs_enough_vectors(
    build: dict[str, Any], n: int, words: tuple[str, ...], data: tuple[np.ndarray, np.ndarray]
) -> None:
    index = create_index("faiss-ivf", DIM, "l2", build)
    with _raises(ConfigError, "backend 'faiss-ivf' build params", *words):
        index.build(data[0][:n])


# --- search params ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "search", "words"),
    [
        ("hnswlib", {"ef_search": 0}, ("'ef_search'", ">= 1", "0")),
        ("faiss-hnsw", {"ef_search": 4097}, ("'ef_search'", "<= 4096", "4097")),
        ("hnswlib", {"ef_search": "x"}, ("'ef_search'", "an integer")),
        ("hnswlib", {"ef": 10}, ("unknown parameter", "'ef'", "Did you mean 'ef_search'")),
        ("faiss-ivf", {"nprobe": 0}, ("'nprobe'", ">= 1", "0")),
        ("faiss-ivf", {"nprob": 3}, ("Did you mean 'nprobe'",)),
        ("faiss-ivf", {"k_factor": 65}, ("'k_factor'", "<= 64", "65")),
        ("faiss-ivf", {"k_factor": 0}, ("'k_factor'", ">= 1", "0")),
    ],
)
def test_bad_search_params(name: str, search: dict[str, Any], words: tuple[str, ...]) -> None:
    index = create_index(name, DIM, "l2", BACKENDS[name])
    before = index.search_params
    with _raises(ConfigError, f"backend '{name}' search params", *words):
        index.set_search_params(**search)
    assert index.search_params == before


@pytest.mark.parametrize("name", ["hnswlib", "faiss-hnsw"])
def test_ef_search_below_k_rejected_at_search(
    name: str, data: tuple[np.ndarray, np.ndarray]
) -> None:
    index = _built(name, data[0], ef_search=5)
    with _raises(ConfigError, "'ef_search'", ">= k (10)", "5"):
        index.search(data[1], 10)
    assert index.search(data[1], 5).ids.shape == (5, 5)  # ef_search == k is fine


def test_nprobe_above_nlist_rejected(data: tuple[np.ndarray, np.ndarray]) -> None:
    index = _built("faiss-ivf", data[0], nprobe=5)
    with _raises(ConfigError, "'nprobe'", "[1, nlist=4]", "5"):
        index.search(data[1], 3)
    with _raises(ConfigError, "'nprobe'"):
        get_backend("faiss-ivf").check_combination(IvfBuild(nlist=4), IvfSearch(nprobe=5), 3)


def test_k_factor_needs_refine(data: tuple[np.ndarray, np.ndarray]) -> None:
    index = _built("faiss-ivf", data[0], k_factor=2)
    with _raises(ConfigError, "'k_factor'", "1 when build param refine is false", "2"):
        index.search(data[1], 3)
    cls = get_backend("faiss-ivf")
    cls.check_combination(IvfBuild(nlist=4, refine=True), IvfSearch(k_factor=2), 3)


@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.parametrize("k", [0, -2, 1.5, True, "3"])
def test_bad_k(name: str, k: Any, data: tuple[np.ndarray, np.ndarray]) -> None:
    index = _built(name, data[0])
    with _raises(ConfigError, "'k'", "an integer >= 1"):
        index.search(data[1], k)
    cls = get_backend(name)
    with _raises(ConfigError, "'k'"):
        cls.check_combination(index.build_params, index.search_params, k)


# --- knobs --------------------------------------------------------------------------------------
def test_knob_ranges() -> None:
    hnsw = get_backend("hnswlib")
    assert hnsw.knob_range("ef_search", hnsw.BuildParams(), 10) == (10, 4096)
    assert hnsw.most_accurate_search(hnsw.BuildParams()) == {"ef_search": 4096}
    ivf = get_backend("faiss-ivf")
    b = IvfBuild(nlist=64)
    assert ivf.knob_range("nprobe", b, 10) == (1, 64)
    assert ivf.knob_range("k_factor", b, 10) == (1, 1)
    assert ivf.knob_range("k_factor", IvfBuild(nlist=64, refine=True), 10) == (1, 64)
    assert ivf.most_accurate_search(b) == {"nprobe": 64, "k_factor": 1}


@pytest.mark.parametrize(("name", "knob", "hint"),
                         [("hnswlib", "ef", "ef_search"), ("faiss-ivf", "nprob", "nprobe")])
def test_unknown_knob(name: str, knob: str, hint: str) -> None:
    cls = get_backend(name)
    with _raises(ConfigError, f"unknown knob '{knob}'", f"Did you mean '{hint}'"):
        cls.knob_range(knob, cls.BuildParams(), 10)


def test_knob_range_k_above_ef_max() -> None:
    cls = get_backend("faiss-hnsw")
    with _raises(ConfigError, "'k'", "<= 4096", "5000"):
        cls.knob_range("ef_search", cls.BuildParams(), 5000)


# --- vectors, ids, queries, lifecycle ------------------------------------------------------------
def _with_nan(x: np.ndarray) -> np.ndarray:
    y = x.copy()
    y[3, 2] = np.nan
    return y


@pytest.mark.parametrize("name", list(BACKENDS))
@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda x: (x[:, :-1], None), ("dimension must be 16", "15")),
        (lambda x: (x[0, :5], None), ("2-d matrix",)),
        (lambda x: (x[None], None), ("2-d matrix",)),
        (lambda x: (_with_nan(x), None), ("NaN", "row 3")),
        (lambda x: (x, np.arange(len(x) - 1)), ("ids", "199")),
        (lambda x: (x, np.arange(len(x)).reshape(-1, 1)), ("ids", "1-d")),
        (lambda x: (x, np.arange(len(x)) + 0.5), ("ids must be integers", "float64")),
        (lambda x: (x, np.arange(len(x)) - 1), ("ids must be >= 0", "-1")),
        (lambda x: (x, np.zeros(len(x), dtype=np.int64)), ("ids must be unique", "id 0")),
        (lambda x: (x, np.arange(len(x), dtype=np.uint64) + np.uint64(2**63)), ("< 2**63",)),
    ],
)
def test_bad_build_input(
    name: str, make: Any, words: tuple[str, ...], data: tuple[np.ndarray, np.ndarray]
) -> None:
    index = create_index(name, DIM, "l2", BACKENDS[name])
    vectors, ids = make(data[0])
    with _raises(DataError, f"backend '{name}'", *words):
        index.build(vectors, ids)


@pytest.mark.parametrize("name", list(BACKENDS))
def test_bad_queries(name: str, data: tuple[np.ndarray, np.ndarray]) -> None:
    index = _built(name, data[0])
    with _raises(DataError, "queries", "dimension must be 16", "17"):
        index.search(np.zeros((2, DIM + 1), np.float32), 3)
    with _raises(DataError, "queries", "empty"):
        index.search(np.zeros((0, DIM), np.float32), 3)


@pytest.mark.parametrize("name", list(BACKENDS))
def test_lifecycle_errors(name: str, data: tuple[np.ndarray, np.ndarray]) -> None:
    index = create_index(name, DIM, "l2", BACKENDS[name])
    with _raises(ConfigError, "search() called before build()"):
        index.search(data[1], 3)
    index.build(data[0])
    index.close()
    index.close()
    with _raises(ConfigError, "closed"):
        index.search(data[1], 3)
    with _raises(ConfigError, "closed"):
        index.build(data[0])


def test_validate_params_models_directly() -> None:
    """The models alone (as a spec loader uses them) enforce the same rules."""
    with _raises(ConfigError, "spec.yaml", "'pq_m'"):
        validate_params(IvfBuild, {"encoding": "pq"}, where="spec.yaml")
    assert validate_params(IvfBuild, {"encoding": "pq", "pq_m": 8}).pq_nbits == 8
