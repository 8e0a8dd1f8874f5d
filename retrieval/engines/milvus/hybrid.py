"""Milvus' own hybrid search: ``MilvusClient.hybrid_search`` with one ``AnnSearchRequest`` per leg
(``limit`` = the leg's depth) and ``RRFRanker(k)`` (``1 / (k + rank)``, rank from 1, as rwb).

``RRFRanker`` has no per-leg weights and ``WeightedRanker`` normalises with arctan (not as rwb's
convex candidates), so Milvus runs equal-weight RRF only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrieval.indexes.hybrid import HybridCollection, HybridSearch, equal_weights

#: the fields of the collection an export expects
DENSE, SPARSE = "dense", "bm25_sparse"


def expressible(method: str, params: Mapping[str, Any]) -> bool:
    """Equal-weight RRF."""
    return method == "rrf" and equal_weights(params)


def form(method: str, params: Mapping[str, Any], dense_metric: str) -> dict[str, Any]:
    """The ``hybrid_search`` arguments (plain data)."""
    return {"call": "MilvusClient.hybrid_search(collection, reqs, ranker, limit)",
            "reqs": [{"anns_field": DENSE, "limit": int(d),
                      "param": {"metric_type": dense_metric.upper()}} if leg == "dense" else
                     {"anns_field": SPARSE, "limit": int(d), "param": {"metric_type": "IP"}}
                     for leg, d in dict(params["depths"]).items()],
            "ranker": {"strategy": "rrf", "params": {"k": params.get("k")}},
            "limit": 10}


def run(hybrid: Mapping[str, Any], coll: HybridCollection, workdir: Path) -> list[list[int]]:
    """Build a Milvus Lite collection (FLAT dense field, sparse inverted index of the BM25
    weights) and run the export's ``hybrid_search`` for every query."""
    from pymilvus import AnnSearchRequest, DataType, MilvusClient, RRFRanker

    client = MilvusClient(str(workdir / "milvus-hybrid.db"))
    try:
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field(DENSE, DataType.FLOAT_VECTOR, dim=int(coll.query_dense.shape[1]))
        schema.add_field(SPARSE, DataType.SPARSE_FLOAT_VECTOR)
        index = client.prepare_index_params()
        index.add_index(DENSE, index_type="FLAT", metric_type="COSINE")
        index.add_index(SPARSE, index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        client.create_collection("hy", schema=schema, index_params=index)
        client.insert("hy", [{"id": int(i), DENSE: coll.dense[i].tolist(),
                              SPARSE: dict(coll.sparse[i])} for i in coll.keep])
        client.flush("hy")  # FLAT + sparse inverted index: exact either way; Milvus Lite
        # 3.2.2 fails to reload a collection holding a sparse field ("No data left in file")
        if hybrid["ranker"]["strategy"] != "rrf":
            raise ValueError(f"ranker strategy {hybrid['ranker']['strategy']!r}: rrf expected")
        ranker = RRFRanker(hybrid["ranker"]["params"]["k"])
        out = []
        for i in range(len(coll.query_texts)):
            data = {DENSE: coll.query_dense[i].tolist(),
                    SPARSE: {int(t): float(c) for t, c in coll.query_sparse[i].items()}}
            reqs = [AnnSearchRequest(data=[data[r["anns_field"]]], anns_field=r["anns_field"],
                                     param=r["param"], limit=r["limit"]) for r in hybrid["reqs"]]
            res = client.hybrid_search("hy", reqs, ranker, limit=hybrid["limit"])
            out.append([int(hit["id"]) for hit in res[0]])
        return out
    finally:
        client.close()


HYBRID = HybridSearch(expressible=expressible, form=form, run=run)

__all__ = ["HYBRID", "expressible", "form", "run"]
