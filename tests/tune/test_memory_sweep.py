"""A sweep with memory as the objective (issue 23 item 3): each build's resident bytes are
measured, the chosen point per entry is the one with the fewest bytes per vector that meets
the target, and a rescoring knob is solved jointly with nprobe (two-knob staircase)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.errors import ConfigError
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep


def _spec(**tune: object) -> object:
    return parse_spec({
        "name": "memory-objective",
        "dataset": "synthetic-small",
        "k": 10, "warmup": 2, "batch_repeats": 1, "threads": 1,
        "target_recall": 0.9,
        "indexes": [
            {"backend": "faiss-ivf", "label": "ivf",
             "build": {"nlist": 16, "encoding": ["flat", "sq8"]},
             "search": {"nprobe": 1}},
            {"backend": "faiss-ivf", "label": "ivf-refine",
             "build": {"nlist": 16, "encoding": "rabitq", "refine": True},
             "search": {"nprobe": 1}},
        ],
        "tune": {"strategy": "target", "objective": "bytes_per_vector", "heldout_fraction": 0.3,
                 "rescore_knobs": {"ivf-refine": "k_factor"},
                 "cost": {"ram_gb_month": 2.0, "n": 1_000_000}, **tune},
    }, source="memory.yaml")


@pytest.mark.slow  # ~10 s of CPU (a measuring subprocess per build); longer on a busy machine
def test_memory_objective_chooses_the_fewest_measured_bytes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = run_sweep(_spec(), tmp_path).summary
    builds = {(b["label"], b["build"]["encoding"]): b for b in s["builds"]}
    bpv = {key: b["chosen"]["bytes_per_vector"] for key, b in builds.items() if b["chosen"]}
    assert bpv[("ivf", "flat")] > 2 * bpv[("ivf", "sq8")]  # measured, it moves with the codes
    ivf = s["backends"]["ivf"]["chosen"]
    assert ivf["bytes_per_vector"] == min(v for (lab, _), v in bpv.items() if lab == "ivf")
    mem = ivf["memory"]
    assert mem["resident_source"].startswith("rss delta") and mem["flags"] == []
    assert mem["resident_bytes"] == pytest.approx(ivf["bytes_per_vector"] * mem["n"])
    cost = s["backends"]["ivf"]["cost"]
    assert cost["n"] == 1_000_000
    assert cost["ram_per_month"] == pytest.approx(ivf["bytes_per_vector"] * 1e6 / 1e9 * 2.0)
    # the refine unit searched (nprobe, k_factor) jointly
    ref = builds[("ivf-refine", "rabitq")]
    assert ref["evaluations"] >= 2
    searched = [r["search"] for r in s["rows"] if r["label"] == "ivf-refine"]
    assert all(set(x) == {"nprobe", "k_factor"} for x in searched)
    assert len({x["k_factor"] for x in searched}) >= 2 or ref["chosen"]["search"]["k_factor"] == 1
    assert any("recall_p95_bytes" in p["fronts"] for p in s["pareto"])


def test_rescore_knob_must_be_a_second_monotone_knob(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=r"rescore_knobs\.ivf-refine"):
        run_sweep(_spec(rescore_knobs={"ivf-refine": "nprobe"}), tmp_path)


@pytest.mark.slow  # sweep + export + report + two verifies
def test_quantized_export_carries_bytes_and_verify_remeasures_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import yaml

    from retrieval.api.verbs import export, verify

    spec = parse_spec({
        "name": "memory-export", "dataset": "synthetic-small", "k": 10, "warmup": 2,
        "batch_repeats": 1, "threads": 1, "target_recall": 0.9,
        "indexes": [{"backend": "faiss-ivf", "build": {"nlist": 16, "encoding": "sq8"},
                     "search": {"nprobe": 1}}],
        "tune": {"strategy": "target", "objective": "bytes_per_vector",
                 "heldout_fraction": 0.3},
    }, source="memory.yaml")
    run = run_sweep(spec, tmp_path / "run")
    out = export(run.run.path, "faiss", tmp_path / "faiss.yaml")
    doc = yaml.safe_load(out.path.read_text())
    assert doc["config"]["index_factory"] == "IVF16,SQ8"
    ev = doc["evidence"]
    assert ev["bytes_per_vector"] > 0 and ev["memory"]["encoding"] == "SQ8"
    assert ev["memory"]["resident_source"].startswith("rss delta")
    from retrieval.api.verbs import report

    pngs = report(run.run.path, tmp_path / "report.html").pngs
    assert any("recall_vs_bytes" in p.name for p in map(Path, pngs))
    checked = verify(out.path)
    checks = {c["check"]: c for c in checked.info["file_checks"]}
    assert checks["evidence.bytes_per_vector"]["passed"], checks["evidence.bytes_per_vector"]
    assert checked.holds
    # an edited figure is caught
    ev["bytes_per_vector"] = 4 * ev["bytes_per_vector"]
    out.path.write_text(yaml.safe_dump(doc))
    again = {c["check"]: c for c in verify(out.path).info["file_checks"]}
    assert not again["evidence.bytes_per_vector"]["passed"]


def test_shipped_memory_spec_plans_joint_units() -> None:
    from retrieval.specfile import read_yaml
    from retrieval.tune.units import plan_units

    root = Path(__file__).resolve().parents[2]
    spec = parse_spec(read_yaml(root / "sweeps" / "memory-qqp20k.yaml"),
                      source="sweeps/memory-qqp20k.yaml")
    assert spec.tune.objective == "bytes_per_vector"
    units = plan_units(spec, "target")
    joint = {(u.label, u.knob, u.knob2) for u in units if u.knob2}
    assert ("faiss-ivf-refine", "nprobe", "k_factor") in joint
    assert ("qdrant-quantized", "hnsw_ef", "oversampling") in joint
    assert all(u.ladder2[0] == 1 for u in units if u.knob2)
