"""Export the tuned ANN config of a sweep run in an engine's own parameter names, with its evidence.

The file has four parts: ``engine``, ``config`` (engine-native, validated by
:mod:`retrieval.exporting.engines`), ``evidence`` (target, measured recall and its lower bound,
held-out recall, p50/p95/p99 ms, QPS, dataset fingerprint, CPU, library versions, rwb version,
run id) and ``source`` (the backend, full params, dataset and query split ``rwb verify`` needs to
rebuild and re-measure exactly what was measured).

Which config: ``--backend`` (an index label or backend name), else the cheapest config meeting
the target among the engine's own backends (Milvus -> milvus, Faiss -> faiss-*, hnswlib ->
hnswlib), else among every backend whose config the engine can express.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from retrieval._version import __version__
from retrieval.bench.load.evidence import capacity_for
from retrieval.errors import ConfigError, unknown_name_error
from retrieval.exporting.engines import ANN_ENGINES, own_backends, translate
from retrieval.exporting.files import (
    FORMAT_VERSION,
    full_search,
    recorded_digest,
    tidy,
    write_config,
)
from retrieval.exporting.filtered import FilteredExported, export_filtered
from retrieval.exporting.portable import portable
from retrieval.exporting.registry import NothingToExport, register_exporter
from retrieval.indexes.engine import all_engines
from retrieval.runs import WORKLOAD_FILTERED, RunDir
from retrieval.specfile import read_yaml
from retrieval.tune.decide import objective_value
from retrieval.tune.summary import BackendChoice, ChosenPoint, SweepSummary

LIBRARIES = ("retrieval-workbench", "numpy", "optuna",
             *(lib for d in all_engines().values() for lib in d.libraries))
#: the ``kind`` of an exported ANN file
FILE_KIND = "ann-index"
#: the top-level and ``evidence`` fields an ANN export has (``rwb verify`` refuses others)
TOP_FIELDS = ("rwb_export", "kind", "engine", "config", "evidence", "source")
EVIDENCE_FIELDS = (
    "target_recall", "k", "recall_definition", "recall", "recall_lower_bound", "confidence",
    "tuning_queries", "heldout_recall", "heldout_recall_lower_bound", "heldout_queries",
    "heldout_meets_target", "latency_ms", "qps", "qps_mode", "threads", "build_s",
    "memory_bytes", "strategy", "evaluations", "cheapest_rule", "measured_with", "measured_on",
    "dataset", "cpu", "library_versions", "rwb_version", "git_sha", "run_id", "measured_at",
    "exported_at", "exported_by", "note", "capacity_at_slo", "scale_rule", "under_churn",
    "bytes_per_vector", "memory", "at_the_bound", "recorded_digest",
)


@dataclass(frozen=True)
class Exported:
    path: Path
    engine: str
    label: str
    backend: str
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def _read_spec(run: RunDir) -> dict[str, Any]:
    path = run.file("spec.yaml")
    if not path.is_file():
        raise ConfigError(f"run '{run.path}' has no spec.yaml")
    data = read_yaml(path)
    return data if isinstance(data, dict) else {}


def _candidates(summary: SweepSummary, engine: str, backend: str | None) -> list[str]:
    backends = summary.backends
    labels = list(backends)
    if backend is not None:
        mine = [lb for lb in labels if backend in (lb, backends[lb].backend)]
        if not mine:
            names = set(labels) | {str(b.backend) for b in backends.values()}
            raise unknown_name_error("backend", backend, names, where="--backend")
        labels = mine
    objective = summary.objective or "p95_ms"
    own = own_backends(engine)

    def rank(label: str) -> tuple[int, float]:
        chosen = backends[label].chosen
        cost = objective_value(chosen.point(), objective) if chosen else 0.0
        return (0 if backends[label].backend in own else 1, cost)

    return sorted(labels, key=rank)


def _chosen(summary: SweepSummary, label: str) -> tuple[BackendChoice, ChosenPoint]:
    b = summary.backends[label]
    if b.chosen is None:  # pragma: no cover - callers pass labels with a choice
        raise NothingToExport(f"{label}: no config meets the target")
    return b, b.chosen


def at_the_bound(backend: str, recall: float | None, lower: float | None,
                 target: float | None, n: int | None,
                 build_threads: int) -> dict[str, Any] | None:
    """The flag an export carries when its config sits at the bound on a build that cannot be
    rebuilt exactly (an unseeded engine, or several build threads): its lower bound exceeds the
    target by less than one standard error of the mean recall over the tuning queries, so a
    fresh build misses the target about half the time. None otherwise."""
    from retrieval.indexes.registry import get_backend

    if None in (recall, lower, target) or not n:
        return None
    try:
        exact = bool(getattr(get_backend(backend), "deterministic", False)) and build_threads == 1
    except Exception:  # an engine not installed here: judged as unseeded
        exact = False
    r = float(recall)  # type: ignore[arg-type]
    se = math.sqrt(max(r * (1 - r), 1e-4) / n)
    margin = float(lower) - float(target)  # type: ignore[arg-type]
    if exact or margin >= se:
        return None
    return {"margin": round(margin, 6), "standard_error": round(se, 6),
            "message": "expect flakes: re-tune with a margin (the lower bound exceeds the "
                       "target by less than one standard error, on a build that is not "
                       "reproducible; rwb verify judges it within the rebuild tolerance)"}


def evidence(
    summary: SweepSummary, manifest: Mapping[str, Any], spec: Mapping[str, Any],
    label: str, engine: str,
) -> dict[str, Any]:
    b, c = _chosen(summary, label)
    ds = manifest.get("dataset") or {}
    packages = manifest.get("packages") or {}
    out: dict[str, Any] = {
        "target_recall": summary.target_recall,
        "k": summary.k,
        "recall_definition": summary.recall_definition,
        "recall": c.recall,
        "recall_lower_bound": c.recall_lb,
        "confidence": summary.confidence,
        "tuning_queries": c.n_queries,
        "heldout_recall": b.heldout_recall,
        "heldout_recall_lower_bound": b.heldout_recall_lb,
        "heldout_queries": (summary.queries or {}).get("heldout"),
        "heldout_meets_target": b.heldout_meets,
        "latency_ms": {"p50": c.p50_ms, "p95": c.p95_ms, "p99": c.p99_ms,
                       "mode": "single query"},
        "qps": c.qps,
        "qps_mode": "batch",
        "threads": spec.get("threads"),
        "build_s": c.build_s,
        "memory_bytes": c.memory_bytes,
        **({"bytes_per_vector": c.bytes_per_vector, "memory": {
            key: c.memory.get(key) for key in (
                "resident_bytes", "resident_source", "disk_bytes", "n", "encoding",
                "refine_store", "claimed_bytes_per_vector", "ratio_to_float32", "flags")}}
           if c.bytes_per_vector is not None and c.memory else {}),
        "strategy": summary.strategy,
        "evaluations": b.evaluations,
        "cheapest_rule": summary.cheapest_rule,
        "measured_with": {"backend": b.backend, "label": label},
        # the rwb backend the figures come from (another engine's library when it is not
        # one of this engine's own backends: a translation, see "note")
        "measured_on": b.backend,
        "dataset": {k: ds.get(k) for k in ("name", "fingerprint", "n_base", "n_queries", "dim",
                                           "metric")},
        "cpu": manifest.get("cpu"),
        "library_versions": {k: packages[k] for k in LIBRARIES if k in packages},
        "rwb_version": manifest.get("rwb_version"),
        "git_sha": (manifest.get("git") or {}).get("sha"),
        "run_id": summary.run_id,
        "measured_at": manifest.get("created"),
        "exported_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "exported_by": f"rwb {__version__}",
    }
    flag = at_the_bound(str(b.backend), c.recall, c.recall_lb, summary.target_recall,
                        c.n_queries,
                        int((manifest.get("builds") or {}).get("build_threads") or 1))
    if flag is not None:
        out["at_the_bound"] = flag
    quality = _quality(summary, label)
    if quality is not None:
        out["quality"] = quality
    if b.backend not in own_backends(engine):
        out["note"] = (
            f"measured with rwb backend '{b.backend}', not with {engine} itself: the "
            f"parameters mean the same, the recall may differ slightly; re-measure there"
        )
    return out


def _quality(summary: SweepSummary, label: str) -> dict[str, Any] | None:
    """A quality target's evidence for ``label`` (retrieval.tune.quality): the exported recall
    choice beside the cheapest knob non-inferior in nDCG@10, both with their costs."""
    q = summary.quality
    doc = None if q is None else q.by_index.get(label)
    if q is None or doc is None:
        return None
    return {"metric": q.metric, "margin": q.margin, "alpha": q.alpha, "test": q.test,
            **{k: doc.get(k) for k in ("knob", "knob_recall", "knob_quality", "agree", "exact",
                                       "n_queries")},
            "at_knob_recall": doc.get("recall"), "at_knob_quality": doc.get("quality"),
            "note": "the config exported is the recall choice (knob_recall)"}


def _dataset_ref(manifest: Mapping[str, Any], spec: Mapping[str, Any]) -> Any:
    ds = manifest.get("dataset") or {}
    if "ref" not in ds:
        return spec.get("dataset")
    return ds["ref"] if ds["ref"] is not None else ds.get("name")


def _in_memory(manifest: Mapping[str, Any]) -> bool:
    ds = manifest.get("dataset") or {}
    return "ref" in ds and ds["ref"] is None


def source(summary: SweepSummary, spec: Mapping[str, Any], label: str,
           manifest: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The sweep settings verify rebuilds and re-measures with; ``build_threads`` is the number
    of threads the sweep built with (its manifest's ``builds``; more than one: not reproducible)."""
    b, c = _chosen(summary, label)
    builds = (manifest or {}).get("builds") or {}
    backend = str(b.backend)
    tune = spec.get("tune") or {}
    return {
        "backend": backend,
        "build": dict(c.build),  # as the spec gave it (validated by the backend)
        "build_params": dict(c.build_params),  # with every default filled in
        "search": full_search(backend, c.search),
        # absolute (resolves from any folder); runs before the reference was recorded: the
        # spec's own entry; data given in memory: its name (verify --dataset gives it again)
        "dataset": _dataset_ref(manifest or {}, spec),
        "metric": summary.metric,
        "k": summary.k,
        "seed": spec.get("seed", 0),
        "threads": spec.get("threads", 1),
        **({"build_threads": int(builds["build_threads"])} if builds.get("build_threads")
           else {}),
        "warmup": spec.get("warmup", 32),
        "batch_repeats": spec.get("batch_repeats", 3),
        "modes": spec.get("modes", ["single", "batch"]),
        "query_split": {"heldout_fraction": tune.get("heldout_fraction", 0.5),
                        "seed": spec.get("seed", 0)},
        **({"dataset_in_memory": True} if _in_memory(manifest or {}) else {}),
    }


