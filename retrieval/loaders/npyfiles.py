"""An ``npy`` dataset's files: base and queries, and optionally the caller's ids, a ground
truth in those ids and attributes keyed by them (see ``datasets/README.md``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from retrieval.data import Metric, VectorDataset
from retrieval.errors import DataError
from retrieval.ids import CallerIds, read_id_file
from retrieval.loaders.vectors import exact_distances, load_npy, read_npy


@dataclass(frozen=True)
class NpyFiles:
    """The resolved files of an ``npy`` dataset (None: not given)."""

    base: Path
    queries: Path
    groundtruth: Path | None = None
    ids: Path | None = None
    query_ids: Path | None = None
    attributes: Path | None = None


def build_npy(files: NpyFiles, metric: Metric, *, name: str, id_column: str = "id"
              ) -> VectorDataset:
    """The dataset of ``files``. With ``ids`` the ground truth file holds caller ids (mapped
    to row positions here, once) and the attributes are joined on ``id_column``."""
    base_ids = None
    if files.ids is None:
        ds = load_npy(files.base, files.queries, metric, groundtruth=files.groundtruth,
                      name=name)
    else:
        ds = load_npy(files.base, files.queries, metric, name=name)
        base_ids = CallerIds(read_id_file(files.ids, ds.n_base, f"dataset '{name}' field "
                                          f"'ids'"))
        ds = dataclasses.replace(ds, base_ids=base_ids)
        if files.groundtruth is not None:
            ds = _caller_groundtruth(ds, files.groundtruth, base_ids)
    if files.query_ids is not None:
        qids = read_id_file(files.query_ids, ds.n_queries, f"dataset '{name}' field "
                            f"'query_ids'")
        ds = dataclasses.replace(ds, query_ids=CallerIds(qids))
    if files.attributes is None:
        return ds
    from retrieval.loaders.attributes import read_attribute_file

    attrs = read_attribute_file(files.attributes, ds.n_base, ids=base_ids, id_column=id_column)
    return dataclasses.replace(ds, attributes=attrs)


def _caller_groundtruth(ds: VectorDataset, path: Path, ids: CallerIds) -> VectorDataset:
    """``ds`` with the ground truth of ``path`` (an .npy of the caller's base ids, (n_queries,
    depth)) as row positions, and its exact distances."""
    raw = read_npy(path, "npy groundtruth")
    what = f"npy groundtruth {path}"
    if raw.ndim != 2 or raw.shape[0] != ds.n_queries:
        raise DataError(f"{what}: expected ({ds.n_queries}, depth) caller ids (one row per "
                        f"query); received shape {raw.shape}")
    rows = ids.positions(raw, what)
    return dataclasses.replace(ds, gt_ids=rows,
                               gt_distances=exact_distances(ds.base, ds.queries, rows, ds.metric))
