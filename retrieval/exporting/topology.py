"""Export and verify a topology run (``rwb sweep`` of a spec with ``topology:``): the knob for
the collection's segment count (issue 31, item 5).

``rwb export RUN --engine E [--backend LABEL]`` writes (``kind: ann-topology``):

- ``by_segments``: every segment count the lab measured, with its knob, the engine-native
  config there (``config``), recall and its lower bound;
- ``segments`` / ``config``: the collection's count (the spec's ``topology.collection``, a
  ``live:`` section of the real collection attached read-only at export, whose
  ``describe().segments`` is used; else ``topology.collection_segments``) and the config for
  it: the knob measured at that count, or the run's per-segment rule's knob when the lab did
  not build it (``knob_source``); None without a collection count;
- ``evidence.segments_warning``: the warning when the collection's count is not among the
  lab's (the knob may not transfer);
- ``source``: the backend, build, the resolved sweep spec and the dataset reference.

``rwb verify FILE`` rebuilds the data as each entry's segment count (the same seeded split and
the engine's native segments where the run used them) and re-measures recall at its knob on the
recorded tuning queries: an entry holds when its lower bound meets the target (a build that is
not reproducible within the rebuild tolerance of :func:`retrieval.exporting.verify.judge_bound`).
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval._version import __version__
from retrieval.errors import ConfigError, unknown_name_error
from retrieval.exporting.engines import ANN_ENGINES, own_backends, translate
from retrieval.exporting.files import FORMAT_VERSION, field_of, full_search, tidy, write_config
from retrieval.exporting.portable import portable
from retrieval.exporting.registry import NothingToExport, register_exporter, register_verifier
from retrieval.indexes.registry import get_backend
from retrieval.params import validate_params
from retrieval.runs import WORKLOAD_TOPOLOGY, RunDir
from retrieval.specfile import read_yaml
from retrieval.tune.summary import SweepSummary
from retrieval.tune.topology_compare import knob_for_segments

log = logging.getLogger(__name__)

FILE_KIND = "ann-topology"


@dataclass(frozen=True)
class TopologyExported:
    path: Path
    engine: str
    label: str
    backend: str
    config: dict[str, Any] | None
    segments: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "engine": self.engine, "label": self.label,
                "backend": self.backend, "config": self.config, "segments": self.segments}


def native_config(engine: str, backend: str, build: Mapping[str, Any],
                  search: Mapping[str, Any], metric: str, dim: int, k: int
                  ) -> dict[str, Any] | str:
    """``engine``'s own config of ``backend``'s build and search params, or why it cannot
    express them."""
    bp = validate_params(get_backend(backend).BuildParams, dict(build)).model_dump(mode="json")
    try:
        out: dict[str, Any] = translate(engine, portable(backend, bp, full_search(backend,
                                                                                  search)),
                                        metric, dim, k)
        return out
    except ConfigError as exc:
        return f"not expressible in {engine}: {exc}"


def _label(rows: list[dict[str, Any]], engine: str, backend: str | None) -> str:
    labels = list(dict.fromkeys(str(r["label"]) for r in rows))
    if backend is not None:
        mine = [lb for lb in labels if any(backend in (r["label"], r["backend"])
                                           for r in rows if r["label"] == lb)]
        if not mine:
            names = set(labels) | {str(r["backend"]) for r in rows}
            raise unknown_name_error("backend", backend, names, where="--backend")
        labels = mine
    own = own_backends(engine)
    found = [lb for lb in labels if any(r["knob"] is not None for r in rows if r["label"] == lb)]
    if not found:
        raise NothingToExport("no segment count of the run has a knob meeting the target")
    return sorted(found, key=lambda lb: 0 if next(
        r["backend"] for r in rows if r["label"] == lb) in own else 1)[0]


def _attached_segments(spec: Any, where: str) -> dict[str, Any] | None:
    """The segment count of the collection ``topology.collection`` names (attached read-only,
    ``describe().segments``; None in ``segments`` when the engine reports none), or None when
    the spec names none."""
    section = ((spec or {}).get("topology") or {}).get("collection") if isinstance(
        spec, Mapping) else None
    if not section:
        return None
    from retrieval.live import attach

    col = attach(section, f"{where}: topology.collection")
    try:
        desc = col.describe()
    finally:
        col.close()
    from retrieval.live.tune import segments_source

    source = segments_source(desc)
    if desc.segments is None:
        log.warning("%s: the attached %s collection '%s' reports no segment count (%s)", where,
                    desc.engine, desc.name, source)
    return {"engine": desc.engine, "name": desc.name, "segments": desc.segments,
            "segments_source": source}


@register_exporter(
    SweepSummary.KIND, ANN_ENGINES, exports="a tuned ANN index config",
    tuned="an ANN index config", made_by="rwb sweep SPEC --target-recall R", dedicated=False,
    shape=WORKLOAD_TOPOLOGY,
)
def export_topology(run: RunDir, engine: str, out: Path | str, backend: str | None
                    ) -> TopologyExported:
    """Write the knob per segment count and the config for the collection's count."""
    summary = run.read_summary(SweepSummary).to_json_dict()
    manifest = run.read_json("manifest.json")
    spec = read_yaml(run.file("spec.yaml")) if run.file("spec.yaml").is_file() else {}
    rows = list(summary.get("topology") or [])
    label = _label(rows, engine, backend)
    first = next(r for r in rows if r["label"] == label and r["knob"] is not None)
    mine = [r for r in rows if r["label"] == label and r["build"] == first["build"]]
    name = str(first["backend"])
    ds = manifest.get("dataset") or {}
    dim, metric, k = int(ds.get("dim") or 0), str(summary.get("metric")), int(summary["k"])
    real = (summary.get("topology_info") or {}).get("collection_segments")
    attached = _attached_segments(spec, str(run.path))
    if attached is not None:
        real = attached["segments"]
    one = {**summary, "topology": mine}
    cmp = knob_for_segments(one, real, f"run '{run.path}'")
    at = cmp["knobs"][0] if cmp["knobs"] else {}

    def entry(segments: int, knob: int | None, **extra: Any) -> dict[str, Any]:
        search = {**(first.get("fixed") or {}), first["knob_name"]: knob}
        cfg = None if knob is None else native_config(engine, name, first["build"], search, metric,
                                                dim, k)
        return {"segments": segments, "knob": knob, "config": cfg, **extra}

    table = [entry(r["segments"], r["knob"], recall=r.get("recall"),
                   recall_lower=r.get("recall_lower"), segmented=r.get("segmented"),
                   segments_reported=r.get("segments_reported"))
             for r in mine]
    chosen = entry(real, at.get("knob")) if real is not None else None
    if isinstance(spec, dict) and ds.get("ref") is not None:
        spec = {**spec, "dataset": ds["ref"]}
    doc = {
        "rwb_export": FORMAT_VERSION, "kind": FILE_KIND, "engine": engine,
        "segments": real, "knob_name": first["knob_name"],
        "knob": None if chosen is None else chosen["knob"],
        "knob_source": at.get("source") if real is not None else None,
        "config": None if chosen is None else chosen["config"],
        "by_segments": table,
        "evidence": {
            "target_recall": summary.get("target_recall"), "k": k,
            "lab_segments": cmp["lab_segments"], "segments_warning": cmp["warning"],
            "collection": attached,
            "rule": first.get("rule"), "confidence": summary.get("confidence"),
            "dataset": {key: ds.get(key) for key in ("name", "fingerprint", "n_base", "dim",
                                                     "metric")},
            "cpu": manifest.get("cpu"), "run_id": summary.get("run_id"),
            "exported_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "exported_by": f"rwb {__version__}"},
        "source": {"label": label, "backend": name, "build": first["build"],
                   "fixed": first.get("fixed") or {}, "spec": spec, "run": str(run.path)},
    }
    path = write_config(out, tidy(doc))
    cfg = doc["config"]
    return TopologyExported(path, engine, label, name, cfg if isinstance(cfg, dict) else None,
                            real)


@dataclass(frozen=True)
class TopologyVerified:
    """``rwb verify`` of an ``ann-topology`` file: one named check per segment count."""

    path: str
    holds: bool
    checks: list[dict[str, Any]] = field(default_factory=list)
    segments_warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "holds": self.holds, "measurable": True,
                "checks": self.checks, "segments_warning": self.segments_warning}


