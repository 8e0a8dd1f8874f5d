"""A new workload kind is ONE module: this one. It registers the kind's plan / study / units
hooks (:mod:`retrieval.tune.workloads`), its CLI printer and its report tables, and ``rwb sweep``
runs a spec naming it (``workload: example-brute``) with no other file edited.
``scripts/layout_report.py`` lists the files this example touches ("files touched to add a
workload kind")."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.cli import printers
from retrieval.errors import ConfigError
from retrieval.reporting import registry as renderers
from retrieval.reporting.common import scalar_table
from retrieval.runs import RunDir
from retrieval.tune import workloads
from retrieval.tune.summary import SweepSummary
from retrieval.tune.workloads import SweepRequest, WorkloadKindDef, register_workload

#: the example kind's name (the summary's ``workload``; the spec's ``workload:``)
EXAMPLE = "example-brute"


def _example_plan(spec: Any, request: SweepRequest) -> None:
    workloads.check_not_resumable(spec, workloads.workload_kinds()[EXAMPLE], request)


def _example_study(spec: Any, run: RunDir, ds: Any, ref: Any, progress: Any,
           started: float) -> dict[str, Any]:
    """Measure: top-k by brute force (squared L2 distance, or inner product / cosine
    similarity, as the dataset's metric says); summarise: how many queries, and the recall@k
    against the dataset's exact ground truth."""
    from retrieval.groundtruth.exact import ground_truth

    run.write_yaml("spec.yaml", spec.model_dump(mode="json"))
    run.write_manifest(kind=SweepSummary.KIND, seeds={"index": spec.seed},
                       dataset={"name": ds.name, "ref": ref}, spec_source=spec.source)
    truth = ground_truth(ds, spec.k).ids[:, : spec.k]
    base, queries = ds.base.astype(np.float64), ds.queries.astype(np.float64)
    if ds.metric == "cosine":
        base = base / np.linalg.norm(base, axis=1, keepdims=True)
    score = queries @ base.T  # higher first
    if ds.metric == "l2":
        score = 2 * score - (base**2).sum(axis=1)  # -|q-b|^2 + |q|^2: the same order
    found = np.argsort(-score, axis=1, kind="stable")[:, : spec.k]
    hits = [len(set(a) & set(b)) for a, b in zip(found.tolist(), truth.tolist(), strict=True)]
    summary = {"kind": SweepSummary.KIND, "workload": EXAMPLE, "run_id": run.run_id,
               "name": spec.name, "k": spec.k, "queries_measured": int(ds.n_queries),
               "recall": sum(hits) / (spec.k * len(hits)), "evaluations": 1,
               "wall_s": time.perf_counter() - started}
    typed = SweepSummary.model_validate(summary)
    run.write_summary(typed)
    return typed.to_json_dict()


def _example_units(summary: Mapping[str, Any]) -> int:
    return 1


def _example_print(summary: dict[str, Any], where: str, as_json: bool) -> None:
    print(f"{EXAMPLE}: recall {summary['recall']:.3f} over {summary['queries_measured']} "
          f"queries ({where})")


def _example_tables(run: Any) -> renderers.Tables:
    return [("Example", scalar_table({"recall": run.summary["recall"]}))]


@pytest.fixture
def example_kind(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkloadKindDef]:
    """The example kind, its printer and its tables registered for one test (the registries
    restored afterwards)."""
    workloads.workload_kinds()  # the built-in kinds discovered first
    monkeypatch.setattr(workloads, "_KINDS", dict(workloads._KINDS))
    printers._discover()
    monkeypatch.setattr(printers, "_PRINTERS", dict(printers._PRINTERS))
    renderers._discover()
    monkeypatch.setattr(renderers, "_TABLES", dict(renderers._TABLES))
    kind = register_workload(WorkloadKindDef(EXAMPLE, lambda spec: False, _example_plan,
                                             study=_example_study, units=_example_units))
    printers.prints("sweep", EXAMPLE)(_example_print)
    renderers.renders_tables(SweepSummary.KIND, EXAMPLE)(_example_tables)
    yield kind


def _example_spec(tmp_path: Path, workload: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: ex\ndataset: synthetic-small\nk: 10\nworkload: {workload}\n"
                    f"indexes:\n  - backend: hnswlib\n    build: {{M: 8}}\n"
                    f"    search: {{ef_search: 16}}\n", encoding="utf-8")
    return path


def test_a_kind_registered_from_one_module_runs_through_rwb_sweep(example_kind, tmp_path,
                                                                   capsys):
    from retrieval.cli import main
    from retrieval.reporting.load import load_run
    from retrieval.reporting.registry import tables_of

    out = tmp_path / "run"
    assert main(["sweep", str(_example_spec(tmp_path, EXAMPLE)), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workload"] == EXAMPLE and summary["queries_measured"] > 0
    assert 0.9 <= summary["recall"] <= 1.0  # brute force against exact truth
    assert printed.startswith(f"{EXAMPLE}: recall {summary['recall']:.3f}")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "sweep" and manifest["status"] == "complete"
    tables = tables_of(load_run(out))
    assert tables is not None and tables[0][0] == "Example"


def test_the_example_kind_refuses_an_optuna_storage_in_one_line(example_kind, tmp_path,
                                                                 capsys):
    from retrieval.cli import main

    spec = _example_spec(tmp_path, EXAMPLE)
    assert main(["sweep", str(spec), "--study", "s", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"'{EXAMPLE}'" in err[0] and "drop --storage / --study" in err[0]
    assert not (tmp_path / "r").exists()  # refused before any run folder


def test_rwb_eval_and_ray_refuse_a_kind_they_do_not_run_in_one_line(example_kind, tmp_path,
                                                                    capsys):
    from retrieval.cli import main

    spec = _example_spec(tmp_path, EXAMPLE)
    assert main(["eval", str(spec), "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"a spec with '{EXAMPLE}' is measured by rwb sweep" in err[0]
    assert not (tmp_path / "e").exists()
    from retrieval.tune.spec import load_spec
    from retrieval.tune.sweep import run_sweep

    pytest.importorskip("ray", reason="--executor ray is checked after Ray is imported")
    with pytest.raises(ConfigError, match=f"'{EXAMPLE}' runs in this process.*received ray"):
        run_sweep(load_spec(spec), tmp_path / "r", executor="ray")
    assert not (tmp_path / "r").exists()


def test_an_unknown_workload_name_is_one_line_naming_the_registered_ones(example_kind,
                                                                          tmp_path, capsys):
    from retrieval.cli import main

    assert main(["sweep", str(_example_spec(tmp_path, "nope")), "--out",
                 str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "workload" in err[0] and "nope" in err[0] and EXAMPLE in err[0]
    # a built-in kind has a section of its own: its name is not a value of 'workload'
    assert main(["sweep", str(_example_spec(tmp_path, "scale")), "--out",
                 str(tmp_path / "r")]) == 2
    assert "scale" in capsys.readouterr().err


def test_every_built_in_workload_kind_is_registered_once_in_rank_order():
    kinds = workloads.workload_kinds()
    assert {"plain", "filtered", "scale", "tenants", "topology", "cold"} <= set(kinds)
    assert list(kinds)[-1] == "plain"  # asked last: the spec with no other section
    assert all(k.section is not None for n, k in kinds.items() if n != "plain")
    with pytest.raises(ValueError, match="registered twice"):
        register_workload(WorkloadKindDef("scale", lambda spec: True, _example_plan))


def test_strict_is_looked_up_by_workload_shape_like_the_printers(capsys):
    """--strict's check of a sweep is registered per workload shape (a live sweep has its
    own): no branch on the kind in the command."""
    from retrieval.cli.printers import strict_exit

    live = {"kind": "live-sweep", "workload": "live", "chosen": None}
    assert strict_exit("sweep", live) == 1
    assert "the live collection has no knob value meeting the target" in capsys.readouterr().err
    assert strict_exit("sweep", {**live, "chosen": {"ef": 8}, "heldout_meets": True}) == 0
    plain = {"kind": "sweep", "target_recall": 0.9, "backends": {
        "a": {"chosen": None, "heldout_meets": None}}}
    assert strict_exit("sweep", plain) == 1  # the index sweep's check: no config meets
    assert "no config meets target 0.9 for a" in capsys.readouterr().err
    assert strict_exit("no-such-view", plain) == 0
