"""Scale study (ef(N)) on small clustered data: nested samples, the fit, one build at full N,
the ceiling stop, the exported rule and ``rwb verify`` at another N."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.api import export, verify
from retrieval.data import VectorDataset
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

TARGET = 0.9
KEYS = ("predicted", "exact", "transfer_error", "ceiling")


def clustered(n: int, nq: int = 200, d: int = 32, seed: int = 0) -> VectorDataset:
    """Gaussian blobs (200 centres): small HNSW builds lose recall as N grows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(200, d)).astype(np.float32) * 3
    base = centres[rng.integers(0, 200, n)] + rng.normal(size=(n, d)).astype(np.float32)
    queries = centres[rng.integers(0, 200, nq)] + rng.normal(size=(nq, d)).astype(np.float32)
    return VectorDataset.from_arrays(base, queries, "l2", name=f"blobs{n}")


def scale_spec(entries: list[dict], **scale) -> object:
    return parse_spec({
        "name": "scale", "dataset": "synthetic-small", "k": 10, "target_recall": TARGET,
        "warmup": 0, "batch_repeats": 1, "modes": ["batch"],
        "index_build": {"threads": 1, "cache": False},
        "indexes": entries,
        "scale": {"fractions": ["1/8", "1/4", "1/2"], "bootstrap": 50, **scale},
        "tune": {"strategy": "target", "objective": "qps", "memory": "resident",
                 "cost": {"ram_gb_month": 3.0}},
    }, source="scale.yaml")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    spec = scale_spec([
        {"backend": "hnswlib", "label": "good", "build": {"M": 12, "ef_construction": 60},
         "search": {"ef_search": 10}},
        # M 3 / ef_construction 10 on blobs: ceiling ~0.94 at 1k, ~0.88 at 4k (falls below 0.9)
        {"backend": "hnswlib", "label": "low", "build": {"M": 3, "ef_construction": 10},
         "search": {"ef_search": 10}},
        {"backend": "faiss-ivf", "build": {"nlist": 16}, "search": {"nprobe": 1}},
    ], build_rules={"nlist": "2*sqrt(N)"})
    out = tmp_path_factory.mktemp("scale")
    return run_sweep(spec, out / "run", dataset=clustered(4000))


def test_summary_has_the_interface_keys_per_build(study):
    s = study.summary
    assert s["scale"]["sizes"] == [500, 1000, 2000] and s["scale"]["full_n"] == 4000
    for b in s["builds"]:
        assert all(key in b for key in KEYS)
    good = next(b for b in s["builds"] if b["label"] == "good")
    assert [r["n"] for r in good["samples"]] == [500, 1000, 2000]
    assert good["fit"]["model"] in ("log", "power") and set(good["fit"]["holdout_error"]) == {
        "log", "power"}
    lo, hi = good["band"]
    assert lo <= hi and good["exact"] is not None and good["ceiling"] >= TARGET
    assert good["transfer_error"] == pytest.approx(
        (good["predicted"] - good["exact"]) / good["exact"])
    # the miss-rate surface model's prediction and error beside the fitted knob's
    assert good["surface_fit"]["model"] == "miss surface"
    assert good["transfer_error_surface"] == pytest.approx(
        (good["predicted_surface"] - good["exact"]) / good["exact"])
    # the exact knob meets the target at full N and one below it does not (local search)
    assert s["backends"]["good"]["chosen"]["search"]["ef_search"] == good["exact"]
    assert good["predicted_recall"]["knob"] == good["predicted"]
    assert [p["multiple"] for p in good["predicted_at"]] == [2.0, 10.0]