@register_verifier(FILE_KIND)
def verify_topology(doc: Mapping[str, Any], path: Path | str) -> TopologyVerified:
    """Rebuild each entry's segment count and re-measure its knob (module doc)."""
    import numpy as np

    from retrieval.exporting.verify import judge_bound
    from retrieval.loaders.catalog import resolve_dataset
    from retrieval.tune.decide import lower_bound
    from retrieval.tune.spec import parse_spec
    from retrieval.tune.topology_run import TopologyStudy

    where = str(path)
    target = float(field_of(doc, "evidence.target_recall", where, "number", gt=0.0, le=1.0))
    src = field_of(doc, "source", where, "mapping")
    spec_doc = field_of(doc, "source.spec", where, "mapping")
    spec = parse_spec(dict(spec_doc), source=f"{where}: source.spec")
    ds = resolve_dataset(spec_doc.get("dataset"), where=f"{where}: field 'source.spec.dataset'")
    want = (doc.get("evidence") or {}).get("dataset") or {}
    if want.get("fingerprint") and ds.fingerprint != want["fingerprint"]:
        raise ConfigError(f"{where}: the data of 'source.spec.dataset' changed (fingerprint "
                          f"{ds.fingerprint}; evidence.dataset.fingerprint "
                          f"{want['fingerprint']})")
    study = TopologyStudy(spec, ds, None)
    backend, name = str(src.get("backend")), str(doc.get("knob_name"))
    cls = get_backend(backend)
    bp = validate_params(cls.BuildParams, dict(src.get("build") or {}))
    reproducible = bool(getattr(cls, "deterministic", False)) and spec.threads == 1
    entries = [e for e in field_of(doc, "by_segments", where, "list") if e.get("knob")]
    if doc.get("segments") and doc.get("knob") and all(
            e["segments"] != doc["segments"] for e in entries):
        entries.append({"segments": doc["segments"], "knob": doc["knob"], "recall_lower": None})
    checks: list[dict[str, Any]] = []
    for e in entries:
        seg = study.segmented(backend, bp, int(e["segments"]))
        try:
            study.set_knob(seg, dict(src.get("fixed") or {}), name, int(e["knob"]))
            pq = study.per_query(seg, study.split.tune)
        finally:
            seg.close()
        lower = lower_bound(pq, spec.k, spec.tune.confidence, spec.seed)
        ok, tol = judge_bound(float(np.mean(pq)), lower, int(pq.size), spec.k, target,
                              e.get("recall_lower"), reproducible)
        checks.append({"check": f"recall lower bound at {e['segments']} segments, "
                                f"{name}={e['knob']}",
                       "measured": round(lower, 4), "expected": f">= {target}",
                       "passed": ok, "recall": float(np.mean(pq)), "within_tolerance": tol})
    warning = (doc.get("evidence") or {}).get("segments_warning")
    if warning:
        log.warning("%s: %s", where, warning)
    return TopologyVerified(where, bool(checks) and all(c["passed"] for c in checks), checks,
                            warning)


__all__ = ["FILE_KIND", "TopologyExported", "TopologyVerified", "export_topology",
           "native_config", "verify_topology"]
