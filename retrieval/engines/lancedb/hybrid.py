"""LanceDB's own hybrid search: a hybrid query fused by ``RRFReranker(K)`` (``1 / (K + rank)``,
rank from 1, as rwb). ``RRFReranker`` has no per-leg weights (LanceDB's weighted reranker
inverts and normalises its own way), so LanceDB runs equal-weight RRF only.

LanceDB's own full-text leg is its BM25 with another tokeniser; :func:`run` fuses the table's
own vector results with rwb's BM25 leg (the sparse inner products) through ``rerank_hybrid``,
so the order the reranker fuses is what is checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexes.hybrid import HybridCollection, HybridSearch, equal_weights


def expressible(method: str, params: Mapping[str, Any]) -> bool:
    """Equal-weight RRF."""
    return method == "rrf" and equal_weights(params)


def form(method: str, params: Mapping[str, Any], dense_metric: str) -> dict[str, Any]:
    """The hybrid query and its reranker (plain data)."""
    return {"call": "table.search(query_type='hybrid').vector(v).text(q).rerank(reranker)"
                    ".limit(n)",
            "reranker": {"class": "RRFReranker", "params": {"K": params.get("k")}},
            "limit": 10,
            "leg_depths": {str(leg): int(d) for leg, d in dict(params["depths"]).items()}}


def run(hybrid: Mapping[str, Any], coll: HybridCollection, workdir: Path) -> list[list[int]]:
    """Build a LanceDB table (id, text, vector) and fuse, for every query, its vector search
    (``leg_depths['dense']``) with the BM25 leg's top (``leg_depths['bm25']``) by the export's
    ``RRFReranker``."""
    import lancedb
    import pyarrow as pa
    from lancedb.rerankers import RRFReranker

    if hybrid["reranker"]["class"] != "RRFReranker":
        raise ValueError(f"reranker {hybrid['reranker']['class']!r}: RRFReranker expected")
    reranker = RRFReranker(**hybrid["reranker"]["params"])
    db = lancedb.connect(str(workdir / "lance-hybrid"))
    keep = [int(i) for i in coll.keep]
    row_of = {pos: r for r, pos in enumerate(keep)}
    table = db.create_table("hy", data=pa.table({
        "id": keep, "text": [coll.texts[i] for i in keep],
        "vector": [coll.dense[i].tolist() for i in keep]}))
    depth = hybrid["leg_depths"]
    lexical = next(leg for leg in depth if leg != "dense")
    out = []
    for i in range(len(coll.query_texts)):
        search: Any = table.search(coll.query_dense[i].tolist())  # a vector query builder
        vec = search.distance_type("cosine").limit(depth["dense"]).with_row_id(True).to_arrow()
        scores = coll.bm25_scores(i)
        top = [int(j) for j in np.argsort(-scores, kind="stable")[: depth[lexical]]
               if scores[j] > 0]
        names = vec.schema.names
        fts = table.to_arrow().take([row_of[j] for j in top])
        fts = fts.append_column("_rowid", pa.array(np.array([row_of[j] for j in top],
                                                             dtype=np.uint64)))
        fts = fts.append_column("_score", pa.array(scores[top].astype(np.float32)))
        fts = fts.select([c for c in fts.schema.names if c in names or c == "_score"])
        fused = reranker.rerank_hybrid(coll.query_texts[i], vec, fts)
        out.append([int(x) for x in fused["id"].to_pylist()[: hybrid["limit"]]])
    return out


HYBRID = HybridSearch(expressible=expressible, form=form, run=run)

__all__ = ["HYBRID", "expressible", "form", "run"]
