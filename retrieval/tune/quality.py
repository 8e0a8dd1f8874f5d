"""A target in the user's metric (issue 32 item 2): ``target: {ndcg_non_inferior: M}`` (or
``mrr_non_inferior``: MRR@10, ``recall@100_non_inferior``: recall@100 of the qrels, the same way;
nDCG@10 below stands for the target's metric).

Beside the recall choice (the smallest knob value whose recall@k lower bound meets
``target_recall``), each target unit of a sweep is searched a second time, by the SAME target
search (:func:`retrieval.tune.target.solve`: galloping + bisection over ``[low, high]``) with
another acceptance predicate: the knob value is accepted when its nDCG@10 against the
dataset's qrels is **non-inferior** to exact search's by the margin M.

The test (stated in every summary as ``test``): over the judged tuning queries (those with a
judgment of grade >= 1), the per-query differences ``d_q = nDCG@10(knob) - nDCG@10(exact)``
(ranx through :func:`retrieval.stats.irmetrics.evaluate_rankings`; exact search = the exact
top-k of the dataset's ground truth, the reference) are tested by a **paired one-sided
t-test**: H0 mean(d) <= -M against H1 mean(d) > -M. The knob is non-inferior when the lower
``1 - alpha`` confidence bound ``mean(d) - t_{1-alpha, n-1} * sd(d) / sqrt(n)`` is > -M
(equivalently p < alpha). When every d_q is equal (sd 0) the bound is mean(d) itself.

Like the recall search, the search assumes quality does not fall as the knob grows; nDCG is
not strictly monotone in the knob, so the answer is the smallest value the search accepted,
with every probe recorded (``probes``).

Costs per chosen knob: ``distance_computations`` (mean per tuning query, where the engine
counts them: :class:`retrieval.indexes.base.SupportsDistanceCount`, e.g. Faiss HNSW's
``hnsw_stats.ndis``; otherwise None) and ``p50_ms`` (single-query p50 over the tuning
queries, the recall choice's own timing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.evaluation import BuiltIndex
from retrieval.indexes.base import SupportsDistanceCount
from retrieval.indexes.entry import SearchConfig
from retrieval.stats.irmetrics import evaluate_rankings, relevant_qrels
from retrieval.stats.noninferiority import NonInferiority, QualityTarget, non_inferiority
from retrieval.tune import target as tgt
from retrieval.tune.results import PointResult
from retrieval.tune.spec import SweepSpec
from retrieval.tune.units import Unit

if TYPE_CHECKING:
    from retrieval.tune.measure import Measurer

log = logging.getLogger(__name__)

TEST = ("paired one-sided t-test over the judged tuning queries: H0 mean(metric knob - "
        "metric exact) <= -margin; non-inferior when the lower 1-alpha confidence bound of the "
        "mean difference is > -margin")
DISTANCE_UNIT = ("distance computations per query (mean over the judged tuning queries), "
                 "where the engine counts them (Faiss HNSW hnsw_stats.ndis); null otherwise")
NEEDS_QRELS = ("relevance judgments (qrels): a dataset of kind text with collection scifact, "
               "cranfield or beir:<folder>")


@dataclass(frozen=True)
class Judgments:
    """The qrels of a dataset's queries: ``query_keys[i]`` the id of query row i,
    ``doc_keys[j]`` the id of base row j (as the qrels name them)."""

    qrels: Mapping[str, Mapping[str, int]]
    query_keys: Sequence[str]
    doc_keys: Sequence[str]


def judgments_of(ds: VectorDataset, qrels: Mapping[str, Mapping[str, int]]) -> Judgments:
    """Judgments for an in-memory dataset: its caller ids (as strings), else row numbers."""
    qk = ([str(x) for x in ds.query_ids.ids] if ds.query_ids is not None
          else [str(i) for i in range(ds.n_queries)])
    dk = ([str(x) for x in ds.base_ids.ids] if ds.base_ids is not None
          else [str(i) for i in range(ds.n_base)])
    return Judgments({str(q): {str(d): int(g) for d, g in v.items()} for q, v in qrels.items()},
                     qk, dk)


def check_quality_spec(spec: SweepSpec, executor: str) -> None:
    """One line (exit 2) for what a quality target cannot be combined with."""
    if spec.target is None:
        return
    where = spec.source
    if spec.tune.strategy != "target":
        raise ConfigError(f"{where}: field 'target' ({spec.target.key}) is solved by target "
                          f"search: tune.strategy must be target; received "
                          f"{spec.tune.strategy}")
    for name, value in (("filters", spec.filters), ("scale", spec.scale),
                        ("tenants", spec.tenants), ("topology", spec.topology),
                        ("cold", spec.cold or None)):
        if value is not None:
            raise ConfigError(f"{where}: field 'target' applies to a plain sweep; drop "
                              f"'{name}' (or 'target')")
    if executor != "local":
        raise ConfigError(f"{where}: field 'target' runs in this process (--executor local); "
                          f"received {executor}")
    depth = spec.target.depth
    if spec.k < depth:
        raise ConfigError(f"{where}: field 'k' must be >= {depth} with a quality target "
                          f"({spec.target.metric} needs {depth} results); received {spec.k}")


def load_judged(spec: SweepSpec) -> tuple[VectorDataset, Judgments]:
    """The spec's dataset and its qrels; ConfigError (one line) when it has none."""
    from retrieval.loaders.catalog import resolve_text_dataset

    where = f"{spec.source}: field 'dataset'"
    check_judged(spec, False, None)
    shown = spec.dataset if isinstance(spec.dataset, str) else dict(spec.dataset)
    td = resolve_text_dataset(spec.dataset, where=where)
    qrels: dict[str, dict[str, int]] = {q: dict(v) for q, v in td.collection.qrels.items()}
    if str(td.collection.info.get("relevance", "")).startswith("grade as given"):
        qrels = {q: {d: 5 - g for d, g in v.items()} for q, v in qrels.items()}  # Cranfield
    judged = relevant_qrels(qrels, set(td.query_ids))
    key = spec.target.key if spec.target is not None else "target"
    if not judged:
        raise ConfigError(f"{spec.source}: field 'target': {key} needs "
                          f"{NEEDS_QRELS}; dataset {shown!r} (collection "
                          f"{td.collection.name}) has no judged query")
    return td.dataset, Judgments(qrels, td.query_ids, td.base_ids)


