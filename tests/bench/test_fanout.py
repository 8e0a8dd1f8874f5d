"""Fan-out over several real indexes: modes agree, score fusion is a global top-k, a failing or
slow collection is reported per collection while the others still answer, bad configs raise."""

from __future__ import annotations

import time

import numpy as np
import pytest

from retrieval.bench.fanout.retriever import MODES, FanOut, Member
from retrieval.data import normalize_rows
from retrieval.errors import ConfigError
from retrieval.indexes import create_index

DIM = 32


def _member(name: str, x: np.ndarray, backend: str = "faiss-flat", **kw: object) -> Member:
    idx = create_index(backend, x.shape[1], "cosine")
    idx.build(x)
    return Member(name, idx, x.shape[1], "cosine", [f"d{i}" for i in range(len(x))],
                  backend=backend, **kw)  # type: ignore[arg-type]


Data = tuple[dict[str, np.ndarray], np.ndarray]


@pytest.fixture()
def data() -> Data:
    rng = np.random.default_rng(7)
    parts = {n: normalize_rows(rng.standard_normal((m, DIM)).astype(np.float32))
             for n, m in (("a", 800), ("b", 1200), ("c", 500))}
    q = normalize_rows(rng.standard_normal((20, DIM)).astype(np.float32))
    return parts, q


def test_modes_agree_and_score_fusion_is_global_top_k(data: Data) -> None:
    parts, q = data
    members = [_member(n, x, "hnswlib" if n == "b" else "faiss-flat") for n, x in parts.items()]
    members[1].index.set_search_params(ef_search=2000)  # exact enough to compare with flat
    union = create_index("faiss-flat", DIM, "cosine")
    union.build(np.vstack(list(parts.values())))
    keys = [f"{n}/d{i}" for n, x in parts.items() for i in range(len(x))]
    ref = union.search(q, 10)
    with FanOut(members, 10, fusion="score") as fan:
        results = {mode: fan.run(q, mode, warmup=2) for mode in MODES}
    for mode, run in results.items():
        assert len(run.latency_ms) == len(q) and np.all(run.latency_ms > 0)
        assert run.failures() == {}
        for i, ans in enumerate(run.answers):
            assert [d for d, _ in ans.fused] == [keys[j] for j in ref.ids[i]], mode
            assert [d for d, _ in ans.fused] == [d for d, _ in results["serial"].answers[i].fused]


def test_a_failing_collection_is_reported_and_the_others_answer(data: Data) -> None:
    parts, q = data
    members = [_member(n, x, "hnswlib") for n, x in parts.items()]
    with FanOut(members, 5) as fan:
        members[1].index.close()  # collection "b" fails mid-run: its index is gone
        for mode in MODES:
            run = fan.run(q[:4], mode)
            fails = run.failures()
            assert set(fails) == {"b"} and fails["b"]["errors"] == 4, mode
            assert "closed" in fails["b"]["first_error"]
            for ans in run.answers:
                assert ans.answers["a"].ok and ans.answers["c"].ok
                assert len(ans.fused) == 5
                assert {d.split("/")[0] for d, _ in ans.fused} <= {"a", "c"}


def test_a_slow_collection_times_out_per_collection() -> None:
    rng = np.random.default_rng(3)
    small = normalize_rows(rng.standard_normal((300, 64)).astype(np.float32))
    q = normalize_rows(rng.standard_normal((3, 64)).astype(np.float32))
    slow = _member("slow", small, timeout_s=1e-5)
    search = slow.index.search

    def slow_search(*a: object, **kw: object) -> object:
        time.sleep(0.5)  # far past the 10 us deadline, however loaded the machine is
        return search(*a, **kw)

    slow.index.search = slow_search  # type: ignore[method-assign]
    members = [_member("fast", small), slow]
    with FanOut(members, 5, timeout_s=10.0) as fan:
        for mode in MODES:
            run = fan.run(q, mode)
            fails = run.failures()
            assert set(fails) == {"slow"} and fails["slow"]["timeouts"] == 3, mode
            assert "timed out after 1e-05 s" in fails["slow"]["first_error"]
            assert all(a.answers["fast"].ok and len(a.fused) == 5 for a in run.answers)


def test_different_dims_are_a_config_error() -> None:
    rng = np.random.default_rng(0)
    a = _member("qqp", rng.standard_normal((50, 32)).astype(np.float32))
    b = _member("scifact", rng.standard_normal((50, 16)).astype(np.float32))
    with pytest.raises(ConfigError, match=r"different embedding dimensions \(qqp=32, scifact=16"):
        FanOut([a, b], 5)
    with FanOut([a], 5) as fan, pytest.raises(ConfigError, match="query vectors have 16"):
        fan.search(np.zeros(16, dtype=np.float32))


def test_other_config_errors() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 8)).astype(np.float32)
    a = _member("a", x)
    ip = create_index("faiss-flat", 8, "ip")
    ip.build(x)
    b = Member("b", ip, 8, "ip", [str(i) for i in range(50)])
    with pytest.raises(ConfigError, match="fusion 'score' needs comparable scores"):
        FanOut([a, b], 5, fusion="score")
    FanOut([a, b], 5, fusion="rrf").close()  # ranks are comparable across metrics
    with pytest.raises(ConfigError, match="unique"):
        FanOut([a, a], 5)
    with pytest.raises(ConfigError, match="unknown fusion"):
        FanOut([a], 5, fusion="max")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="timeout_s"):
        FanOut([a], 5, timeout_s=0)
    with FanOut([a], 5) as fan, pytest.raises(ConfigError, match="fan-out mode"):
        fan.run(x[:2], "processes")  # type: ignore[arg-type]


def test_shared_namespace_dedupes_by_doc_id() -> None:
    """Two overlapping shards of one corpus in one namespace: a doc found by both is fused once
    (RRF adds both contributions), and score merge equals exact search over the corpus."""
    rng = np.random.default_rng(11)
    x = normalize_rows(rng.standard_normal((600, 16)).astype(np.float32))
    q = normalize_rows(rng.standard_normal((10, 16)).astype(np.float32))
    keys = [f"doc{i}" for i in range(600)]
    shards = {"s1": np.arange(0, 400), "s2": np.arange(200, 600)}  # 200..399 in both
    members = []
    for name, rows in shards.items():
        idx = create_index("faiss-flat", 16, "cosine")
        idx.build(x[rows])
        members.append(Member(name, idx, 16, "cosine", [keys[i] for i in rows],
                              namespace="corpus"))
    full = create_index("faiss-flat", 16, "cosine")
    full.build(x)
    ref = full.search(q, 10)
    with FanOut(members, 10, fusion="score") as fan:
        for i in range(len(q)):
            got = [d for d, _ in fan.search(q[i]).fused]
            assert got == [f"corpus/doc{j}" for j in ref.ids[i]]
            assert len(set(got)) == len(got)
    seen_shared = 0
    with FanOut(members, 10) as fan:
        for i in range(len(q)):
            ans = fan.search(q[i])
            both = ({d for d, _ in ans.answers["s1"].ranked}
                    & {d for d, _ in ans.answers["s2"].ranked})
            fused = dict(ans.fused)
            assert len(fused) == len(ans.fused)
            for d in both:  # in both lists: two RRF contributions, above any single-list doc
                assert d in fused and fused[d] > 1 / 61
            seen_shared += len(both)
    assert seen_shared > 0
