"""`rwb bench load SPEC` end to end on the fault-injecting backend (short points): the JSON keys
per point and per config, the run directory, the report's curves; a server dying mid-run (exit 1,
partial results kept and marked); and every bad input as one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from retrieval.bench.load.spec import os_client_limit
from retrieval.cli import main

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

SPEC = """\
name: load-cli
dataset: {kind: synthetic, n: 400, n_queries: 30, dim: 8, metric: l2, seed: 1}
k: 5
warmup_s: 0.2
duration_s: 0.8
max_lag_us: 50000
slo: {p99_ms: 30, target_recall: 0.9}
closed: {clients: [1, 2]}
open:
  arrival: poisson
  clients: 4
  rates: [40]
  search: {start_qps: 50, max_qps: 400, growth: 2.0, steps: 3}
configs:
  - backend: fault
    label: fault-3ms
    build: {service_ms: 3, workers: 2}
"""


def _write(tmp_path: Path, text: str = SPEC, name: str = "load.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_bench_load_json_run_dir_and_report(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["bench", "load", str(_write(tmp_path)), "--json", "--out", str(out)]) == 0
    s = json.loads(capsys.readouterr().out)
    (cfg,) = s["configs"]
    assert cfg["label"] == "fault-3ms" and "capacity_qps" in cfg
    assert cfg["capacity_qps"] is None or cfg["capacity_qps"] >= 50
    modes = [p["mode"] for p in cfg["points"]]
    assert modes[:3] == ["closed", "closed", "open"] and len(modes) >= 4
    for p in cfg["points"]:
        for key in ("mode", "achieved_qps", "p99_ms", "p99_ms_uncorrected", "recall"):
            assert key in p, key
        assert p["clients"] if p["mode"] == "closed" else p["offered_qps"] > 0
        assert p["recall"] == pytest.approx(1.0)  # the fault backend answers exactly
    # 1 client, each call sleeps >= 3 ms: at most ~333 QPS however loaded the machine
    assert 0 < cfg["points"][0]["achieved_qps"] <= 1000 / 3 * 1.05
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["kind"] == "bench-load"
    table = pd.read_parquet(out / "points.parquet")
    assert len(table) == len(modes) and {"p99_ms", "littles_law.ratio"} <= set(table.columns)
    assert main(["report", str(out)]) == 0
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert any("load_qps_p99" in n for n in pngs) and any("load_closed" in n for n in pngs)
    assert "Capacity at the SLO" in (out / "report.html").read_text()


def test_server_dying_mid_run_keeps_partial_results(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # dies when two calls are in flight at once: in the 2nd point (closed, 2 clients), never
    # in the 1st (one client), however slow the machine (a state, not a time)
    spec = SPEC.replace("build: {service_ms: 3, workers: 2}",
                        "build: {service_ms: 1, workers: 2, die_when_concurrent: 2}")
    spec = spec.replace("k: 5\n", "k: 5\nabort_errors: 20\n")
    out = tmp_path / "run"
    assert main(["bench", "load", str(_write(tmp_path, spec)), "--json", "--out",
                 str(out)]) == 1
    captured = capsys.readouterr()
    err = [ln for ln in captured.err.splitlines() if ln.startswith("rwb: error:")]
    assert len(err) == 1 and "partial results kept" in err[0] and "server gone" in err[0]
    s = json.loads(captured.out)
    assert s["partial"] is True and "consecutive errors" in s["aborted"]
    pts = s["configs"][0]["points"]
    assert pts[0]["partial"] is False and pts[0]["errors"] == 0  # measured before the death
    assert len(pts) == 2 and (pts[1]["mode"], pts[1]["clients"]) == ("closed", 2)
    assert pts[-1]["partial"] is True and pts[-1]["errors"] >= 20
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "partial" and "server gone" in manifest["error"]
    assert len(pd.read_parquet(out / "points.parquet")) == len(pts)


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("rates: [40]", "rates: [0]", "open.rates[0]' must be a rate in QPS > 0"),
        ("rates: [40]", "rates: [-3]", "open.rates[0]"),
        ("start_qps: 50", "start_qps: 0", "open.search.start_qps"),
        ("max_qps: 400", "max_qps: 10", "open.search.max_qps"),
        ("duration_s: 0.8", "duration_s: 0.3", "warm-up of 0.2 s leaves no measured window"),
        ("clients: [1, 2]", "clients: [1, CLIENTS]", "closed.clients[1]' must be <= "),
        ("  clients: 4", "  clients: CLIENTS", "open.clients' must be <= "),
        ("  clients: 4", "  clients: 0", "open.clients' must be an integer >= 1"),
        ("backend: fault", "backend: nope", "unknown backend 'nope'"),
        ("build: {service_ms: 3, workers: 2}", "build: {service_ms: -1}", "service_ms"),
        ("label: fault-3ms", "label: x\n    server: true", "configs[0].server"),
        ("label: fault-3ms", "label: x\n    run: /no/such/run", "give exactly one of"),
        ("arrival: poisson", "arrival: burst", "arrival"),
        ("k: 5", "k: 5\ncache: {entries: 0}", "cache.entries"),
        ("k: 5", "k: 5\nbogus: 1", "bogus"),
    ],
)
def test_bench_load_bad_input_one_line_exit_2(tmp_path: Path, old: str, new: str, needle: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert old in SPEC
    text = SPEC.replace(old, new.replace("CLIENTS", str(os_client_limit() + 1000)))
    path = _write(tmp_path, text)
    out = tmp_path / "run"
    assert main(["bench", "load", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rwb: error:") and "\n" not in err, err
    assert needle in err and str(path) in err, err
    assert not out.exists()  # nothing measured, nothing half-written


def test_bench_load_flag_overrides_are_checked(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path)
    assert main(["bench", "load", str(path), "--p99-ms", "0"]) == 2
    assert "slo.p99_ms" in capsys.readouterr().err
    assert main(["bench", "load", str(path), "--duration", "0.1"]) == 2
    assert "duration_s" in capsys.readouterr().err


def test_bench_load_asyncio_clients(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SPEC.replace("  search: {start_qps: 50, max_qps: 400, growth: 2.0, steps: 3}",
                        "  search: null").replace("rates: [40]", "rates: [100]").replace(
                            "arrival: poisson", "arrival: fixed")
    assert main(["bench", "load", str(_write(tmp_path, text)), "--client", "asyncio", "--json",
                 "--out", str(tmp_path / "run")]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["client"] == "asyncio"
    closed1, closed2, opened = s["configs"][0]["points"]
    assert {p["client"] for p in (closed1, closed2, opened)} == {"asyncio"}
    assert closed2["achieved_qps"] > 1.3 * closed1["achieved_qps"]  # 2 server workers
    assert opened["achieved_qps"] == pytest.approx(100, rel=0.2)
    assert all(p["errors"] == 0 and p["recall"] == pytest.approx(1.0)
               for p in (closed1, closed2, opened))


def test_quickstart_spec_validates() -> None:
    from retrieval.bench.load.spec import load_load_spec
    from retrieval.paths import REPO_ROOT

    spec = load_load_spec(Path(REPO_ROOT) / "sweeps" / "load-quickstart.yaml")
    assert [(c.backend, c.server) for c in spec.configs] == [("hnswlib", False),
                                                            ("milvus", True)]
    assert spec.closed and spec.open and spec.open.search and spec.slo.target_recall