def test_cost_is_priced_at_full_n_and_at_each_predicted_n(study):
    good = study.summary["backends"]["good"]
    bpv = good["chosen"]["bytes_per_vector"]
    assert bpv and bpv > 32 * 4  # measured: at least the float32 vector itself
    assert good["cost"]["n"] == 4000
    assert good["cost"]["ram_per_month"] == pytest.approx(bpv * 4000 / 1e9 * 3.0)
    at = good["cost_at"]
    assert [(a["multiple"], a["n"]) for a in at] == [(2.0, 8000), (10.0, 40000)]
    assert at[1]["per_month"] == pytest.approx(10 * good["cost"]["per_month"])


def test_ivf_nlist_follows_its_rule_and_nprobe_is_a_fraction(study):
    ivf = next(b for b in study.summary["builds"] if b["backend"] == "faiss-ivf")
    assert [r["build"]["nlist"] for r in ivf["samples"]] == [45, 63, 89]  # round(2 sqrt(N))
    assert ivf["build_at_full"]["nlist"] == 126
    assert ivf["fraction"] is True and ivf["fit"]["fitted"] == "fraction of the knob range"


def test_low_ceiling_is_reported_and_stops_the_search(study):
    low = next(b for b in study.summary["builds"] if b["label"] == "low")
    assert low["stopped"] is not None and low["ceiling"] < TARGET
    assert low["stopped"].startswith(
        f"no search setting reaches recall@10 {TARGET:g} with M 3, ef_construction 10 at N = ")
    assert "ceiling 0." in low["stopped"] and "try M 6, ef_construction 20" in low["stopped"]
    # stopped after one evaluation (the top of the range) where it fell below the target,
    # never built at sizes beyond that
    stop_rows = [r for r in low["samples"] if r.get("stopped")]
    if stop_rows:
        assert stop_rows[0]["evaluations"] == 1 and low["full_evaluations"] is None
        assert low["samples"][-1] is stop_rows[0]
        # the JSON carries the measured ceiling and the N where the build stopped
        assert low["ceiling"] == stop_rows[0]["ceiling"] and low["ceiling_measured"]
        assert low["ceiling_n"] == stop_rows[0]["n"]
    else:
        assert low["full_evaluations"] == 1 and low["exact"] is None
    assert low["stopped"] in study.summary["scale"]["messages"]


def test_export_carries_the_rule_and_verify_evaluates_it_at_another_n(study, tmp_path):
    exported = export(study.run.path,
                      engine="hnswlib", out=tmp_path / "hnsw.yaml", backend="good")
    import yaml

    doc = yaml.safe_load(exported.path.read_text())
    rule = doc["evidence"]["scale_rule"]
    good = next(b for b in study.summary["builds"] if b["label"] == "good")
    assert rule["knob"] == "ef_search" and rule["n"] == 4000 and rule["value"] == good["exact"]
    assert rule["transfer_error"] == pytest.approx(good["transfer_error"], rel=1e-5)
    assert rule["valid_n"] == [500, 4000]
    # another collection (twice as large, same family): the rule's knob at that N
    bigger = clustered(8000, seed=0)
    res = verify(exported.path, dataset=bigger)
    d = res.info
    assert d["scaled"]["n"] == 8000 and d["fingerprint_matches"] is False
    knob = d["search"]["ef_search"]
    assert knob >= good["exact"]  # the rule grows the knob with N
    check = d["file_checks"][0]
    assert check["check"] == "scale rule at N = 8,000"
    assert res.holds == check["passed"] == (d["measured"]["recall_lb"] >= TARGET - 1e-9)
    assert d["scaled"]["config_at_n"]["ef"] == knob


def test_cli_prints_the_study_and_the_report_draws_it(study, tmp_path, capsys):
    from retrieval.api import report
    from retrieval.cli.printers import print_run

    assert study.summary["workload"] == "scale"  # declared, not probed
    print_run("sweep", study.summary, str(study.run.path))  # the sweep's printer of its shape
    out = capsys.readouterr().out
    assert "knob at samples" in out and "transfer" in out and "no search setting" in out
    assert "used model (transfer)" in out
    for b in study.summary["builds"]:  # the model the study used, its knob and its error
        key = b["model_used"]
        if key and b[key] is not None:
            err = b[key.replace("predicted", "transfer_error", 1)]
            sign = "-" if err is None else f"{100 * err:+.0f}%"
            assert f"{key.removeprefix('predicted_')} {b[key]} ({sign})" in out
    page = report(study.run.path, tmp_path / "r.html")
    text = page.html.read_text()
    assert "Scale study" in text and "knob(N)" in text
    assert any(p.name.endswith("_scale.png") for p in page.pngs)


