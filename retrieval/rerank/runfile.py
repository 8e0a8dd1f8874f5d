"""The user's own first stage: a TREC run file turned into rerank candidates.

Each judged query's documents are taken in the order trec_eval and ranx read a run (score
descending, ties by rank; :func:`retrieval.loaders.trec.read_run`), with the run's own scores,
up to ``k``. Queries the run lacks get no candidates (they score 0, like any judged query without
results); documents not in the corpus are dropped; both are counted and reported.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.rerank.firststage import Candidates
from retrieval.rerank.spec import RerankSweepSpec, RunFileStage

log = logging.getLogger(__name__)


def run_file_candidates(spec: RerankSweepSpec, qids: Sequence[str], corpus_ids: Sequence[str],
                        k: int) -> tuple[Candidates, dict[str, Any]]:
    """The user's TREC run as :class:`Candidates` for ``qids`` (top ``k`` each, the run's own
    scores), and counts: queries the run lacks, documents not in the corpus (dropped)."""
    from retrieval.loaders.pairs import file_fingerprint
    from retrieval.loaders.trec import read_run

    fs = spec.first_stage
    assert isinstance(fs, RunFileStage)
    run = read_run(fs.run)
    pos = {d: i for i, d in enumerate(corpus_ids)}
    ids = np.full((len(qids), k), -1, dtype=np.int64)
    scores = np.full((len(qids), k), -np.inf, dtype=np.float32)
    missing: list[str] = []
    unknown = 0
    for i, q in enumerate(qids):
        if q not in run:
            missing.append(q)
            continue
        known = [(pos[d], sc) for d, sc in run[q] if d in pos]
        unknown += len(run[q]) - len(known)
        for j, (doc, sc) in enumerate(known[:k]):
            ids[i, j], scores[i, j] = doc, sc
    if missing or unknown:
        log.warning("run file %s: %d judged queries absent (no candidates), %d documents not in "
                    "the corpus (dropped)", fs.run, len(missing), unknown)
    info = {"path": fs.run, "fingerprint": file_fingerprint(fs.run), "queries_in_run": len(run),
            "judged_queries_missing": len(missing),
            "first_missing": missing[:5], "unknown_docs_dropped": unknown,
            "order": "score descending, ties by rank (as trec_eval / ranx read it)"}
    return Candidates(ids, scores), info


__all__ = ["run_file_candidates"]
