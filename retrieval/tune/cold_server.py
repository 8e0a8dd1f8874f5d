"""Cold runs of an index that lives in a server (pgvector; issue 31, item 3): a backend with
:class:`~retrieval.tune.cold.SupportsServerCold` names the server to build on and what a cold pass
can drop there (for pgvector :mod:`retrieval.engines.pgvector.cold`: a restart of rwb's own
server and ``posix_fadvise(DONTNEED)`` on the table's files, or on a server rwb did not start
only what is possible without changing it; ``drop_method`` / ``drop_reason`` say which).

The table is built once per build config (the knob chosen warm, as for file-backed indexes);
each search config is then measured by a fresh session that attaches to the table after the drop
(the plan check reads the catalog, then the table's files are dropped from the page cache again),
searching the queries one at a time: a cold pass, then ``WARM_PASSES`` passes, the same
definitions as :mod:`retrieval.tune.cold` (``cold_p99_ms``, ``warm_p99_ms``,
``queries_to_warm``). A RAM budget (25 / 50 / 100% of the table's bytes, heap + indexes as the
server measures them: ``relation_bytes``) is the server restarted with ``shared_buffers`` at the
budget and the table's files dropped from the OS page cache before each window of
``COLD_WINDOW`` queries: ``method`` ``shared_buffers``, not a cgroup limit. On a server rwb did
not start the budgets are not measured (``served`` false, ``why``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from retrieval.indexes.registry import get_backend
from retrieval.stats.metrics import recall_by_id
from retrieval.tune.coldpass import (
    BUDGETS,
    COLD_WINDOW,
    SHARED_BUFFERS,
    WARM_PASSES,
    cold_profile,
    drop_pages,
    file_bytes,
    resident_fraction,
    timed_pass,
)
from retrieval.tune.decide import lower_bound
from retrieval.tune.spec import checked_entries

ColdRun = Any  # retrieval.tune.cold.ColdRun (not imported: cold imports this module)
_KEYS = ("cold_p99_ms", "warm_p99_ms", "queries_to_warm", "recall_lower")


def _measure(cr: ColdRun, srv: Any, cls: type, bp: Any, handle: dict[str, Any],
             search: dict[str, Any], nbytes: int, budget: float | None) -> dict[str, Any]:
    """One cold pass + warm passes of a fresh session on the table ``handle`` names."""
    spec, ds = cr.spec, cr.ds
    drop = srv.drop(str(handle["table"]), drop_pages,
                    None if budget is None else int(budget * nbytes))
    idx = srv.index(cls, ds.dim, ds.metric, bp, seed=spec.seed, threads=spec.threads)
    try:
        idx.attach(handle)
        idx.set_search_params(**search)
        files = list(drop.files)
        if files:  # the attach's plan check read the catalog: drop the table's pages again
            drop_pages(files)
        resident = resident_fraction(files) if files else None
        before = None
        if budget is not None and files:
            def before(j: int) -> None:
                if j % COLD_WINDOW == 0:
                    drop_pages(files)
        cold, _ = timed_pass(idx, cr.queries, spec.k, before)
        warm = ids = None
        for _ in range(WARM_PASSES):
            warm, ids = timed_pass(idx, cr.queries, spec.k, before)
        assert warm is not None and ids is not None
    finally:
        idx.close()
    pq = recall_by_id(ids, cr.gt, spec.k)
    return {**cold_profile(cold, warm), "drop_method": drop.method,
            "drop_reason": drop.reason, "shared_buffers": drop.shared_buffers,
            "resident_after_drop": resident,
            "index_file_bytes": file_bytes(files) if files else None,
            "relation_bytes": nbytes, "warm_resident_bytes": None,
            "recall": float(pq.mean()),
            "recall_lower": lower_bound(pq, spec.k, spec.tune.confidence, spec.seed),
            "p95_ms": float(np.percentile(warm, 95))}


def _budget(cr: ColdRun, srv: Any, cls: type, bp: Any, handle: dict[str, Any],
            search: dict[str, Any], nbytes: int, budget: float) -> dict[str, Any]:
    head = {"budget": budget, "budget_bytes": int(budget * nbytes),
            "budget_of": "relation_bytes", "method": "shared_buffers"}
    why = srv.budget_reason()
    if why is not None:
        return {**head, **dict.fromkeys(_KEYS), "served": False, "why": why}
    m = _measure(cr, srv, cls, bp, handle, search, nbytes, budget)
    return {**head, **{k: m[k] for k in _KEYS}, "shared_buffers": m["shared_buffers"],
            "served": True, "method_detail": SHARED_BUFFERS}


def run_server_entry(cr: ColdRun, i: int, label: str) -> list[dict[str, Any]]:
    """The cold rows of index entry ``i`` (a :class:`SupportsServerCold` backend)."""
    checked = checked_entries(cr.spec)[i]
    ds, spec = cr.ds, cr.spec
    cls = get_backend(checked.backend)
    rows: list[dict[str, Any]] = []
    for b, build in enumerate(checked.build_grid):
        bp = checked.build(build)
        with cls.cold_server(Path(cr.work) / f"{label}-{b}") as srv:  # type: ignore[attr-defined]
            idx = srv.index(cls, ds.dim, ds.metric, bp, seed=spec.seed, threads=spec.threads)
            try:
                idx.build(ds.base)
                configs = cr.knob_configs(i, label, idx, bp)
                handle, nbytes = idx.server_handle(), int(idx.memory_bytes())
                for search in configs:
                    row: dict[str, Any] = {"label": label, "backend": checked.backend,
                                           "build": build, "search": search}
                    row.update(_measure(cr, srv, cls, bp, handle, search, nbytes, None))
                    if spec.target_recall is not None:
                        row["budgets"] = [_budget(cr, srv, cls, bp, handle, search, nbytes, f)
                                          for f in BUDGETS]
                    if cr.progress:
                        cr.progress(cr.evaluations, 0,
                                    f"{label} {search}: cold p99 {row['cold_p99_ms']:.2f} ms, "
                                    f"warm p99 {row['warm_p99_ms']:.2f} ms")
                    rows.append(row)
            finally:
                idx.close()  # drops rwb's table (on rwb's own server: the server goes too)
    return rows


__all__ = ["SHARED_BUFFERS", "run_server_entry"]
