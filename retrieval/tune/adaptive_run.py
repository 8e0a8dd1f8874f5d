"""The ``adaptive:`` step of a plain sweep: after the sweep, each index entry's chosen build
(the first of its grid when none was chosen) runs the spec's adaptive policies on the same
dataset, exact ground truth and query split (:func:`retrieval.adaptive.run.run_adaptive`):
fitted on the tuning queries, judged on the held-out ones against the tuned fixed
``ef_search``. The entries go into the summary's ``adaptive`` list, the per-query results into
``adaptive_queries.parquet``."""

from __future__ import annotations

import logging
from typing import Any

from retrieval.adaptive.run import run_adaptive
from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.indexes.base import SupportsCountedSearch
from retrieval.indexes.registry import get_backend
from retrieval.tune import trials as tr
from retrieval.tune.decide import QuerySplit
from retrieval.tune.spec import SweepSpec, build_grid
from retrieval.tune.units import entry_labels

log = logging.getLogger(__name__)

#: the run directory's table of per-query adaptive results
QUERIES_TABLE = "adaptive_queries.parquet"


def check_adaptive_spec(spec: SweepSpec, executor: str) -> None:
    """An ``adaptive:`` section runs on a plain sweep, in this process, with held-out queries."""
    if spec.adaptive is None:
        return
    others = [name for name, v in (("filters", spec.filters), ("scale", spec.scale),
                                   ("tenants", spec.tenants), ("topology", spec.topology),
                                   ("cold", spec.cold or None)) if v is not None]
    if others or executor != "local":
        got = ", ".join(others) or f"--executor {executor}"
        raise ConfigError(f"{spec.source}: field 'adaptive' runs on a plain sweep in this "
                          f"process (no filters, scale, tenants, topology or cold; --executor "
                          f"local); received {got}")
    if spec.tune.heldout_fraction <= 0:
        raise ConfigError(f"{spec.source}: field 'tune.heldout_fraction' must be > 0 with "
                          f"'adaptive' (policies are judged on held-out queries); received "
                          f"{spec.tune.heldout_fraction}")


def chosen_builds(spec: SweepSpec, ds: VectorDataset, split: QuerySplit,
                  book: tr.Book) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, backend, build) per index entry: the sweep's chosen build, else the first."""
    from retrieval.tune.summary import build_summary

    backends = build_summary(spec, ds, split, book, run_id="", storage="",
                             study_name="")["backends"]
    out = []
    for entry, label in zip(spec.indexes, entry_labels(spec), strict=True):
        chosen = (backends.get(label) or {}).get("chosen")
        build = dict(chosen["build"]) if chosen else build_grid(entry)[0]
        out.append((label, entry.backend, build))
    return out


def run_sweep_adaptive(spec: SweepSpec, ds: VectorDataset, ev: Any, split: QuerySplit,
                       book: tr.Book) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every policy on every entry's chosen build (``ev``: the sweep's Evaluator, whose build
    cache holds the builds): the summary entries and the per-query rows."""
    assert spec.adaptive is not None
    exact = ev.gt.ids[:, : spec.k]
    entries: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for label, backend, build in chosen_builds(spec, ds, split, book):
        log.info("adaptive policies on %s %s", label, build)
        counts = issubclass(get_backend(backend), SupportsCountedSearch)
        index = ev.build(backend, build).index if counts else None  # None: skipped, with why
        e, r = run_adaptive(spec.adaptive, index, ds.queries, exact, spec.k, split.tune,
                            split.heldout, target_recall=spec.target_recall, where=spec.source,
                            meta={"label": label, "backend": backend, "build": build})
        entries += e
        rows += r
    return entries, rows
