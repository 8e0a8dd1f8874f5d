"""Conformance checks for in-engine filtered search (``SupportsFilter``), for any backend that
adds it: ``check_filtering("mine", build={...})`` raises AssertionError on the first failure and
returns the recall per filter.

On a synthetic set with attributes (2000 x 16), after ``attach_attributes`` + ``build`` and the
backend's most accurate search params (or ``search``): for an integer range, a label equality, a
label set and a filter matching only 3 rows (fewer than k), every returned id lies inside the
filter, ids are -1 padded after the valid ones with ascending distances, no more ids than matches
come back, and the filtered recall@k (fewer-than-k rule) is >= ``min_recall`` (for the filters
matching at least k rows; the recall of the 3-row filter is returned, not asserted: Faiss HNSW's
selector, for one, misses some of so few matches at any ef).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.filtering.rows import bind
from retrieval.filtering.spec import Where
from retrieval.indexes.base import SupportsFilter
from retrieval.indexes.registry import create_index, get_backend
from retrieval.loaders.synthetic import make_synthetic
from retrieval.workload.buckets import Bucket
from retrieval.workload.truth import filtered_ground_truth, filtered_recall

K = 10


def filter_cases() -> list[Where]:
    """An int range (~5%), a label, a label set, and 3 rows (fewer than k)."""
    return [Where(attr="uniform", range=(0, 50_000)), Where(attr="tag", eq="t2"),
            Where.model_validate({"attr": "cluster", "in": ["c1", "c3"]}),
            Where(attr="row", range=(0, 2))]


def check_filtering(backend: str, build: Mapping[str, Any] | None = None,
                    search: Mapping[str, Any] | None = None, *, min_recall: float = 0.9,
                    workdir: Path | None = None) -> dict[str, float]:
    import dataclasses

    from retrieval.filtering.attrs import Attributes

    ds = make_synthetic(2000, 16, 30, n_clusters=8, attributes=True, seed=5)
    assert ds.attributes is not None
    attrs = Attributes(ds.n_base, {**ds.attributes.ints, "row": np.arange(ds.n_base)},
                       dict(ds.attributes.labels))
    ds = dataclasses.replace(ds, attributes=attrs)
    cls = get_backend(backend)
    index = create_index(backend, ds.dim, ds.metric, dict(build or {}), workdir=workdir)
    assert isinstance(index, SupportsFilter), f"{backend}: not SupportsFilter"
    out: dict[str, float] = {}
    try:
        index.attach_attributes(attrs)
        index.build(ds.base)
        params = (dict(search) if search is not None
                  else cls.most_accurate_search(index.build_params))
        if params:
            index.set_search_params(**params)
        for where in filter_cases():
            rf = bind(where, attrs, label="conformance")
            bucket = Bucket("c", None, (rf,), np.zeros(ds.n_queries, dtype=np.int64))
            gt = filtered_ground_truth(ds.base, ds.queries, ds.metric, bucket, K)
            res = index.filtered_search(ds.queries, K, rf)
            assert res.ids.shape == (ds.n_queries, K), f"{backend}: shape {res.ids.shape}"
            valid = res.ids >= 0
            assert rf.mask[res.ids[valid]].all(), f"{backend} {where.describe()}: id outside"
            assert (valid.sum(axis=1) <= rf.count).all(), f"{backend}: more ids than matches"
            for row, ok in zip(res.distances, valid):
                m = int(ok.sum())
                assert ok[:m].all() and not ok[m:].any(), f"{backend}: -1 not at the end"
                assert np.all(np.diff(row[:m]) >= -1e-4), f"{backend}: distances not ascending"
            rec = float(filtered_recall(res.ids, gt, K).mean())
            if rf.count >= K:  # a 3-row filter checks the padding; graph walks may miss rows
                assert rec >= min_recall, f"{backend} {where.describe()}: recall {rec:.3f}"
            out[where.describe()] = rec
    finally:
        index.close()
    return out
