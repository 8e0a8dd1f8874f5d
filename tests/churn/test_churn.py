"""The churn bench (issue 22): runbooks as data, recall per step against an independent numpy
brute force over the live set, the control and the drift / damage split, the advice, the
refusals (one line, exit 2) and the resume of a killed run. Small synthetic data: seconds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from retrieval.churn.logic import AdviceInput, advise
from retrieval.churn.run import run_churn
from retrieval.churn.spec import parse_churn_spec
from retrieval.cli import main
from retrieval.errors import ConfigError
from retrieval.loaders.catalog import resolve_dataset
from retrieval.workload.runbook import RunbookSpec, resolve_runbook
from retrieval.workload.runbooks import SHAPES

pytest.importorskip("hnswlib")
pytest.importorskip("faiss")

DATA = {"kind": "synthetic", "n": 1500, "dim": 16, "n_queries": 40, "metric": "l2", "seed": 0}
K = 10
#: explicit ranges only, so the test can replay it without rwb's resolver
STEPS: list[dict[str, Any]] = [
    {"insert": {"start": 0, "end": 800}},
    {"search": {}},
    {"replace": {"start": 800, "end": 950, "old_start": 0, "old_end": 150}},
    {"delete": {"start": 150, "end": 400}},
    {"search": {"control": True}},
    {"insert": {"start": 950, "end": 1300}},
    {"maintain": {}},
    {"search": {}},
]


def _spec(configs: list[dict[str, Any]], steps: list[dict[str, Any]] = STEPS,
          **kw: Any) -> Any:
    data = {"name": "t", "dataset": DATA, "k": K, "queries": 40, "warmup": 2,
            "write_batch": 64, "confidence": {"method": "binomial"}, "configs": configs,
            "runbook": {"steps": steps}, **kw}
    return parse_churn_spec(data, source="<test>")


HNSW = {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
        "search": {"ef_search": 20}}


def _replay_live(row_id: dict[int, int]) -> list[dict[int, int]]:
    """Independent replay of STEPS: the live set (id -> base row) at each search step."""
    live: dict[int, int] = {}
    out = []
    for st in STEPS:
        (op, a), = st.items()
        if op == "insert":
            live.update({row_id[r]: r for r in range(a["start"], a["end"])})
        elif op == "delete":
            gone = {row_id[r] for r in range(a["start"], a["end"])}
            live = {i: r for i, r in live.items() if i not in gone}
        elif op == "replace":
            for new, old in zip(range(a["start"], a["end"]),
                                range(a["old_start"], a["old_end"]), strict=True):
                live[row_id[old]] = new  # the id stays, its vector changes
        elif op == "search":
            out.append(dict(live))
    return out


def test_recall_per_step_equals_numpy_brute_force_over_the_live_set(tmp_path: Path) -> None:
    flat = {"backend": "faiss-flat", "label": "flat"}
    res = run_churn(_spec([HNSW, flat], control="every"), out=tmp_path / "r")
    ds = resolve_dataset(DATA, where="test")
    rows = pd.read_parquet(tmp_path / "r" / "rows.parquet")
    row_id = dict(zip(rows["row"].tolist(), rows["id"].tolist(), strict=True))
    assert all(row_id[r] != r for r in range(10))  # ids are not row numbers
    lives = _replay_live(row_id)
    got = pd.read_parquet(tmp_path / "r" / "ids.parquet")
    assert set(got.columns) >= {"backend", "step", "query", "ids"}
    q = ds.queries[:40].astype(np.float64)
    for c in res.summary["configs"]:
        searches = [r for r in c["steps"] if r["op"] == "search"]
        assert [r["step"] for r in searches] == [1, 4, 7]
        for live, rec in zip(lives, searches, strict=True):
            ids = np.array(list(live), dtype=np.int64)
            x = ds.base[np.array(list(live.values()))].astype(np.float64)
            d = ((q[:, None, :] - x[None, :, :]) ** 2).sum(-1)
            exact = ids[np.argsort(d, axis=1, kind="stable")[:, :K]]
            mine = got[(got["backend"] == c["label"]) & (got["step"] == rec["step"])]
            # joined on the query key (numbered from 0 like the queries), not on sort order
            by_query = dict(zip(mine["query"].tolist(), mine["ids"].to_list(), strict=True))
            assert sorted(by_query) == list(range(q.shape[0]))
            found = np.vstack([by_query[i] for i in range(q.shape[0])])
            recall = np.mean([len(set(f) & set(e)) / K for f, e in zip(found, exact,
                                                                       strict=True)])
            assert rec["recall"] == pytest.approx(recall, abs=1e-12)
            assert rec["live"] == len(live)
            # the split: reference - recall = drift + damage, control measured at every step
            assert rec["control_recall"] is not None
            assert rec["drift"] == pytest.approx(searches[0]["recall"] - rec["control_recall"])
            measured = rec["control_recall"] - rec["recall"]
            assert rec["damage_measured"] == pytest.approx(measured)
            # issue 34: a second control with the next seed; damage within their spread is none
            spread = abs(rec["control_recall"] - rec["control_recall_seed2"])
            assert rec["control_spread"] == pytest.approx(spread)
            within = abs(measured) <= spread
            assert rec["damage_within_spread"] is within
            assert rec["damage"] == (0.0 if within else pytest.approx(measured))
    flat_steps = [r for r in res.summary["configs"][1]["steps"] if r["op"] == "search"]
    assert all(r["recall"] == 1.0 and r["control_recall"] == 1.0 and r["damage"] == 0.0
               for r in flat_steps)  # an exact index under writes: recall 1.0 at every step
    hn = res.summary["configs"][0]
    assert hn["knob"] == "ef_search" and hn["knob_value"] == 20
    assert any(r.get("insert_per_s") for r in hn["steps"])
    assert any(r.get("delete_p99_ms") is not None for r in hn["steps"])
    assert any(r.get("maintain_action") == "none" for r in hn["steps"])
    assert isinstance(hn["advice"]["line"], str) and hn["advice"]["line"]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["kind"] == "bench-churn"
    assert {"recall", "control_recall", "drift", "damage"} <= set(
        summary["configs"][0]["steps"][1])
    assert len(pd.read_parquet(tmp_path / "r" / "steps.parquet")) == 2 * len(STEPS)


def test_advice_says_retune_when_the_configured_ef_misses_the_target(tmp_path: Path) -> None:
    weak = {"backend": "hnswlib", "build": {"M": 4, "ef_construction": 10},
            "search": {"ef_search": 10}}
    steps = [{"insert": {"start": 0, "end": 1000}}, {"search": {}},
             {"delete": {"fraction": 0.1, "seed": 1}}, {"search": {"control": True}}]
    res = run_churn(_spec([weak], steps, target_recall=0.8, damage_points=100.0,
                          probe_maintain=False), out=tmp_path / "r")
    c = res.summary["configs"][0]
    last = [r for r in c["steps"] if r["op"] == "search"][-1]
    assert last["recall_lower"] < 0.8 and last["tuned_knob"] > 10
    assert c["advice"]["action"] == "re-tune"
    assert c["advice"]["line"].startswith(f"re-tune ef_search 10 -> {last['tuned_knob']} to "
                                          f"hold 0.8")


def _adv(**kw: Any) -> tuple[str, str]:
    base: dict[str, Any] = {
        "target": 0.95, "knob": "ef_search", "value": 80, "knob_max": 1280, "recall": 0.94,
        "lower": 0.93, "tuned": 96, "searched": True, "control_lower": 0.95,
        "control_tuned": 80, "damage": 0.005, "damage_points": 1.0, "maintain": None}
    return advise(AdviceInput(**{**base, **kw}))


def test_advice_rules() -> None:
    assert _adv() == ("re-tune", "re-tune ef_search 80 -> 96 to hold 0.95 (damage 0.5 points)")
    assert _adv(lower=0.96)[0] == "hold"
    assert _adv(damage=0.021, maintain=("vacuum", 14.0, 0.955)) == (
        "maintain", "vacuum now (damage 2.1 points, vacuum takes 14 s)")
    # a clean-up that does not recover the damage is not advised
    assert _adv(damage=0.021, maintain=("vacuum", 14.0, 0.941))[0] == "re-tune"
    assert _adv(tuned=None)[0] == "rebuild"
    assert "a fresh build does at ef_search 80" in _adv(tuned=None)[1]
    assert _adv(tuned=None, control_lower=0.9, control_tuned=None)[0] == "drift"


def test_backend_without_writes_refuses_in_one_line(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="backend 'faiss-hnsw' cannot run "
                                          "delete/insert/maintain/replace steps: "):
        run_churn(_spec([{"backend": "faiss-hnsw"}]), out=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps({"dataset": DATA, "configs": [{"backend": "faiss-hnsw"}],
                                "runbook": {"steps": STEPS}}))
    assert main(["bench", "churn", str(spec), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot run" in err, err


@pytest.mark.parametrize(("steps", "says"), [
    ([{"insert": {"start": 0, "end": 99999}}, {"search": {}}],
     "runbook.steps[0].insert.end' must be <= 1500"),
    ([{"search": {}}], "runbook.steps[0].search': the index is empty here"),
    ([{"insert": {"start": 0, "end": 10}, "search": {}}], "runbook.steps[0]': a step is one of"),
    ([{"insert": {"start": 0, "end": 10}}, {"delete": {"start": 20, "end": 30}},
      {"search": {}}], "runbook.steps[1].delete': base row 20 is not live"),
    ([{"insert": {"start": 0, "end": 10}}, {"insert": {"start": 5, "end": 30}}],
     "runbook.steps[1].insert': base row 5 is already live"),
    ([{"insert": {"start": 5, "end": 3}}], "runbook.steps[0].insert'"),
    ([{"delete": {"fraction": 0.5, "start": 1}}], "runbook.steps[0].delete'"),
    ([{"search": {"foo": 1}}], "runbook.steps[0].search.foo"),
    ([{"insert": {"start": 0, "end": 10}}], "has no search step"),
])
def test_bad_runbooks_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              steps: list[dict[str, Any]], says: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps({"dataset": DATA, "configs": [HNSW],
                                "runbook": {"steps": steps}}))
    assert main(["bench", "churn", str(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert says in err, err
    assert not (tmp_path / "o").exists()


def test_killed_run_resumes_from_the_last_finished_step(tmp_path: Path) -> None:
    spec = _spec([HNSW], probe_maintain=False)
    full = run_churn(spec, out=tmp_path / "full")
    out = tmp_path / "killed"
    run_churn(spec, out=out)
    lines = (out / "steps.jsonl").read_text().splitlines()
    (out / "steps.jsonl").write_text("\n".join(lines[:5]) + "\n{\"torn")  # killed in step 5
    (out / "summary.json").unlink()
    with pytest.raises(ConfigError, match="non-empty folder"):
        run_churn(spec, out=out)  # without resume: refused, nothing overwritten
    res = run_churn(spec, out=out, resume=True)
    assert res.summary["resumed"] == {"from": {"hnswlib": 4}}
    a = [r for r in full.summary["configs"][0]["steps"] if r["op"] == "search"]
    b = [r for r in res.summary["configs"][0]["steps"] if r["op"] == "search"]
    assert [r["recall"] for r in a] == [r["recall"] for r in b]  # state rebuilt exactly
    other = _spec([HNSW], probe_maintain=False, k=5)
    with pytest.raises(ConfigError, match="another spec"):
        run_churn(other, out=out, resume=True)


def _killed_run(out: Path, spec: Any) -> None:
    run_churn(spec, out=out)
    lines = (out / "steps.jsonl").read_text().splitlines()
    (out / "steps.jsonl").write_text("\n".join(lines[:3]) + "\n")
    (out / "summary.json").unlink()


def test_resume_refuses_a_changed_runbook_file_or_base_file(tmp_path: Path) -> None:
    """Issue 34 HIGH 2: the spec text is the same, the runbook file or the base file changed:
    the resume is refused in one line naming the fingerprint, nothing mixed."""
    ds = resolve_dataset(DATA)
    np.save(tmp_path / "b.npy", np.asarray(ds.base[:1500]))
    np.save(tmp_path / "q.npy", np.asarray(ds.queries))
    book = tmp_path / "book.yaml"
    book.write_text(yaml.safe_dump({"steps": STEPS[:5]}))
    data = {"kind": "npy", "base": str(tmp_path / "b.npy"), "queries": str(tmp_path / "q.npy"),
            "metric": "l2"}
    spec = parse_churn_spec({"name": "t", "dataset": data, "k": K, "queries": 40, "warmup": 0,
                             "write_batch": 64, "confidence": {"method": "binomial"},
                             "configs": [HNSW], "probe_maintain": False,
                             "runbook": str(book)}, source="<test>")
    out = tmp_path / "killed"
    _killed_run(out, spec)
    prints = json.loads((out / "fingerprints.json").read_text())
    assert set(prints) == {"data_fingerprint", "runbook_fingerprint"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["data_fingerprint"] == prints["data_fingerprint"] == ds_fp(tmp_path)
    changed = [dict(s) for s in STEPS[:5]]
    changed[3] = {"delete": {"start": 150, "end": 350}}
    book.write_text(yaml.safe_dump({"steps": changed}))
    with pytest.raises(ConfigError, match=r"other runbook .*runbook_fingerprint"):
        run_churn(spec, out=out, resume=True)
    book.write_text(yaml.safe_dump({"steps": STEPS[:5]}))
    moved = np.asarray(ds.base[:1500]).copy()
    moved[5] += 1.0
    np.save(tmp_path / "b.npy", moved)
    with pytest.raises(ConfigError, match=r"other data .*data_fingerprint"):
        run_churn(spec, out=out, resume=True)
    np.save(tmp_path / "b.npy", np.asarray(ds.base[:1500]))
    res = run_churn(spec, out=out, resume=True)  # the same data and runbook: resumed
    assert res.summary["data_fingerprint"] == prints["data_fingerprint"]
    assert res.summary["runbook_fingerprint"] == prints["runbook_fingerprint"]


def ds_fp(folder: Path) -> str:
    from retrieval.loaders.vectors import load_npy

    return load_npy(folder / "b.npy", folder / "q.npy", "l2").fingerprint


def test_fewer_live_vectors_than_k_use_the_fewer_than_k_rule(tmp_path: Path) -> None:
    """Issue 34 MEDIUM 8: 5 live vectors and k=10: the exact answer holds 5 ids; a perfect
    answer is recall 1.0 (it was 0.5, and the advice said re-tune)."""
    steps = [{"insert": {"start": 0, "end": 5}}, {"search": {}},
             {"insert": {"start": 5, "end": 300}}, {"search": {}}]
    res = run_churn(_spec([HNSW], steps=steps, probe_maintain=False, target_recall=0.9,
                          retune=False), out=tmp_path / "few")
    rows = [r for r in res.summary["configs"][0]["steps"] if r["op"] == "search"]
    assert rows[0]["live"] == 5 and rows[0]["recall"] == 1.0
    assert rows[0]["short_queries"] == 0.0  # 5 of min(k, live) = 5 returned
    from retrieval.churn.logic import live_recall

    exact = np.array([[3, 1, -1, -1], [0, 2, 4, -1]])
    found = np.array([[1, 3, -1, -1], [0, 9, 4, -1]])
    assert live_recall(found, exact, 4).tolist() == [1.0, 2 / 3]


def test_runbook_resolution_ids_replace_and_seeded_fraction() -> None:
    base = np.random.default_rng(0).standard_normal((300, 4)).astype(np.float32)
    spec = RunbookSpec.model_validate({"steps": [
        {"insert": {"start": 0, "end": 100}}, {"replace": {"start": 100, "end": 110}},
        {"delete": {"fraction": 0.2, "seed": 7}}, {"search": {}}]})
    a = resolve_runbook(spec, base, where="t")
    b = resolve_runbook(spec, base, where="t")
    assert [s.op for s in a.steps] == ["insert", "replace", "delete", "search"]
    assert not np.array_equal(a.steps[0].ids, np.arange(100))
    rep = a.steps[1]
    assert set(rep.ids.tolist()) <= set(a.steps[0].ids.tolist())  # replace keeps the ids
    assert rep.rows.tolist() == list(range(100, 110))
    assert a.steps[2].ids.shape == (20,) and np.array_equal(a.steps[2].ids, b.steps[2].ids)
    assert a.peak == 100


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_shipped_runbook_shapes_resolve(shape: str) -> None:
    base = np.random.default_rng(1).standard_normal((400, 8)).astype(np.float32)
    book = resolve_runbook(RunbookSpec.model_validate(SHAPES[shape](400)), base, where=shape)
    assert book.count("search") >= 2
    if shape == "grow-only":
        assert book.peak == 400 and book.count("delete") == 0
    if shape == "clustered-drift":
        assert sorted(book.order.tolist()) == list(range(400))


def test_shipped_churn_spec_and_runbook_files_load() -> None:
    from retrieval.churn.spec import load_churn_spec, runbook_of
    from retrieval.workload.runbook import load_runbook

    root = Path(__file__).resolve().parents[2]
    spec = load_churn_spec(root / "sweeps" / "churn-qqp20k.yaml")
    assert len(runbook_of(spec).steps) == 22
    base = np.random.default_rng(2).standard_normal((20_000, 4)).astype(np.float32)
    files = sorted((root / "sweeps" / "runbooks").glob("*.yaml"))
    assert len(files) == 4
    for f in files:
        book = resolve_runbook(load_runbook(str(f), where=str(f)), base, where=str(f))
        assert book.count("search") >= 4, f


@pytest.mark.slow  # two engine builds per step on 2 cores: tens of seconds
@pytest.mark.parametrize("config", [
    {"backend": "qdrant", "build": {"m": 8, "ef_construct": 40}, "search": {"hnsw_ef": 20}},
    {"backend": "lancedb-hnsw", "build": {"m": 8, "ef_construction": 40},
     "search": {"ef": 20}},
], ids=["qdrant", "lancedb"])
def test_engines_with_a_working_folder_run_the_runbook(tmp_path: Path,
                                                       config: dict[str, Any]) -> None:
    """Engines that keep files (Qdrant's shard, LanceDB's table) get a folder inside the run's
    own one (it failed with 'No such file or directory' before the folder was created)."""
    pytest.importorskip("qdrant_edge" if config["backend"] == "qdrant" else "lancedb")
    res = run_churn(_spec([config]), out=tmp_path / "r")
    (c,) = res.summary["configs"]
    searches = [r for r in c["steps"] if r["op"] == "search"]
    assert [r["step"] for r in searches] == [1, 4, 7]
    assert all(0.0 < r["recall"] <= 1.0 for r in searches)
    assert searches[-1]["live"] == 800 - 250 + 350  # replace keeps ids; delete; insert
    assert any(r.get("maintain_action") for r in c["steps"] if r["op"] == "maintain")


def test_a_churn_spec_says_indexes_like_every_spec_and_still_reads_configs() -> None:
    """Issue 34 new user 9: one vocabulary across specs (``indexes``), the former name kept."""
    new = parse_churn_spec({"name": "t", "dataset": DATA, "indexes": [HNSW],
                            "runbook": {"steps": STEPS}}, source="<test>")
    old = parse_churn_spec({"name": "t", "dataset": DATA, "configs": [HNSW],
                            "runbook": {"steps": STEPS}}, source="<test>")
    assert [c.model_dump() for c in new.configs] == [c.model_dump() for c in old.configs]
    assert new.configs[0].backend == "hnswlib"
    with pytest.raises(ConfigError, match="not both"):
        parse_churn_spec({"name": "t", "dataset": DATA, "indexes": [HNSW], "configs": [HNSW],
                          "runbook": {"steps": STEPS}}, source="<test>")
