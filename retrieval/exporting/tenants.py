"""Export and verify a tenants run (``rwb sweep`` of a spec with ``tenants:``): the chosen
layout with its knob, the flat/index crossover and every layout's knob (issue 31, item 5).

``rwb export RUN --engine E [--backend LABEL]`` writes (``kind: ann-tenants``):

- ``layout``, ``config``, ``search``: the cheapest layout by p95 whose tenants meet the target
  (the run's own rule, among the engine's own backends first; ``--backend`` picks an index
  label), its engine-native config (index build + search knob; for ``flat_index`` the config of
  the tenants at or above the crossover) and its search params in rwb's names;
- ``tenant_filter``: for ``shared``, the engine's filtered call the tenant filter ran through;
- ``crossover``: the tenant size from which the per-tenant index beats flat search (None: flat
  everywhere; only for ``flat_index``);
- ``layouts``: every layout of that index entry with its knob, config, ``tenants_meeting``,
  ``tenant_recall_p5``, ``p95_ms`` and ``bytes_per_vector``;
- ``source``: the resolved sweep spec (dataset reference included) and the index label.

``rwb verify FILE`` re-runs the tenants study for the exported layout at its knob only (same
data, tenants, query split and judging rule) and holds when the share of tenants whose bound
meets the target is still >= ``tenants.meeting`` and no tenant got another tenant's id.
"""

from __future__ import annotations

import datetime as _dt
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval._version import __version__
from retrieval.errors import ConfigError, unknown_name_error
from retrieval.exporting.engines import ANN_ENGINES, own_backends
from retrieval.exporting.files import FORMAT_VERSION, field_of, tidy, write_config
from retrieval.exporting.registry import NothingToExport, register_exporter, register_verifier
from retrieval.exporting.topology import native_config
from retrieval.runs import WORKLOAD_TENANTS, RunDir
from retrieval.specfile import read_yaml
from retrieval.tune.summary import SweepSummary

FILE_KIND = "ann-tenants"
#: per layout, what the file keeps
LAYOUT_KEYS = ("layout", "search", "tenants_meeting", "tenant_recall_p5", "p95_ms",
               "bytes_per_vector", "meets", "crossover", "filter", "filter_call")


@dataclass(frozen=True)
class TenantsExported:
    path: Path
    engine: str
    label: str
    backend: str
    config: dict[str, Any] | None
    layout: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "engine": self.engine, "label": self.label,
                "backend": self.backend, "config": self.config, "layout": self.layout}


def _pick(layouts: list[dict[str, Any]], engine: str, backend: str | None) -> dict[str, Any]:
    if backend is not None:
        mine = [p for p in layouts if backend in (p["label"], p["backend"])]
        if not mine:
            names = {str(p[k]) for p in layouts for k in ("label", "backend")}
            raise unknown_name_error("backend", backend, names, where="--backend")
        layouts = mine
    ok = [p for p in layouts if p.get("meets") and p.get("p95_ms") is not None]
    if not ok:
        raise NothingToExport("no layout has tenants meeting the target (tenants.meeting)")
    own = own_backends(engine)
    return min(ok, key=lambda p: (0 if p["backend"] in own else 1, p["p95_ms"]))


@register_exporter(
    SweepSummary.KIND, ANN_ENGINES, exports="a tuned ANN index config",
    tuned="an ANN index config", made_by="rwb sweep SPEC --target-recall R", dedicated=False,
    shape=WORKLOAD_TENANTS,
)
def export_tenants(run: RunDir, engine: str, out: Path | str, backend: str | None
                   ) -> TenantsExported:
    """Write the chosen layout, its knob and the crossover (module doc)."""
    summary = run.read_summary(SweepSummary).to_json_dict()
    manifest = run.read_json("manifest.json")
    spec = read_yaml(run.file("spec.yaml")) if run.file("spec.yaml").is_file() else {}
    layouts = list(summary.get("layouts") or [])
    best = _pick(layouts, engine, backend)
    ds = manifest.get("dataset") or {}
    dim, metric, k = int(ds.get("dim") or 0), str(summary.get("metric")), int(summary["k"])
    name = str(best["backend"])

    def config(p: Mapping[str, Any]) -> dict[str, Any] | str:
        return native_config(engine, name, p["build"], p["search"], metric, dim, k)

    same = [p for p in layouts if p["label"] == best["label"] and p["build"] == best["build"]]
    if isinstance(spec, dict) and ds.get("ref") is not None:
        spec = {**spec, "dataset": ds["ref"]}
    cross = summary.get("crossover") or {}
    doc = {
        "rwb_export": FORMAT_VERSION, "kind": FILE_KIND, "engine": engine,
        "layout": best["layout"], "config": config(best), "search": best["search"],
        "crossover": best.get("crossover") if best["layout"] == "flat_index" else None,
        "tenant_filter": best.get("filter_call") if best["layout"] == "shared" else None,
        "layouts": [{**{key: p.get(key) for key in LAYOUT_KEYS}, "config": config(p)}
                    for p in same],
        "evidence": {
            "target_recall": summary.get("target_recall"), "k": k,
            "meeting": (summary.get("tenants") or {}).get("meeting"),
            "tenants": {key: (summary.get("tenants") or {}).get(key)
                        for key in ("count", "source", "sizes")},
            "crossover_rule": cross.get("rule"), "crossover_classes": cross.get("classes"),
            "dataset": {"name": summary.get("dataset"),
                        "fingerprint": summary.get("dataset_fingerprint")},
            "cpu": manifest.get("cpu"), "run_id": summary.get("run_id"),
            "exported_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "exported_by": f"rwb {__version__}"},
        "source": {"label": best["label"], "backend": name, "build": best["build"],
                   "spec": spec, "run": str(run.path)},
    }
    path = write_config(out, tidy(doc))
    cfg = doc["config"]
    return TenantsExported(path, engine, str(best["label"]), name,
                           cfg if isinstance(cfg, dict) else None, str(best["layout"]))


@dataclass(frozen=True)
class TenantsVerified:
    """``rwb verify`` of an ``ann-tenants`` file: named checks (tenants meeting, foreign
    ids)."""

    path: str
    holds: bool
    checks: list[dict[str, Any]] = field(default_factory=list)
    measured: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "holds": self.holds, "measurable": True,
                "checks": self.checks, "measured": self.measured}