def check_judged(spec: SweepSpec, in_memory: bool,
                 qrels: Mapping[str, Mapping[str, int]] | None) -> None:
    """Before anything is written: a quality target needs judgments, ``qrels`` given with an
    in-memory dataset or a spec dataset of kind text (one line, exit 2, otherwise)."""
    from retrieval.loaders.catalog import CORPUS_ONLY, TextSpec, dataset_spec

    key = spec.target.key if spec.target is not None else "target"
    if in_memory:
        if not qrels:
            raise ConfigError(f"{spec.source}: field 'target': {key} needs "
                              f"{NEEDS_QRELS}, or qrels= given with an in-memory dataset; "
                              f"received none")
        return
    parsed = dataset_spec(spec.dataset, where=f"{spec.source}: field 'dataset'")
    shown = spec.dataset if isinstance(spec.dataset, str) else dict(spec.dataset)
    if not isinstance(parsed, TextSpec):
        raise ConfigError(f"{spec.source}: field 'target': {key} needs "
                          f"{NEEDS_QRELS}; received dataset {shown!r} of kind {parsed.kind}")
    if parsed.collection in CORPUS_ONLY:
        raise ConfigError(f"{spec.source}: field 'target': {key} needs "
                          f"{NEEDS_QRELS}; received dataset {shown!r} (collection "
                          f"{parsed.collection}: no relevance judgments)")


