"""Run kinds are registered, not listed: each kind's summary model, report renderers, CLI
printer and exporter are found through their registries; a sweep's shape is declared in its
summary (``workload``), and read by ``workload_kind`` alone."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

pytest.importorskip("matplotlib")

from retrieval.api import open_run, report
from retrieval.api.results import EvalRun, RunResult, SweepRun
from retrieval.cli import printers
from retrieval.cli.printers import print_run, prints
from retrieval.exporting.registry import run_shape
from retrieval.reporting import registry as renderers
from retrieval.reporting.load import load_run
from retrieval.runs import (
    WORKLOAD_FILTERED,
    WORKLOAD_PLAIN,
    WORKLOAD_SCALE,
    RunDir,
    RunKind,
    RunSummary,
    detect_kind,
    run_kinds,
    run_summary,
    summary_model,
    workload_kind,
)
from retrieval.runs import kinds as registry
from retrieval.tune.summary import SweepSummary

BUILT_IN = ("eval", "sweep", "bench-embed", "bench-fanout", "bench-load", "bench-churn",
            "rerank-sweep", "cache-tune", "rag-study", "profile")


def test_every_built_in_kind_is_registered_in_message_order():
    assert run_kinds()[:len(BUILT_IN)] == BUILT_IN
    for kind in BUILT_IN:
        model = summary_model(kind)
        assert kind == model.KIND and model.SIGNATURE, kind
        assert RunKind.parse(kind) == kind
    assert RunKind.parse("mystery") is None and RunKind.parse(3) is None
    assert [k for k in BUILT_IN if summary_model(k).RETARGETS] == ["eval"]


def test_signatures_recognise_a_summary_that_names_no_kind():
    # a sweep summary holds the eval signature (rows, dataset) too: the longer one wins
    sweep = {"rows": [], "dataset": "x", "builds": [], "backends": {}, "pareto": []}
    assert detect_kind(sweep, {}) == "sweep"
    assert detect_kind({"rows": [], "dataset": "x"}, {}) == "eval"
    assert detect_kind({"configs": [], "runbook": {}, "target_recall": 0.9}, {}) == "bench-churn"
    assert detect_kind({"rows": []}, {}) is None
    assert detect_kind({"rows": [], "dataset": "x"}, {"kind": "profile"}) == "profile"


def test_a_kind_field_takes_registered_kinds_only_and_is_written_as_plain_text():
    s = SweepSummary.model_validate({"kind": "sweep"})
    assert type(s.to_json_dict()["kind"]) is str
    assert json.loads(s.model_dump_json())["kind"] == "sweep"
    with pytest.raises(ValidationError, match="'eval', 'sweep'"):
        SweepSummary.model_validate({"kind": "mystery"})


@pytest.mark.parametrize(("summary", "shape"), [
    ({}, WORKLOAD_PLAIN),
    ({"workload": "filtered"}, WORKLOAD_FILTERED),
    ({"workload": "scale", "scale": {}}, WORKLOAD_SCALE),
    ({"scale": {"sizes": [1000]}}, WORKLOAD_SCALE),  # a scale study written before `workload`
    ({"filters": {"buckets": []}}, WORKLOAD_FILTERED),  # a filtered run of then
    ({"workload": "plain", "scale": {}}, WORKLOAD_PLAIN),  # what is declared wins
])
def test_the_shape_is_declared_and_older_summaries_read_in_one_place(summary, shape):
    assert workload_kind(summary) == shape


def test_a_scale_study_summary_has_typed_sections():
    s = SweepSummary.model_validate({
        "kind": "sweep", "workload": "scale", "builds": [{"label": "a"}],
        "backends": {"a": {"backend": "hnswlib", "scale_build": 0, "heldout_meets": True}},
        "scale": {"sizes": [500, 1000], "build_rules": {"nlist": "2*sqrt(N)"}, "other": 1},
    })
    assert s.scale is not None and s.scale.build_rules == {"nlist": "2*sqrt(N)"}
    assert s.backends["a"].scale_build == 0
    data = s.to_json_dict()  # the same keys back, extra ones kept
    assert data["scale"] == {"sizes": [500, 1000], "build_rules": {"nlist": "2*sqrt(N)"},
                             "other": 1}
    assert list(data["backends"]["a"]) == ["backend", "heldout_meets", "scale_build"]
    with pytest.raises(ValidationError):
        SweepSummary.model_validate({"workload": "sideways"})


def test_the_exporter_registry_reads_the_runs_shape(tmp_path):
    run = RunDir.create(tmp_path / "r", "r")
    assert run_shape(run) == WORKLOAD_PLAIN  # no summary yet
    (run.path / "summary.json").write_text(json.dumps({"kind": "sweep", "workload": "filtered"}))
    assert run_shape(run) == WORKLOAD_FILTERED


@pytest.fixture
def isolated(monkeypatch):
    """The registries as they are, restored after the test (a test kind leaves no trace)."""
    registry._discover()
    renderers._discover()
    printers._discover()
    monkeypatch.setattr(registry, "_MODELS", dict(registry._MODELS))
    monkeypatch.setattr(renderers, "_FIGURES", dict(renderers._FIGURES))
    monkeypatch.setattr(renderers, "_TABLES", dict(renderers._TABLES))
    monkeypatch.setattr(printers, "_PRINTERS", dict(printers._PRINTERS))


def test_a_new_kind_is_one_decorated_model_plus_its_renderers_and_printer(
        isolated, tmp_path, capsys):
    from matplotlib.figure import Figure

    from retrieval.reporting.common import scalar_table

    @run_summary
    class WatchSummary(RunSummary):
        KIND: ClassVar[RunKind] = RunKind("test-watch")
        SIGNATURE: ClassVar[tuple[str, ...]] = ("watched", "drift")

        watched: int | None = None

    @renderers.renders_figures(WatchSummary.KIND)
    def figures(run: Any, remeasure: bool) -> renderers.Figures:
        fig = Figure()
        fig.add_subplot().plot([0, 1], [0, run.summary["watched"]])
        return [("watch", "Watched", fig, "what was watched")]

    @renderers.renders_tables(WatchSummary.KIND)
    def tables(run: Any) -> renderers.Tables:
        return [("Watch", scalar_table(run.summary))]

    @prints("test-watch")
    def show(summary: dict[str, Any], where: str, as_json: bool) -> None:
        print(f"watched {summary['watched']} at {where}")

    d = tmp_path / "run"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"watched": 7, "drift": 0.1}))
    (d / "manifest.json").write_text(json.dumps({"kind": "test-watch"}))
    assert run_kinds()[-1] == "test-watch"  # after the built-in ones (RANK)
    assert detect_kind({"watched": 1, "drift": 0}, {}) == "test-watch"
    loaded = load_run(d)
    assert loaded.kind == "test-watch" and isinstance(loaded.model, WatchSummary)
    page = report(d, tmp_path / "w.html")
    assert [p.name for p in page.pngs] == ["w_watch.png"]
    assert "what was watched" in page.html.read_text()
    opened = open_run(d)
    assert type(opened) is RunResult and opened.kind == "test-watch"
    print_run("test-watch", loaded.summary, str(d))
    assert capsys.readouterr().out == f"watched 7 at {d}\n"
    with pytest.raises(LookupError, match="no printer of 'mystery'"):
        print_run("mystery", {}, str(d))
    with pytest.raises(ValueError, match="registered twice"):
        run_summary(type("Other", (WatchSummary,), {"__qualname__": "Other"}))


def test_result_classes_follow_the_summary_model(tmp_path):
    from retrieval.api.results import result_class
    from retrieval.tune.summary import EvalSummary

    assert result_class(EvalSummary) is EvalRun
    assert result_class(SweepSummary) is SweepRun
    assert result_class(RunSummary) is RunResult