def scale_rule(summary: SweepSummary, label: str) -> dict[str, Any] | None:
    """The fitted knob(N) rule of ``label``'s chosen build when the run is a scale study."""
    from retrieval.tune.scale import export_rule

    scale = summary.scale
    i = summary.backends[label].scale_build
    if scale is None or i is None or i >= len(summary.builds):
        return None
    return export_rule(summary.builds[i], scale.build_rules or {})


@register_exporter(
    SweepSummary.KIND, ANN_ENGINES, exports="a tuned ANN index config", tuned="an ANN index config",
    made_by="rwb sweep SPEC --target-recall R", dedicated=False,
)
def export_sweep(run: RunDir, engine: str, out: Path | str, backend: str | None
                 ) -> Exported:
    """Write the engine-native config of run ``run``; NothingToExport when nothing qualifies."""
    summary = run.read_summary(SweepSummary)
    manifest = run.read_json("manifest.json")
    spec = _read_spec(run)
    if summary.target_recall is None:
        raise NothingToExport(f"run '{run.path}' has no target recall: nothing was chosen; "
                              f"run rwb sweep with --target-recall")
    dim = int((manifest.get("dataset") or {}).get("dim") or 0)
    metric, k = str(summary.metric), int(summary.k or 0)
    reasons = []
    for label in _candidates(summary, engine, backend):
        b = summary.backends[label]
        if b.chosen is None:
            reasons.append(f"{label}: no config meets the target")
            continue
        name = str(b.backend)
        try:
            p = portable(name, b.chosen.build_params, full_search(name, b.chosen.search))
            native = translate(engine, p, metric, dim, k)
        except ConfigError as exc:
            reasons.append(f"{label}: {exc}")
            continue
        proof = evidence(summary, manifest, spec, label, engine)
        cap = capacity_for(run.path, summary.run_id, label)  # a `rwb bench load` of this config
        if cap is not None:
            proof["capacity_at_slo"] = cap
        rule = scale_rule(summary, label)
        if rule is not None:  # a scale study: the knob as a rule of N (rwb verify at another N)
            proof["scale_rule"] = rule
        sealed = tidy(proof)
        sealed["recorded_digest"] = recorded_digest(sealed)
        doc = {
            "rwb_export": FORMAT_VERSION,
            "kind": FILE_KIND,
            "engine": engine,
            "config": native,
            "evidence": sealed,
            "source": source(summary, spec, label, manifest),
        }
        path = write_config(out, doc)
        return Exported(path, engine, label, name, native)
    raise NothingToExport(
        f"run '{run.path}' has no config meeting target recall {summary.target_recall} "
        f"that engine '{engine}' can take: " + "; ".join(reasons or ["no backends"])
    )


@register_exporter(
    SweepSummary.KIND, ANN_ENGINES, exports="a tuned ANN index config", tuned="an ANN index config",
    made_by="rwb sweep SPEC --target-recall R", dedicated=False, shape=WORKLOAD_FILTERED,
)
def export_filtered_sweep(run: RunDir, engine: str, out: Path | str, backend: str | None
                          ) -> FilteredExported:
    """Write the operating-point table of a filtered sweep (one setting per selectivity
    bucket); NothingToExport when no bucket has one."""
    summary = run.read_summary(SweepSummary)
    manifest = run.read_json("manifest.json")
    return export_filtered(run, engine, out, summary.to_json_dict(), manifest, _read_spec(run),
                           backend)


__all__ = ["FILE_KIND", "Exported", "NothingToExport", "evidence", "export_sweep", "source"]