@dataclass
class QualitySearch:
    """The quality target of one sweep over the judged tuning query rows ``rows``."""

    target: QualityTarget
    judgments: Judgments
    rows: np.ndarray
    _exact: np.ndarray | None = field(default=None, init=False)

    @classmethod
    def create(cls, target: QualityTarget, judgments: Judgments, tune_rows: np.ndarray,
               where: str = "spec") -> QualitySearch:
        keys = judgments.query_keys
        judged = relevant_qrels(judgments.qrels)
        rows = np.array([int(i) for i in tune_rows if keys[int(i)] in judged], dtype=np.int64)
        if rows.size < 2:
            raise ConfigError(f"{where}: field 'target': {rows.size} judged tuning queries "
                              f"(queries with a relevance judgment >= 1); the paired test needs "
                              f"at least 2")
        return cls(target, judgments, rows)

    def per_query(self, ids: np.ndarray) -> np.ndarray:
        """nDCG@10 of each judged row (``ids``: base rows retrieved, aligned with ``rows``)."""
        keys, docs = self.judgments.query_keys, self.judgments.doc_keys
        metric, depth = self.target.metric, self.target.depth
        ranked = {keys[int(q)]: [docs[int(j)] for j in row[row >= 0][:depth]]
                  for q, row in zip(self.rows, ids, strict=True)}
        scores = evaluate_rankings(self.judgments.qrels, ranked, [metric],
                                   query_ids=list(ranked)).per_query[metric]
        return np.array([scores.get(keys[int(q)], 0.0) for q in self.rows])

    def exact(self, m: Measurer) -> np.ndarray:
        """Exact search's per-query nDCG@10 (the ground truth's top k: the reference)."""
        if self._exact is None:
            self._exact = self.per_query(m.ev.gt.rows(self.rows).ids)
        return self._exact

    def search_unit(self, m: Measurer, built: BuiltIndex, unit: Unit,
                    recall_point: PointResult | None,
                    config: Callable[[dict[str, Any]], SearchConfig]) -> dict[str, Any]:
        """The unit's quality knob by target search, beside its recall knob, with both costs
        (plain JSON: it is kept in the study)."""
        assert unit.knob is not None
        exact = self.exact(m)
        seen: dict[int, tuple[float, NonInferiority]] = {}  # knob value -> (mean, test)

        def judge(v: int) -> tuple[float, NonInferiority]:
            if v not in seen:
                q = self.per_query(m.retrieve(built, config(unit.point(v)), self.rows))
                seen[v] = (float(q.mean()), non_inferiority(
                    q - exact, self.target.margin, self.target.alpha))
            return seen[v]

        found = tgt.solve(unit.low, unit.high, lambda v: judge(v)[1].holds)
        v_r = None if recall_point is None else int(recall_point.search[unit.knob])
        v_q = found.value

        def point(v: int | None, timed: PointResult | None) -> dict[str, Any] | None:
            if v is None:
                return None
            value, test = judge(v)
            search = config(unit.point(v))
            if timed is None and v == v_r:
                timed = recall_point
            if timed is None:
                timed = m.full(built, search)
            return {"search": unit.point(v), "knob_value": v, "value": value, **test.to_dict(),
                    "distance_computations": self._distances(m, built, search),
                    "p50_ms": timed.p50_ms, "recall": timed.recall}

        return {
            "knob": unit.knob, "knob_recall": v_r, "knob_quality": v_q,
            "agree": v_r is not None and v_r == v_q,
            "exact": float(exact.mean()), "n_queries": int(self.rows.size),
            "evaluations": found.evaluations, "probes": list(found.probes),
            "recall": point(v_r, recall_point), "quality": point(v_q, None),
        }

    def _distances(self, m: Measurer, built: BuiltIndex, search: SearchConfig) -> float | None:
        """Mean distance computations per judged query at ``search`` (None: not counted)."""
        index = built.index
        if not isinstance(index, SupportsDistanceCount):
            return None
        m.retrieve(built, search, self.rows)  # sets the params on the index
        queries = np.ascontiguousarray(m.ev.ds.queries[self.rows])
        return float(index.count_distances(queries, m.ev.k)) / len(self.rows)


def quality_section(target: QualityTarget, backends: Mapping[str, Mapping[str, Any]],
                    builds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary's ``quality`` section: per index entry the quality search of the build its
    recall choice picked (``by_index``), and the first entry's figures at the top."""
    notes = {b["unit"]: (b.get("note") or {}).get("quality") for b in builds}
    by_index: dict[str, Any] = {}
    for label, b in backends.items():
        unit = b.get("unit")
        doc = notes.get(unit) if unit is not None else None
        if doc is None:  # no recall choice: the first build of the entry that has one
            doc = next((notes[x["unit"]] for x in builds
                        if x["label"] == label and notes.get(x["unit"])), None)
        if doc is not None:
            by_index[label] = doc
    first = next(iter(by_index), None)
    top = by_index[first] if first is not None else {}
    return {
        "metric": target.metric, "margin": target.margin, "alpha": target.alpha,
        "test": TEST, "reference": "exact search (the dataset's exact top k)",
        "distance_unit": DISTANCE_UNIT, "latency_unit": "ms, single-query p50 (tuning queries)",
        "label": first,
        **{k: top.get(k) for k in ("knob", "knob_recall", "knob_quality", "agree", "exact",
                                   "n_queries", "recall", "quality")},
        "by_index": by_index,
    }


__all__ = ["Judgments", "NonInferiority", "QualitySearch", "check_judged", "check_quality_spec",
           "judgments_of", "load_judged", "non_inferiority", "quality_section"]
