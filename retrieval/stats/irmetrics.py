"""IR metrics on relevance judgments (nDCG@10, recall@100, MRR@10, ...), computed by ranx.

Nothing here re-implements a metric; this module only fixes the policies around ranx:

- **Order**: a ranking is a list of doc ids, best first. It reaches ranx with rank-based scores
  (``n - position``), so ranx sees exactly this order (ranx breaks score ties by doc id).
- **Grades**: judgments with grade <= 0 are dropped (not relevant). nDCG uses the grade as the
  gain (ranx ``ndcg``, the trec_eval/BEIR convention); recall and MRR count grade >= 1.
- **Missing queries**: a judged query (>= 1 relevant doc) with no results, or absent from the run,
  scores 0 on every metric and stays in the mean (ranx ``make_comparable=True``); the ids are
  reported in ``missing_queries``. Run queries without judgments are ignored and reported in
  ``unjudged_queries``.
- **Unknown doc ids**: judged doc ids that are not in the corpus are kept (they are relevant and
  cannot be retrieved, so they lower recall/nDCG, as in BEIR) and reported in ``unknown_docs``
  (and logged once), never dropped silently.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from retrieval.data import TextCollection
from retrieval.errors import DataError

log = logging.getLogger(__name__)

DEFAULT_METRICS: tuple[str, ...] = ("ndcg@10", "recall@100", "mrr@10")
Qrels = Mapping[str, Mapping[str, int]]
Rankings = Mapping[str, Sequence[str]]


#: digits of the doc keys rwb hands ranx. ranx keeps a Qrels' or Run's doc ids in numpy unicode
#: arrays as wide as the longest id, and numba compiles ranx's functions again for every width
#: (~10 CPU-s per width in a process without that width in its cache: 1-char ids in one run,
#: 8-char SciFact ids in the next). Every doc id reaches ranx as a key of this one width, so one
#: compiled set serves every collection; results come back under the caller's ids.
RANX_KEY_WIDTH = 12


def ranx_keys(*id_groups: Iterable[Iterable[Any]]) -> dict[str, str]:
    """Doc id (as ``str``) -> a key of :data:`RANX_KEY_WIDTH` decimal digits for ranx, for every
    id in ``id_groups`` (each an iterable of id collections: the docs of each query). Keys are
    numbered in sorted id order, so two keys compare as their ids do; a mapping's insertion
    order is the caller's to keep (ranx's score ties follow it, not the ids)."""
    ids = sorted({str(d) for group in id_groups for docs in group for d in docs})
    if len(ids) >= 10**RANX_KEY_WIDTH:
        raise DataError(f"ranx: more than {10**RANX_KEY_WIDTH - 1} distinct doc ids")
    return {d: f"{i:0{RANX_KEY_WIDTH}d}" for i, d in enumerate(ids)}


def rekey(per_query: Mapping[str, Mapping[Any, Any]], keys: Mapping[str, str]
          ) -> dict[str, dict[str, Any]]:
    """``per_query`` (query id -> doc id -> grade or score) with every doc id replaced by its
    key from :func:`ranx_keys`, each query's order kept: what ranx is handed."""
    return {q: {keys[str(d)]: v for d, v in docs.items()} for q, docs in per_query.items()}


@dataclass(frozen=True)
class IRScores:
    """Means over judged queries (0..1 each) and per-query values, with what was left out."""

    means: dict[str, float]
    per_query: dict[str, dict[str, float]]
    n_queries: int
    missing_queries: tuple[str, ...] = ()
    unjudged_queries: tuple[str, ...] = ()
    unknown_docs: dict[str, list[str]] = field(default_factory=dict)

    def policy(self) -> dict[str, object]:
        """The counts a report states beside the means."""
        return {
            "n_queries": self.n_queries,
            "missing_queries_scored_zero": len(self.missing_queries),
            "unjudged_queries_ignored": len(self.unjudged_queries),
            "unknown_judged_doc_ids": sum(len(v) for v in self.unknown_docs.values()),
        }


def relevant_qrels(
    qrels: Qrels, query_ids: Collection[str] | None = None
) -> dict[str, dict[str, int]]:
    """Judgments with grade >= 1, for ``query_ids`` (default: all), queries with none dropped."""
    out: dict[str, dict[str, int]] = {}
    keep = None if query_ids is None else set(query_ids)
    for qid, docs in qrels.items():
        if keep is not None and qid not in keep:
            continue
        rel = {}
        for d, g in docs.items():
            if isinstance(g, bool) or not isinstance(g, int):
                raise DataError(
                    f"qrels: grade of query '{qid}', doc '{d}' must be an integer; "
                    f"received {g!r}"
                )
            if g > 0:
                rel[str(d)] = int(g)
        if rel:
            out[str(qid)] = rel
    return out