def _one_layout_spec(doc: Mapping[str, Any], where: str) -> tuple[Any, str]:
    """The run's spec narrowed to the exported index label, build, knob and layout."""
    from retrieval.tune.spec import parse_spec
    from retrieval.tune.units import entry_labels

    spec_doc = dict(field_of(doc, "source.spec", where, "mapping"))
    label = str(field_of(doc, "source.label", where, "string"))
    labels = entry_labels(parse_spec(spec_doc, source=f"{where}: source.spec"))
    if label not in labels:
        raise ConfigError(f"{where}: field 'source.label' must name an index of source.spec "
                          f"({', '.join(labels)}); received '{label}'")
    entry = dict(spec_doc["indexes"][labels.index(label)])
    entry.update(build=dict(field_of(doc, "source.build", where, "mapping")),
                 search=dict(field_of(doc, "search", where, "mapping")))
    layout = str(field_of(doc, "layout", where, "string"))
    tenants = dict(spec_doc.get("tenants") or {})
    tenants["layouts"] = [layout]
    spec_doc.update(indexes=[entry], tenants=tenants)
    return parse_spec(spec_doc, source=f"{where}: source.spec"), layout


@register_verifier(FILE_KIND)
def verify_tenants(doc: Mapping[str, Any], path: Path | str) -> TenantsVerified:
    """Re-run the exported layout at its knob and judge its tenants again (module doc)."""
    from retrieval.loaders.catalog import resolve_dataset
    from retrieval.tune.spec import checked_entries
    from retrieval.tune.tenants_run import Study, run_entry

    where = str(path)
    spec, layout = _one_layout_spec(doc, where)
    ds = resolve_dataset(doc["source"]["spec"].get("dataset"),
                         where=f"{where}: field 'source.spec.dataset'")
    want = ((doc.get("evidence") or {}).get("dataset") or {}).get("fingerprint")
    if want and ds.fingerprint != want:
        raise ConfigError(f"{where}: the data of 'source.spec.dataset' changed (fingerprint "
                          f"{ds.fingerprint}; evidence.dataset.fingerprint {want})")
    assert spec.tenants is not None
    with tempfile.TemporaryDirectory(prefix="rwb-verify-tenants-") as tmp:
        study = Study(spec, ds, Path(tmp), None)
        points, _ = run_entry(study, checked_entries(spec)[0], str(doc["source"]["label"]))
    p = next(p for p in points if p["layout"] == layout)
    meeting = spec.tenants.meeting
    got = p["tenants_meeting"]
    checks = [
        {"check": f"tenants meeting recall@{spec.k} {spec.target_recall} ({layout})",
         "measured": got, "expected": f">= {meeting}",
         "passed": bool(got is not None and got >= meeting - 1e-12)},
        {"check": "ids of another tenant returned", "measured": p["foreign_ids"],
         "expected": 0, "passed": p["foreign_ids"] == 0},
    ]
    measured = {key: p.get(key) for key in LAYOUT_KEYS if key in p}
    return TenantsVerified(where, all(c["passed"] for c in checks), checks, measured)


__all__ = ["FILE_KIND", "TenantsExported", "TenantsVerified", "export_tenants",
           "verify_tenants"]
