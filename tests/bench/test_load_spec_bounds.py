"""A load spec's times and rates are bounded where it is read (finite, > 0, a stated maximum):
one line naming the field, exit 2, before anything is built or allocated; and the chosen
config of a faiss-ivf sweep (``configs: [{run: R}]``) runs under load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from retrieval.bench.load.spec import MAX_QPS, MAX_SCHEDULED, parse_load_spec
from retrieval.cli import main
from retrieval.errors import ConfigError

BASE: dict[str, Any] = {
    "name": "bounds", "dataset": {"kind": "synthetic", "n": 500, "dim": 8, "n_queries": 20},
    "k": 5, "warmup_s": 0.1, "duration_s": 1.0, "closed": {"clients": [1]}, "open": None,
    "configs": [{"backend": "hnswlib"}],
}
NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(("edit", "field", "allowed"), [
    ({"duration_s": NAN}, "duration_s", "a finite number"),
    ({"duration_s": INF}, "duration_s", "a finite number"),
    ({"duration_s": 7200.0}, "duration_s", "<= 3600"),
    ({"warmup_s": NAN}, "warmup_s", "a finite number"),
    ({"timeout_ms": INF}, "timeout_ms", "a finite number"),
    ({"slo": {"p99_ms": NAN}}, "slo.p99_ms", "a finite number"),
    ({"open": {"rates": [INF], "search": None}}, "open.rates[0]", f"<= {MAX_QPS:,.0f}"),
    ({"open": {"rates": [NAN], "search": None}}, "open.rates[0]", "> 0"),
    ({"open": {"rates": [100.0, 1e12], "search": None}}, "open.rates[1]", f"<= {MAX_QPS:,.0f}"),
    ({"open": {"rates": [-1.0], "search": None}}, "open.rates[0]", "> 0"),
    ({"open": {"search": {"start_qps": 1e9, "max_qps": 2e9}}}, "open.search.start_qps",
     f"<= {MAX_QPS:,.0f}"),
    ({"open": {"search": {"start_qps": 10.0, "max_qps": INF}}}, "open.search.max_qps",
     "a finite number"),
    ({"open": {"search": {"start_qps": 0.0}}}, "open.search.start_qps", "> 0"),
    # a rate allowed on its own, too many requests for one point of an hour
    ({"duration_s": 3600.0, "open": {"rates": [MAX_QPS], "search": None}}, "open.rates[0]",
     f"{MAX_SCHEDULED:,} requests per point"),
])
def test_a_bound_is_checked_at_the_spec(edit: dict[str, Any], field: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_load_spec({**BASE, **edit}, source="load.yaml")
    text = str(exc.value)
    assert text.startswith(f"load.yaml: field '{field}' must be"), text
    assert allowed in text and "\n" not in text and "Input should" not in text, text


def test_the_largest_allowed_values_pass() -> None:
    spec = parse_load_spec({**BASE, "duration_s": 3600.0, "warmup_s": 1.0,
                            "open": {"rates": [MAX_SCHEDULED / 3600.0], "search": None}})
    assert spec.open is not None and spec.open.rates == [MAX_SCHEDULED / 3600.0]


def test_the_cli_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "load.yaml"
    path.write_text("name: x\ndataset: {kind: synthetic, n: 500, dim: 8}\nduration_s: .nan\n"
                    "configs: [{backend: hnswlib}]\n", encoding="utf-8")
    assert main(["bench", "load", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rwb: error: {path}: field 'duration_s' must be a finite number; received nan"
    assert not (tmp_path / "run").exists()


def test_a_faiss_ivf_sweeps_chosen_config_runs_under_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The sweep records faiss-ivf's resolved build with unset fields (``pq_m: None``)."""
    from retrieval.tune.spec import parse_spec
    from retrieval.tune.sweep import run_sweep

    sweep = tmp_path / "sweep"
    run_sweep(parse_spec({
        "name": "ivf", "dataset": BASE["dataset"], "k": 5, "warmup": 2, "batch_repeats": 1,
        "target_recall": 0.8,
        "indexes": [{"backend": "faiss-ivf", "build": {"nlist": 8},
                     "search": {"nprobe": [1, 8]}}],
        "tune": {"strategy": "target"},
    }, source="ivf.yaml"), sweep)
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["backends"]["faiss-ivf"]["chosen"]["build_params"]["pq_m"] is None
    path = tmp_path / "load.yaml"
    path.write_text(yaml.safe_dump({**BASE, "dataset": None, "duration_s": 0.5,
                                    "configs": [{"run": str(sweep)}]}), encoding="utf-8")
    capsys.readouterr()
    assert main(["bench", "load", str(path), "--json", "--out", str(tmp_path / "load")]) == 0
    (cfg,) = json.loads(capsys.readouterr().out)["configs"]
    assert cfg["backend"] == "faiss-ivf" and cfg["source_label"] == "faiss-ivf"
    assert cfg["points"] and cfg["points"][0]["recall"] is not None


