"""`rwb watch`, the pure parts: sampling, recall and its bound, windows, the alarm rule, the
advice, the log follower; and the loop on an in-memory collection (a fake beside the real
pgvector test in tests/live/test_live_watch.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.errors import ConfigError, DataError
from retrieval.indexes.base import SearchResult
from retrieval.indexes.live import LiveDescription, LiveKnob
from retrieval.live.watch import (
    AlarmRule,
    WatchSection,
    advice,
    knob_values,
    lab_gap,
    query_recall,
    recall_lower,
    sampled,
    window_figures,
)
from retrieval.live.watch_log import follow_jsonl, parse_line
from retrieval.live.watch_run import Watcher
from retrieval.stats.binomial import wilson_upper
from retrieval.tune.decide import binomial_lower


def test_sampling_is_seeded_and_near_the_share():
    keys = [str(i) for i in range(20_000)]
    picked = [k for k in keys if sampled(k, 0.05, seed=3)]
    assert 800 < len(picked) < 1200
    assert picked == [k for k in keys if sampled(k, 0.05, seed=3)]
    assert picked != [k for k in keys if sampled(k, 0.05, seed=4)]
    assert all(sampled(k, 1.0, 0) for k in keys[:10])


def test_query_recall_by_id():
    assert query_recall(np.array([5, 6, 7]), np.array([7, 6, 9]), 3) == pytest.approx(2 / 3)
    assert query_recall(np.array([5, -1, -1]), np.array([5, 8, -1]), 3) == 0.5
    assert query_recall(np.array([-1]), np.array([-1]), 1) == 1.0


def test_lower_bound_is_the_sweeps_binomial_bound():
    per = np.array([1.0, 0.9, 0.8, 1.0, 0.7] * 40)
    lo = recall_lower(per, 10, 0.95)
    assert lo == pytest.approx(binomial_lower(per, 10, 0.95), abs=1e-9)
    hits = int(np.rint(per * 10).sum())
    assert lo == pytest.approx(1 - float(wilson_upper(2000 - hits, 2000, 0.95)))
    assert lo < per.mean()
    assert recall_lower([], 10, 0.95) == 0.0


def test_window_figures_keys_and_percentiles():
    fig = window_figures(3, [1.0, 0.5], [1.0, 2.0], 10, 0.95)
    assert fig["window"] == 3 and fig["checked"] == 2 and fig["recall"] == 0.75
    assert fig["p50_ms"] == 1.5 and fig["p99_ms"] == pytest.approx(1.99)
    assert fig["alarm"] is False and 0 < fig["recall_lower"] < 0.75


def test_alarm_needs_consecutive_windows_and_clears():
    rule = AlarmRule(target=0.9, windows_to_alarm=2)
    assert rule.update(0.85) == (False, False)
    assert rule.update(0.95) == (False, False)  # the streak is broken
    assert rule.update(0.85) == (False, False)
    assert rule.update(0.80) == (True, True)    # raised now
    assert rule.update(0.80) == (True, False)   # still up, not raised again
    assert rule.update(0.92) == (False, False)  # cleared
    assert rule.raised == 1


def test_knob_values_and_advice_lines():
    assert knob_values(40, 100, (1.5, 2.0, 3.0, 4.0)) == [60, 80, 100]
    assert knob_values(100, 100, (2.0,)) == []
    action, line = advice(target=0.95, lower=0.91, windows=2, knob="ef_search", value=40,
                          tuned=80, tried=[60, 80])
    assert action == "re-tune" and "re-tune ef_search 40 -> 80 to hold 0.95" in line
    action, line = advice(target=0.95, lower=0.91, windows=2, knob="ef_search", value=40,
                          tuned=None, tried=[60, 80, 160])
    assert action == "rebuild" and "no ef_search up to 160" in line and "vacuum" in line
    assert advice(target=0.9, lower=0.5, windows=3, knob=None, value=None, tuned=None,
                  tried=[])[0] == "vacuum-or-rebuild"


def test_lab_gap_is_live_minus_lab():
    gap = lab_gap({"recall": 0.97, "recall_lower": 0.96, "p95_ms": 1.0},
                  {"recall": 0.94, "recall_lower": 0.93, "p95_ms": 1.5})
    assert gap["recall"] == pytest.approx(-0.03) and gap["p95_ms"] == pytest.approx(0.5)
    assert lab_gap({}, {"recall": 1.0})["recall"] is None


def test_watch_section_refuses_unknown_keys():
    with pytest.raises(ValueError, match="windows_to_alarms"):
        WatchSection.model_validate({"windows_to_alarms": 2})
    with pytest.raises(ValueError):
        WatchSection.model_validate({"webhook": "ftp://x"})


def test_log_lines():
    q = parse_line('{"id": 7, "vector": [1, 2], "ts": "2026-01-01T00:00:00Z"}', 1, 2, "log")
    assert q.key == "7" and q.vector.dtype == np.float32 and q.ts == 1767225600.0
    assert parse_line('{"embedding": [1, 2]}', 4, 2, "log").key == "3"
    skipped = parse_line('{"id": "a", "vector": [1]}', 1, 2, "log", keep=lambda k: k != "a")
    assert skipped.key == "a" and skipped.vector.size == 0  # not sampled: the vector unread
    with pytest.raises(DataError, match=r"line 2: field 'vector'.*dimension 3; received 2"):
        parse_line('{"vector": [1, 2]}', 2, 3, "log")
    with pytest.raises(DataError, match=r"'vector' \(or 'embedding'\) is missing"):
        parse_line('{"text": "hello"}', 1, 2, "log")


def test_follow_reads_appended_lines_and_waits_for_a_newline(tmp_path: Path):
    log = tmp_path / "q.jsonl"
    log.write_text('{"vector": [0, 1]}\n{"vector": [1, ')
    stop = threading.Event()
    it = follow_jsonl(log, 2, follow=True, poll_s=0.01, stop=stop)
    assert next(it).vector.tolist() == [0.0, 1.0]

    def grow() -> None:
        with open(log, "a") as fh:
            fh.write('1]}\n{"vector": [2, 2]}\n')

    threading.Timer(0.05, grow).start()
    assert next(it).vector.tolist() == [1.0, 1.0]
    assert next(it).key == "2"
    stop.set()
    assert list(it) == []


class _Live:
    """An in-memory collection: exact search by numpy; the ANN path loses its true neighbours
    with probability ``1 - ef / 100`` (each slot), so recall grows with ``ef``."""

    def __init__(self, n: int = 500, dim: int = 8, ef: int = 100) -> None:
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, dim)).astype(np.float32)
        self.ids = 1_000_000 + 7 * np.arange(n, dtype=np.int64)
        self.ef, self.rng, self.calls = ef, np.random.default_rng(1), 0

    def describe(self) -> LiveDescription:
        return LiveDescription("fake", "items", self.x.shape[1], "l2", "hnsw", {}, len(self.x))

    def knobs(self) -> tuple[LiveKnob, ...]:
        return (LiveKnob("ef", "fake.ef", 1, 400, 40),)

    def set_search_params(self, **params: Any) -> None:
        self.ef = int(params.get("ef", self.ef))

    def search_exact(self, queries: np.ndarray, k: int) -> SearchResult:
        d = ((queries[:, None, :] - self.x[None]) ** 2).sum(-1)
        order = np.argsort(d, axis=1)[:, :k]
        return SearchResult(self.ids[order], np.take_along_axis(d, order, 1).astype(np.float32))

    def search(self, queries: np.ndarray, k: int) -> SearchResult:
        self.calls += 1
        res = self.search_exact(queries, k)
        lose = self.rng.random(res.ids.shape) > min(1.0, self.ef / 100)
        return SearchResult(np.where(lose, 5, res.ids), res.distances)

    def close(self) -> None:
        pass


def _queries(live: _Live, n: int):
    from retrieval.live.watch_log import LoggedQuery

    rng = np.random.default_rng(2)
    for i in range(n):
        yield LoggedQuery(str(i), live.x[rng.integers(len(live.x))] + 0.01, float(i))


def test_watcher_windows_alarm_and_retune(tmp_path: Path):
    live = _Live(ef=100)
    section = WatchSection(window=50, sample=1.0, windows_to_alarm=2, retune_factors=(2, 4))
    seen: list[dict[str, Any]] = []
    w = Watcher(live, k=10, section=section, target=0.95, params={"ef": 100},
                labels=("fake", "items"), jsonl=tmp_path / "w.jsonl", on_alarm=seen.append)
    assert w.run(_queries(live, 150)) == "log-end"
    assert [f["alarm"] for f in w.state.windows] == [False, False, False] and not seen
    live.ef = 40  # the application lowers the knob behind rwb's back
    w.params = {"ef": 40}
    assert w.run(_queries(live, 200), max_windows=5) == "max-windows"
    assert [f["alarm"] for f in w.state.windows] == [False] * 3 + [False, True]
    assert len(seen) == 1 and seen[0]["action"] == "re-tune" and seen[0]["tuned"] == 160
    assert w.state.windows[-1]["advice"]["line"] == seen[0]["line"]
    assert live.ef == 40  # restored after the re-tune probe
    lines = [json.loads(s) for s in (tmp_path / "w.jsonl").read_text().splitlines()]
    assert len(lines) == 5 and set(lines[0]) >= {"recall", "recall_lower", "p50_ms", "p95_ms",
                                                  "p99_ms", "checked", "alarm"}
    assert lines[0]["ts_first"] == 0.0 and lines[0]["ts_last"] == 49.0
    pooled = w.state.pooled(10, 0.95)
    assert pooled["checked"] == 250 and pooled["recall"] < 1.0


def test_watcher_needs_an_exact_path():
    class NoExact:
        def knobs(self) -> tuple[LiveKnob, ...]:
            return ()

    with pytest.raises(ConfigError, match="no exact search path"):
        Watcher(NoExact(), k=10, section=WatchSection(), target=0.9,  # type: ignore[arg-type]
                params={}, labels=("x", "y"))


def _spec(tmp_path: Path, **over: Any) -> Path:
    import yaml

    doc = {"live": {"engine": "pgvector", "dsn": "postgresql://u:Secret-77@127.0.0.1:1/db",
                    "table": "items", "vector_column": "emb", "id_column": "item_id"},
           "queries": {"log": "q.jsonl"}, "k": 10, "target_recall": 0.9, **over}
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_cli_refuses_a_bad_watch_key_in_one_line(tmp_path: Path, capsys):
    from retrieval.cli import main

    rc = main(["watch", str(_spec(tmp_path, watch={"windows_to_alarms": 2}))])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "watch.windows_to_alarms" in err and str(tmp_path / "live.yaml") in err


def test_cli_unreachable_server_exits_3_without_the_password(tmp_path: Path, capsys):
    pytest.importorskip("psycopg", reason="psycopg not installed (extra 'pgvector')")
    from retrieval.cli import main

    rc = main(["watch", str(_spec(tmp_path)), "--once", "--out", str(tmp_path / "out")])
    cap = capsys.readouterr()
    assert rc == 3 and "not measurable here" in cap.err
    assert "Secret-77" not in cap.err + cap.out
    assert not (tmp_path / "out").exists()  # refused before any other work
