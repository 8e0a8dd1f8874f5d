"""Live collections without a server: the spec, attach's refusals, query sources (npy / jsonl /
parquet / OTLP), the pacer, the query-shift measures, and the engine-agnostic in-place sweep on
a stand-in collection (the real one, pgvector, is tests/live/test_live_pgvector.py)."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from retrieval.errors import ConfigError
from retrieval.indexes.base import SearchResult
from retrieval.indexes.live import (
    LiveCollection,
    LiveDescription,
    LiveKnob,
    SupportsExactSearch,
    SupportsSnapshot,
)
from retrieval.live import attach, expand_env
from retrieval.live.pace import BudgetExhausted, Pacer
from retrieval.live.queries import load_queries, otlp_texts
from retrieval.live.shift import auroc, ladder, ood_scores, per_query_knob
from retrieval.live.spec import BudgetSpec, QueriesSpec, parse_live_spec
from retrieval.live.truth import Snapshot, engine_truth, snapshot_truth
from retrieval.live.tune import prepare, run_live

DIM, K = 8, 5


class StandIn:
    """A collection in memory: exact search by numpy; its "index" returns the exact top-k with
    the last ``k - round(k * min(1, ef / 40))`` results dropped, so recall grows with ``ef``."""

    def __init__(self, n: int = 400, seed: int = 0) -> None:
        self.x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
        self.ids = 5_000 + 3 * np.arange(n, dtype=np.int64)
        self.ef = 10
        self.searches = 0

    def describe(self) -> LiveDescription:
        return LiveDescription("standin", "mem", DIM, "l2", "hnsw", {"m": 4}, len(self.ids))

    def knobs(self) -> tuple[LiveKnob, ...]:
        return (LiveKnob("ef", "standin.ef", 1, 200, default=10),)

    def set_search_params(self, **params) -> None:
        self.ef = int(params["ef"])

    def search_exact(self, queries: np.ndarray, k: int) -> SearchResult:
        self.searches += queries.shape[0]
        d = ((queries[:, None, :] - self.x[None]) ** 2).sum(-1)
        order = np.argsort(d, axis=1, kind="stable")[:, :k]
        return SearchResult(self.ids[order], np.take_along_axis(d, order, 1).astype(np.float32))

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        res = self.search_exact(queries, k)
        keep = round(k * min(1.0, self.ef / 40))
        ids, dist = res.ids.copy(), res.distances.copy()
        ids[:, keep:], dist[:, keep:] = -1, np.inf
        return SearchResult(ids, dist)

    def iter_vectors(self, batch: int = 10_000, start: int = 0):
        for lo in range(start, len(self.ids), batch):
            yield self.ids[lo:lo + batch], self.x[lo:lo + batch]

    def close(self) -> None:
        pass


def test_stand_in_fits_the_contract():
    col = StandIn()
    assert isinstance(col, LiveCollection)
    assert isinstance(col, SupportsExactSearch) and isinstance(col, SupportsSnapshot)


# --- spec and attach ---------------------------------------------------------------------------
def test_spec_refuses_a_dataset_and_two_query_sources():
    base = {"live": {"engine": "pgvector"}, "queries": {"sample": 10}}
    with pytest.raises(ConfigError, match="no 'dataset'"):
        parse_live_spec({**base, "dataset": "x"})
    with pytest.raises(ConfigError, match="exactly one of log, otlp, sample"):
        parse_live_spec({**base, "queries": {"sample": 10, "log": "q.npy"}})
    with pytest.raises(ConfigError, match="budget"):
        parse_live_spec({**base, "budget": {"max_qps": 0}})
    spec = parse_live_spec(base)
    assert (spec.budget.max_qps, spec.budget.concurrency) == (20.0, 1)  # low by default


def test_attach_refuses_unknown_and_non_attachable_engines():
    with pytest.raises(ConfigError, match=r"live\.engine") as err:
        attach({"engine": "nosuch"}, "s.yaml")
    assert "pgvector" in str(err.value)
    with pytest.raises(ConfigError, match=r"live\.engine"):
        attach({"engine": "weaviate"}, "s.yaml")  # rwb exports to it, cannot attach


def test_env_expansion_names_the_field_never_a_value(monkeypatch):
    monkeypatch.setenv("RWB_T_DSN", "postgresql://u:pw@h/db")
    assert expand_env({"dsn": "${RWB_T_DSN}", "n": 3}, "live") == {
        "dsn": "postgresql://u:pw@h/db", "n": 3}
    monkeypatch.delenv("RWB_T_DSN")
    with pytest.raises(ConfigError, match=r"field 'live.dsn' uses \$\{RWB_T_DSN\}"):
        expand_env({"dsn": "${RWB_T_DSN}"}, "live", "s.yaml")


# --- queries -----------------------------------------------------------------------------------
def test_query_logs_npy_jsonl_parquet(tmp_path):
    col = StandIn()
    q = np.random.default_rng(2).standard_normal((6, DIM)).astype(np.float32)
    np.save(tmp_path / "q.npy", q)
    with (tmp_path / "q.jsonl").open("w") as fh:
        for i, v in enumerate(q):
            fh.write(json.dumps({"id": f"a{i}", "ts": i, "vector": v.tolist()}) + "\n")
    pd.DataFrame({"id": [f"p{i}" for i in range(6)], "vector": list(q)}).to_parquet(
        tmp_path / "q.parquet")
    for name in ("q.npy", "q.jsonl", "q.parquet"):
        got = load_queries(QueriesSpec(log=name), col, base=tmp_path)
        np.testing.assert_allclose(got.vectors, q, rtol=1e-6)
        assert not got.not_production
    assert load_queries(QueriesSpec(log="q.jsonl"), col, base=tmp_path).ids[0] == "a0"
    np.save(tmp_path / "bad.npy", np.zeros((3, DIM + 2), np.float32))
    with pytest.raises(ConfigError, match=r"bad.npy: field 'queries' must hold 8-dimensional"):
        load_queries(QueriesSpec(log="bad.npy"), col, base=tmp_path)


def test_sampled_queries_are_not_production():
    col = StandIn()
    got = load_queries(QueriesSpec(sample=7), col, seed=1)
    assert got.vectors.shape == (7, DIM) and got.not_production
    assert "not production traffic" in got.describe()["label"]
    rows = {tuple(v) for v in col.x}
    assert all(tuple(v) in rows for v in got.vectors)


def _span(attrs: dict, sid: str) -> dict:
    return {"spanId": sid, "startTimeUnixNano": "1", "attributes": [
        {"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]}


def test_otlp_texts_genai_and_openinference(tmp_path):
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [
        _span({"gen_ai.operation.name": "retrieval",
               "gen_ai.retrieval.query.text": "what is rwb"}, "s1"),
        _span({"openinference.span.kind": "RETRIEVER", "input.value": "exact top-k"}, "s2"),
        _span({"openinference.span.kind": "LLM", "input.value": "not a query"}, "s3"),
        _span({"app.query": "custom"}, "s4"),
    ]}]}]}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    (tmp_path / "b.jsonl").write_text(json.dumps(doc) + "\n" + json.dumps(doc) + "\n")
    got = otlp_texts(tmp_path / "a.json")
    assert [(i, t) for i, t, _ in got] == [("s1", "what is rwb"), ("s2", "exact top-k")]
    assert len(otlp_texts(tmp_path)) == 6  # both files, file then span order
    assert [t for _, t, _ in otlp_texts(tmp_path / "a.json", ["app.query"])] == ["custom"]


# --- pacer and query shift ---------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.slept += s
        self.t += s


def test_pacer_keeps_max_qps_and_stops_at_the_time_limit():
    clock = Clock()
    pacer = Pacer(BudgetSpec(max_qps=10, time_limit_s=100), clock=clock, sleep=clock.sleep)
    col = StandIn()
    q = col.x[:5]
    res, _ = pacer.run(col.search_exact, q, K)
    assert res.ids.shape == (5, K) and pacer.queries == 5
    assert clock.slept == pytest.approx(0.4)  # 5 searches at 10/s: 4 gaps of 0.1 s
    short = Pacer(BudgetSpec(max_qps=1, time_limit_s=2.5), clock=clock, sleep=clock.sleep)
    with pytest.raises(BudgetExhausted):
        short.run(col.search_exact, col.x[:10], K)
    assert short.queries == 3


def test_pacer_with_several_workers_keeps_order_and_counts():
    handles = [StandIn() for _ in range(3)]
    q = handles[0].x[:40] + 0.01
    one, _ = Pacer(BudgetSpec(max_qps=1e5)).run(handles[0].search_exact, q, K)
    pacer = Pacer(BudgetSpec(max_qps=1e5, concurrency=3))

    def slow(h: StandIn):
        def search(x: np.ndarray, k: int) -> SearchResult:
            time.sleep(0.002)  # a server round trip: the other workers take queries meanwhile
            return h.search_exact(x, k)
        return search

    many, lat = pacer.run([slow(h) for h in handles], q, K)
    assert (many.ids == one.ids).all() and pacer.queries == 40 and (lat > 0).all()
    assert sum(h.searches for h in handles[1:]) > 0  # the other handles did work
    capped = Pacer(BudgetSpec(max_qps=1e5, concurrency=1))
    capped.run([h.search_exact for h in handles[1:]], q, K)
    assert handles[2].searches == sum(h.searches for h in handles[2:]) and capped.queries == 40


def test_shift_measures():
    assert ladder(1, 40) == [1, 2, 4, 8, 16, 32, 40]
    assert ladder(5, 5) == [5]
    rec = np.array([[0.0, 1.0, 0.2], [0.9, 1.0, 0.5], [1.0, 1.0, 0.8]])
    assert per_query_knob([1, 2, 4], rec, 0.9) == [2, 1, None]
    np.testing.assert_allclose(ood_scores([0.5, 2.0, 9.0], [1.0, 2.0, 3.0, 4.0]),
                               [0.0, 0.5, 1.0])
    assert auroc(np.array([0.9, 0.8, 0.1, 0.2]), np.array([1, 1, 0, 0])) == 1.0
    assert auroc(np.array([0.5, 0.5]), np.array([1, 0])) == 0.5
    assert auroc(np.array([0.1, 0.2]), np.array([0, 0])) is None


# --- ground truth and the sweep on the stand-in ------------------------------------------------
def test_ground_truth_both_ways_on_the_stand_in(tmp_path):
    col = StandIn()
    q = np.random.default_rng(4).standard_normal((12, DIM)).astype(np.float32)
    a = engine_truth(col, q, K, Pacer(BudgetSpec(max_qps=1e5)))
    snap = Snapshot(tmp_path, col)
    info = snap.take(batch=64)
    assert info.rows == 400 and snap.take().fingerprint == info.fingerprint
    b = snapshot_truth(snap, q, K)
    assert (a.ids == b.ids).all()


def test_sweep_in_place_is_engine_agnostic(tmp_path):
    col = StandIn()
    np.save(tmp_path / "q.npy", np.random.default_rng(6).standard_normal((30, DIM))
            .astype(np.float32))
    spec = parse_live_spec({"live": {"engine": "standin"}, "queries": {"log": "q.npy"},
                            "lab_queries": {"sample": 20}, "k": K, "target_recall": 0.8,
                            "heldout_fraction": 0.2, "budget": {"max_qps": 1e5},
                            "confidence": {"method": "binomial"}},
                           source=str(tmp_path / "s.yaml"))
    s = run_live(spec, col, prepare(spec, col), tmp_path)
    # recall = round(5 * min(1, ef / 40)) / 5: 0.8 from ef 28, whose binomial lower bound (24 x 5
    # slots) is under 0.8; 1.0 from ef 37 (round(4.5) == 4 at ef 36)
    ef = s["chosen"]["search"]["ef"]
    assert s["chosen"]["recall_lb"] >= 0.8 and s["chosen"]["native"] == {"standin.ef": ef}
    assert ef == 37  # the smallest ef with round(5 * ef / 40) == 5
    assert s["heldout_meets"] is True and s["queries"]["heldout"] == 6
    assert s["live"]["spent"]["live_queries"] == col.searches
    shift = s["live"]["query_shift"]
    assert shift["lab_knob"] == 37 and shift["inflation_factor"] == 1.0
    assert shift["lab_queries"]["not_production_traffic"] is True
    assert len(shift["per_query"]) == 30


@pytest.mark.model
def test_texts_are_embedded_with_the_named_model(tmp_path):
    """A text log and OTLP spans give the packaged MiniLM's vectors (384-d), the same for the
    same text whichever source it came from."""
    col = StandIn()
    col.describe = lambda: LiveDescription("standin", "mem", 384, "cosine", None, {}, 400)
    texts = ["how do I tune hnsw", "what is recall at ten"]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    spans = [_span({"gen_ai.retrieval.query.text": t}, f"s{i}") for i, t in enumerate(texts)]
    (tmp_path / "t.json").write_text(json.dumps(
        {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    log = load_queries(QueriesSpec(log="q.jsonl"), col, base=tmp_path)
    otlp = load_queries(QueriesSpec(otlp="t.json"), col, base=tmp_path)
    assert log.vectors.shape == (2, 384) and log.texts == 2
    np.testing.assert_allclose(log.vectors, otlp.vectors, atol=1e-5)
    assert otlp.ids == ["s0", "s1"]
