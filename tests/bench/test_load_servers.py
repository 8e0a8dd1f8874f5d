"""`rwb bench load` against real components: hnswlib in process and Milvus Lite served by its own
server process (by URI) in one run; the chosen config of a real sweep run directory, whose export
then carries the measured capacity at the SLO; semantic-cache lookups on a real Redis; clients as
separate processes. Short points (about a second each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from retrieval.bench.load.run import run_load_bench, write_load_run
from retrieval.bench.load.spec import parse_load_spec
from retrieval.cli import main

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

DATASET = {"kind": "synthetic", "n": 2000, "n_queries": 60, "dim": 32, "metric": "l2",
           "seed": 5}
BASE: dict[str, Any] = {"dataset": DATASET, "k": 10, "warmup_s": 0.2, "duration_s": 1.0,
                        "max_lag_us": 50_000.0, "slo": {"p99_ms": 200.0, "target_recall": 0.8}}


def _by_label(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["label"]: c for c in summary["configs"]}


@pytest.mark.milvus
def test_hnswlib_in_process_and_milvus_lite_server_closed_and_open(tmp_path: Path) -> None:
    spec = parse_load_spec({
        **BASE, "name": "servers", "closed": {"clients": [1, 2]},
        "open": {"arrival": "poisson", "clients": 8, "rates": [30.0], "search": None},
        "configs": [
            {"backend": "hnswlib", "label": "hnsw", "build": {"M": 8, "ef_construction": 64},
             "search": {"ef_search": 32}},
            {"backend": "milvus", "label": "milvus-server", "server": True,
             "build": {"index_type": "HNSW", "M": 8, "efConstruction": 64},
             "search": {"ef": 32}},
        ]})
    result = run_load_bench(spec, workdir=tmp_path / "work")
    cfgs = _by_label(result.summary)
    assert all(c["scaling"]["verdict"] for c in cfgs.values())
    assert cfgs["milvus-server"]["server"] is True and cfgs["hnsw"]["hot_path"] is True
    for label, c in cfgs.items():
        modes = [(p["mode"], p["clients"] if p["mode"] == "closed" else p["offered_qps"])
                 for p in c["points"]]
        assert modes == [("closed", 1), ("closed", 2), ("open", 30.0)], (label, modes)
        for p in c["points"]:
            assert p["errors"] == 0, (label, p)
            assert p["recall"] >= 0.8, (label, p)
            assert p["achieved_qps"] > 0, (label, p)
    run = write_load_run(spec, result, tmp_path / "run")
    assert json.loads((run.path / "manifest.json").read_text())["status"] == "complete"


def test_sweep_chosen_config_under_load_reaches_the_export(tmp_path: Path, capsys) -> None:
    from retrieval.tune.spec import parse_spec
    from retrieval.tune.sweep import run_sweep

    runs = tmp_path / "runs"
    sweep = runs / "sweep"
    run_sweep(parse_spec({
        "name": "for-load", "dataset": DATASET, "k": 10, "warmup": 4, "batch_repeats": 1,
        "target_recall": 0.9,
        "indexes": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 64},
                     "search": {"ef_search": 10}}],
        "tune": {"strategy": "target", "search_range": {"ef_search": [10, 64]}},
    }, source="for-load.yaml"), sweep)
    spec_path = tmp_path / "load.yaml"
    spec_path.write_text(yaml.safe_dump({
        **BASE, "dataset": None, "name": "chosen", "client": "processes", "processes": 2,
        "closed": {"clients": [2]},
        "open": {"arrival": "fixed", "clients": 4, "search": {"start_qps": 50, "max_qps": 200,
                                                              "steps": 2}},
        "configs": [{"run": str(sweep)}]}), encoding="utf-8")
    assert main(["bench", "load", str(spec_path), "--json", "--out", str(runs / "load")]) == 0
    s = json.loads(capsys.readouterr().out)
    (cfg,) = s["configs"]
    assert cfg["backend"] == "hnswlib" and cfg["source_label"] == "hnswlib"
    assert {p["client"] for p in cfg["points"]} == {"processes"}
    assert cfg["points"][0]["recall"] >= 0.9 - 0.05  # the sweep's chosen recall, under load
    assert cfg["capacity_qps"] is not None  # 200 QPS on an in-process HNSW: well within SLO
    out = tmp_path / "tuned.yaml"
    assert main(["export", str(sweep), "--engine", "hnswlib", "--out", str(out)]) == 0
    ev = yaml.safe_load(out.read_text())["evidence"]
    cap = ev["capacity_at_slo"]
    assert cap["capacity_qps"] == cfg["capacity_qps"] and cap["slo"]["p99_ms"] == 200.0
    assert cap["cpu"]["model"] and cap["load_run_id"] == "load"


@pytest.mark.redis
def test_semantic_cache_lookups_under_load(redis_url: str) -> None:
    from retrieval.cache.loadtarget import lookup_target, parse_cache_load

    spec = parse_load_spec({
        **BASE, "name": "cache", "closed": {"clients": [1, 4]},
        "open": {"arrival": "fixed", "clients": 8, "rates": [200.0], "search": None},
        "cache": {"entries": 500, "threshold": {"value": 0.15}, "name": "rwb-load-test"}})
    cfg = parse_cache_load(spec.cache, spec.source)
    result = run_load_bench(spec, extra=(lambda ds: lookup_target(cfg, ds, None, redis_url),))
    (c,) = result.summary["configs"]
    assert c["backend"] == "redis-semantic-cache" and c["entries"] == 500
    assert 0.0 <= c["hit_fraction_unloaded"] <= 1.0
    for p in c["points"]:
        assert p["errors"] == 0 and p["achieved_qps"] > 0, p
        assert p["recall"] == pytest.approx(1.0), p  # load never changed an answer
    # the open point ran its schedule: 200 QPS for the 1 s window (requests still queued behind
    # 8 busy clients when the window closes are not counted, so n may fall short on a slow
    # machine; it never exceeds the schedule)
    open_point = c["points"][2]
    assert open_point["offered_qps"] == 200.0 and 0 < open_point["n"] <= 200, open_point


@pytest.mark.milvus
def test_milvus_server_killed_mid_run_keeps_partial_results(tmp_path: Path) -> None:
    import psutil

    spec = parse_load_spec({
        **BASE, "name": "dies", "abort_errors": 5, "timeout_ms": 3000.0,
        "closed": {"clients": [1, 1, 1]}, "open": None,
        "configs": [{"backend": "milvus", "label": "doomed", "server": True,
                     "build": {"index_type": "HNSW", "M": 8, "efConstruction": 64},
                     "search": {"ef": 32}}]})
    killed: list[int] = []

    def kill_after_first_point(done: int, total: int, what: str) -> None:
        if done == 1:
            for child in psutil.Process().children(recursive=True):
                if "milvus_lite" in " ".join(child.cmdline()):
                    child.kill()
                    killed.append(child.pid)

    result = run_load_bench(spec, progress=kill_after_first_point, workdir=tmp_path / "w")
    assert killed, "no Milvus Lite server process found"
    assert result.partial and "consecutive errors" in result.summary["aborted"]
    first, second = result.summary["configs"][0]["points"]  # the third was never started
    assert first["errors"] == 0 and not first["partial"] and first["recall"] >= 0.8
    assert second["partial"] and second["errors"] >= 5
    run = write_load_run(spec, result, tmp_path / "run")
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    assert json.loads((run.path / "summary.json").read_text())["partial"] is True