def test_the_answer_is_the_fastest_build_on_the_largest_sample(study):
    s = study.summary
    ans = s["scale"]["answer"]
    assert s["scale"]["check"] == "all"
    largest = s["scale"]["sizes"][-1]
    met = {i: b["samples"][-1]["qps"] for i, b in enumerate(s["builds"])
           if b["samples"][-1]["n"] == largest and b["samples"][-1]["knob"] is not None}
    assert ans["build"] == max(met, key=lambda i: met[i])
    assert ans["label"] == s["builds"][ans["build"]]["label"] and ans["checked_at_full"]
    b = s["builds"][ans["build"]]
    cost = s["scale"]["cost_s"]
    # samples + the full N's ground truth + the partition model (IVF builds) + this one
    # build and its searches there
    assert ans["cost_s"] == pytest.approx(cost["samples_s"] + cost["full_groundtruth_s"]
                                          + cost["partition_s"] + b["full_build_s"]
                                          + b["full_search_s"])
    assert ans["cost_s"] < cost["samples_s"] + cost["full_s"]


def test_check_answer_builds_only_the_answer_at_full_n(tmp_path):
    spec = scale_spec([
        {"backend": "hnswlib", "label": "a", "build": {"M": 12, "ef_construction": 60},
         "search": {"ef_search": 10}},
        {"backend": "hnswlib", "label": "b", "build": {"M": 6, "ef_construction": 30},
         "search": {"ef_search": 10}},
    ], check="answer")
    s = run_sweep(spec, tmp_path / "run", dataset=clustered(4000)).summary
    ans = s["scale"]["answer"]
    assert s["scale"]["check"] == "answer" and ans["checked_at_full"]
    for i, b in enumerate(s["builds"]):
        assert all(key in b for key in KEYS)
        if i == ans["build"]:
            assert b["exact"] is not None and b["ceiling_measured"] and b["full_build_s"] > 0
        else:  # predicted only: never built at the full N
            assert b["exact"] is None and not b["ceiling_measured"]
            assert b["full_build_s"] is None and b["predicted"] is not None
    assert [lb for lb, v in s["backends"].items() if v["chosen"] is not None] == [ans["label"]]


def test_a_killed_scale_study_runs_again_with_the_same_command(tmp_path):
    """Issue 34 MEDIUM 8: a scale study killed mid-way was refused as a non-empty folder; the
    same command now runs it again there (another spec is still refused)."""
    import json

    from retrieval.errors import ConfigError

    entries = [{"backend": "hnswlib", "label": "a", "build": {"M": 8, "ef_construction": 40},
                "search": {"ef_search": 10}}]
    data = clustered(2000, nq=100)
    out = tmp_path / "run"
    first = run_sweep(scale_spec(entries), out, dataset=data).summary
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["status"] = "running"  # what kill -9 leaves
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "summary.json").unlink()
    with pytest.raises(ConfigError, match="non-empty folder"):
        run_sweep(scale_spec(entries, bootstrap=60), out, dataset=data)  # another spec
    again = run_sweep(scale_spec(entries), out, dataset=data).summary
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    assert again["scale"]["sizes"] == first["scale"]["sizes"]
    assert [b["label"] for b in again["builds"]] == [b["label"] for b in first["builds"]]
    with pytest.raises(ConfigError, match="non-empty folder"):  # a complete one is kept
        run_sweep(scale_spec(entries), out, dataset=data)