WRITES: dict[str, Any] = {**BASE, "closed": None, "open": None,
                          "writes": {"rates": [50.0], "search": None}}


@pytest.mark.parametrize(("edit", "field", "allowed"), [
    ({"insert_rate": 0.0, "delete_rate": 0.0}, "writes.insert_rate", "> 0"),
    ({"rates": [], "search": None}, "writes.rates", "a non-empty list"),
    ({"rates": [INF]}, "writes.rates[0]", f"<= {MAX_QPS:,.0f}"),
    ({"rates": [-5.0]}, "writes.rates[0]", "> 0"),
    ({"insert_rate": 1e12}, "writes.insert_rate", "<= 1000000"),
    ({"batch": 0}, "writes.batch", ">= 1"),
    ({"initial_fraction": 0.0}, "writes.initial_fraction", "> 0"),
    ({"recall_every_s": 5.0}, "writes.recall_every_s", "<= duration_s - warmup_s"),
    ({"search": {"start_qps": 100.0, "max_qps": 10.0}}, "writes.search.max_qps", ">= start_qps"),
])
def test_a_writes_bound_is_checked_at_the_spec(edit: dict[str, Any], field: str,
                                               allowed: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_load_spec({**WRITES, "writes": {**WRITES["writes"], **edit}}, source="load.yaml")
    text = str(exc.value)
    assert text.startswith(f"load.yaml: field '{field}' must be"), text
    assert allowed in text and "\n" not in text, text


def test_writes_need_thread_clients_and_known_fields() -> None:
    with pytest.raises(ConfigError, match="field 'client' must be threads"):
        parse_load_spec({**WRITES, "client": "processes"}, source="load.yaml")
    with pytest.raises(ConfigError, match="insert_qps"):
        parse_load_spec({**WRITES, "writes": {**WRITES["writes"], "insert_qps": 5}},
                        source="load.yaml")
    spec = parse_load_spec(WRITES, source="load.yaml")
    assert spec.writes is not None and spec.closed is None and spec.open is None


def test_searching_while_writing_is_judged_on_the_lowest_recall_sample():
    """Issue 34, tests that pin decisions 2: the SLO of a point searched while writing holds
    only when the lowest recall sample of the window meets the target (the mean 0.95 does,
    the lowest sample 0.85 does not); a failed writer fails the point."""
    from retrieval.bench.load.writing import writing_meets_slo

    row = {"p99_ms": 5.0, "n": 1000, "errors": 0, "timeouts": 0, "generator_ok": True,
           "recall": 0.95, "recall_min": 0.85}
    assert writing_meets_slo(row, None, 10.0, 0.9, 0.001) is False
    assert writing_meets_slo({**row, "recall_min": 0.91}, None, 10.0, 0.9, 0.001) is True
    assert writing_meets_slo({**row, "recall_min": 0.91}, "writer died", 10.0, 0.9,
                             0.001) is False
