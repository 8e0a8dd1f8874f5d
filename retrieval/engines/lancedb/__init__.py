"""LanceDB, embedded (``lancedb``): the IVF_PQ and IVF_HNSW_SQ backends and the export in
LanceDB's own names (``create_index`` arguments + the query's knobs) with its inverse."""

from collections.abc import Mapping
from typing import Any

from retrieval.engines.lancedb import export, hybrid, index, live  # noqa: F401  (registers the backends)
from retrieval.indexes.engine import EngineDescriptor, register_engine

#: the conformance suite's cases (tests/engines/test_conformance.py): IVF_PQ (exact distances
#: by refine_factor); IVF_HNSW_SQ (SQ distances). 7 partitions: the writes check builds on 2/3 of
#: the 3000 rows (LanceDB: <= n // 256)
CONFORMANCE: tuple[dict[str, Any], ...] = (
    *({"backend": "lancedb-ivfpq", "metric": m, "build": {"num_partitions": 7}}
      for m in ("l2", "ip", "cosine")),
    *({"backend": "lancedb-hnsw", "metric": m,
       "build": {"m": 16, "ef_construction": 64, "num_partitions": 2},
       "min_recall": 0.95, "exact_distances": False} for m in ("l2", "ip", "cosine")),
)


def _filter_call(backend: str, search: Mapping[str, Any], k: int) -> str:
    return (f"table.search(q).limit({k}).where('<where clause>', prefilter=True) with "
            f"{dict(search)}")


ENGINE = register_engine(EngineDescriptor(
    name="lancedb",
    backends=("lancedb-ivfpq", "lancedb-hnsw"),
    extra="lancedb",
    libraries=("lancedb",),
    knobs=("ef", "nprobes", "refine_factor"),
    ef_knob="ef",
    to_native=export.to_native,
    from_native=export.from_native,
    attach=live.attach,
    filter_form="search(q).where('<SQL where clause on columns>', prefilter=True)",
    summary="LanceDB embedded: IVF_PQ and IVF_HNSW_SQ (nprobes / refine_factor / ef)",
    filter_call=_filter_call,
    conformance=CONFORMANCE,
    hybrid=hybrid.HYBRID,
))