def evaluate_rankings(
    qrels: Qrels,
    rankings: Rankings,
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    query_ids: Collection[str] | None = None,
    corpus_ids: Collection[str] | None = None,
) -> IRScores:
    """Evaluate ``rankings`` (query id -> doc ids, best first) against ``qrels`` with ranx.

    ``query_ids`` restricts the evaluation to those queries (a tuning or held-out split);
    ``corpus_ids`` enables the unknown-doc report.
    """
    from ranx import Qrels as RQrels
    from ranx import Run as RRun
    from ranx import evaluate

    if not metrics:
        raise DataError("evaluate_rankings: at least one metric is required")
    judged = relevant_qrels(qrels, query_ids)
    if not judged:
        raise DataError(
            "evaluate_rankings: no query has a relevance judgment >= 1"
            + (" in the selected split" if query_ids is not None else "")
        )
    unknown: dict[str, list[str]] = {}
    if corpus_ids is not None:
        known = corpus_ids if isinstance(corpus_ids, set | frozenset | dict) else set(corpus_ids)
        for qid, judged_docs in judged.items():
            miss = [d for d in judged_docs if d not in known]
            if miss:
                unknown[qid] = miss
    run: dict[str, dict[str, float]] = {}
    missing: list[str] = []
    for qid in judged:
        docs = [str(d) for d in rankings.get(qid, ())]
        if not docs:
            missing.append(qid)
            continue
        n = len(docs)
        scored: dict[str, float] = {}
        for pos, d in enumerate(docs):
            if d in scored:
                raise DataError(f"ranking of query '{qid}' lists doc '{d}' twice")
            scored[d] = float(n - pos)
        run[qid] = scored
    unjudged = tuple(sorted(q for q in rankings if q not in judged and rankings[q] is not None))
    if query_ids is not None:
        wanted = set(query_ids)
        unjudged = tuple(q for q in unjudged if q in wanted)
    per_query: dict[str, dict[str, float]] = {m: {} for m in metrics}
    if run:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba type-safety chatter from ranx internals
            keys = ranx_keys(judged.values(), run.values())
            r_qrels = RQrels(rekey({q: v for q, v in judged.items() if q in run}, keys))
            r_run = RRun(rekey(run, keys))
            evaluate(r_qrels, r_run, list(metrics), make_comparable=True)
        for m in metrics:
            per_query[m] = {q: float(v) for q, v in r_run.scores[m].items()}
    for m in metrics:
        for q in missing:
            per_query[m][q] = 0.0
    n = len(judged)
    means = {m: sum(per_query[m].values()) / n for m in metrics}
    if missing:
        log.info("%d judged queries have no results; they score 0", len(missing))
    if unknown:
        log.warning(
            "%d judged doc ids (in %d queries) are not in the corpus; kept as unretrievable",
            sum(len(v) for v in unknown.values()), len(unknown),
        )
    return IRScores(
        means=means,
        per_query=per_query,
        n_queries=n,
        missing_queries=tuple(missing),
        unjudged_queries=unjudged,
        unknown_docs=unknown,
    )


def evaluate_collection(
    collection: TextCollection,
    rankings: Rankings,
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    query_ids: Collection[str] | None = None,
) -> IRScores:
    """:func:`evaluate_rankings` with the collection's qrels and corpus (unknown ids reported
    through :meth:`TextCollection.unknown_qrels`)."""
    scores = evaluate_rankings(collection.qrels, rankings, metrics, query_ids=query_ids)
    unknown = collection.unknown_qrels()
    if query_ids is not None:
        wanted = set(query_ids)
        unknown = {q: v for q, v in unknown.items() if q in wanted}
    if unknown:
        log.warning(
            "collection '%s': %d judged doc ids (in %d queries) are not in the corpus; kept as "
            "unretrievable", collection.name, sum(len(v) for v in unknown.values()), len(unknown),
        )
    return replace(scores, unknown_docs=unknown)


def _id_columns(frame: Any, names: Sequence[str], what: str) -> str:
    for n in names:
        if n in frame.columns:
            return n
    raise DataError(f"{what}: the frame has none of the columns {', '.join(names)}; "
                    f"received {', '.join(map(str, frame.columns))}")


def _nested(frame: Any, q_col: str | None, doc_col: str | None, score_col: str | None,
            cast: type, what: str) -> dict[str, dict[str, Any]]:
    q = q_col or _id_columns(frame, ("q_id", "query_id", "qid", "query-id"), what)
    d = doc_col or _id_columns(frame, ("doc_id", "docid", "corpus_id", "corpus-id"), what)
    s = score_col or _id_columns(frame, ("score", "relevance", "grade", "rel"), what)
    out: dict[str, dict[str, Any]] = {}
    for qid, did, sc in zip(frame[q].tolist(), frame[d].tolist(), frame[s].tolist(),
                            strict=True):
        out.setdefault(str(qid), {})[str(did)] = cast(sc)
    return out


def ranx_qrels(frame: Any, *, q_col: str | None = None, doc_col: str | None = None,
               score_col: str | None = None) -> Any:
    """A ``ranx.Qrels`` from a pandas frame of judgments (``q_id``/``query_id``,
    ``doc_id``/``corpus_id``, ``score``/``grade``; integer grades). ``ranx.Qrels.from_df``
    refuses pandas 3's string columns (it asserts dtype ``object``); this builds the dict."""
    from ranx import Qrels as RanxQrels

    return RanxQrels(_nested(frame, q_col, doc_col, score_col, int, "ranx_qrels"))


def ranx_run(frame: Any, *, name: str | None = None, q_col: str | None = None,
             doc_col: str | None = None, score_col: str | None = None) -> Any:
    """A ``ranx.Run`` from a pandas frame of scored results (``q_id``/``query_id``,
    ``doc_id``, ``score``: higher is better), e.g. a TREC run file read by
    :func:`retrieval.loaders.trec.read_run` into a frame; see :func:`ranx_qrels`."""
    from ranx import Run as RanxRun

    return RanxRun(_nested(frame, q_col, doc_col, score_col, float, "ranx_run"), name=name)


__all__ = [
    "DEFAULT_METRICS",
    "RANX_KEY_WIDTH",
    "IRScores",
    "evaluate_collection",
    "evaluate_rankings",
    "ranx_keys",
    "ranx_qrels",
    "ranx_run",
    "rekey",
    "relevant_qrels",
]
