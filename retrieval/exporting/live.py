"""Export a live sweep (``rwb export DIR --engine pgvector --out FILE``) and verify it AGAINST THE
LIVE COLLECTION (``rwb verify FILE``).

The file (``kind: live-index-config``) holds the knob in the engine's own names (``settings``:
``{hnsw.ef_search: 81}``) and rwb's (``search``), the collection it was tuned on (``live``: the
spec's section as written, ``${NAME}`` unexpanded, so no secret is in the file), the queries
(absolute paths), ``k``, ``target_recall``, the ground-truth method and budget, and the evidence.

Verify re-attaches (read-only), re-reads the same queries, re-computes their exact top-k (same
method) and re-measures the exported settings on every query, paced by the recorded budget:
HOLDS when the mean recall@k is >= the target, FAILS otherwise, NOT MEASURABLE (exit 3) when
the collection's server is not reachable from here.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval._version import __version__
from retrieval.errors import ConfigError, DataError, NotReachable
from retrieval.exporting.files import FORMAT_VERSION, tidy, write_config
from retrieval.exporting.registry import NothingToExport, register_exporter, register_verifier
from retrieval.live import attachable_engines
from retrieval.runs import RunDir, RunKind
from retrieval.specfile import read_yaml

log = logging.getLogger(__name__)

FILE_KIND = "live-index-config"


#: the engines whose live collections rwb can attach to (their descriptor's ``attach``)
ATTACH_ENGINES: tuple[str, ...] = attachable_engines()


@dataclass(frozen=True)
class ExportedLive:
    path: str
    engine: str
    collection: str
    settings: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_doc(run: RunDir, engine: str) -> dict[str, Any]:
    """The exported document of a live-sweep run (NothingToExport when nothing met the
    target)."""
    s = run.read_json("summary.json")
    spec = read_yaml(run.file("spec.yaml"))
    if s.get("engine") != engine:
        raise ConfigError(f"run '{run.path}' tuned a live {s.get('engine')} collection: export "
                          f"it with --engine {s.get('engine')}; received --engine {engine}")
    chosen = s.get("chosen")
    if not chosen:
        raise NothingToExport(f"run '{run.path}' found no {(s.get('knob') or {}).get('name')} "
                              f"meeting target recall {s.get('target_recall')} on the live "
                              f"collection: nothing to export")
    live = s.get("live") or {}
    desc = live.get("description") or {}
    evidence = {
        "run_id": s.get("run_id"), "recall": chosen.get("recall"),
        "recall_lb": chosen.get("recall_lb"), "n_queries": chosen.get("n_queries"),
        "p50_ms": chosen.get("p50_ms"), "p95_ms": chosen.get("p95_ms"),
        "p99_ms": chosen.get("p99_ms"), "heldout_recall": s.get("heldout_recall"),
        "heldout_meets": s.get("heldout_meets"),
        "not_production_traffic": bool(live.get("not_production_traffic")),
        "collection": {k: desc.get(k) for k in ("name", "dim", "metric", "index_kind",
                                                "build_params", "rows", "segments")},
        "snapshot_fingerprint": (live.get("snapshot") or {}).get("fingerprint"),
        "spent": live.get("spent"), "confidence": s.get("confidence"),
    }
    if live.get("label"):
        evidence["label"] = live["label"]
    return {
        "rwb_export": FORMAT_VERSION, "kind": FILE_KIND, "engine": engine,
        "rwb_version": __version__, "collection": s.get("collection"),
        "settings": dict(chosen.get("native") or {}),
        "search": dict(chosen.get("search") or {}),
        "k": s.get("k"), "target_recall": s.get("target_recall"),
        "live": spec.get("live"), "queries": spec.get("queries"),
        "ground_truth": spec.get("ground_truth") or {"method": "exact"},
        "budget": spec.get("budget") or {}, "seed": spec.get("seed", 0),
        "evidence": tidy(evidence),
    }


@register_exporter(RunKind.LIVE_SWEEP, ATTACH_ENGINES,
                   exports="a live collection's search-time settings",
                   tuned="a live collection's search knob", made_by="rwb sweep LIVE-SPEC",
                   dedicated=False)
def _export(run: RunDir, engine: str, out: Path | str, backend: str | None) -> ExportedLive:
    doc = build_doc(run, engine)
    path = write_config(out, doc)
    return ExportedLive(str(path), engine, str(doc["collection"]), doc["settings"])


@dataclass(frozen=True)
class LiveVerifyReport:
    """``holds``: the exported settings still reach the target on the live collection."""

    path: str
    engine: str
    holds: bool
    measured: dict[str, Any] = field(default_factory=dict)
    recorded: dict[str, Any] = field(default_factory=dict)

    @property
    def checks(self) -> list[dict[str, Any]]:
        return [{"check": f"mean recall@{self.measured.get('k')} on the live collection >= "
                          f"target", "measured": self.measured.get("recall"),
                 "expected": f">= {self.measured.get('target_recall')}",
                 "passed": self.holds}]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "engine": self.engine, "holds": self.holds,
                "measurable": True, "measured": self.measured, "recorded": self.recorded,
                "checks": self.checks}


def _measure(doc: dict[str, Any], where: str) -> dict[str, Any]:
    from retrieval.live import attach
    from retrieval.live.pace import Pacer
    from retrieval.live.queries import load_queries
    from retrieval.live.spec import BudgetSpec, LiveSweepSpec
    from retrieval.live.tune import ground_truth
    from retrieval.stats.metrics import latency_summary, recall_by_id

    spec = LiveSweepSpec.model_validate({
        "live": doc["live"], "queries": doc["queries"], "k": doc["k"],
        "target_recall": doc["target_recall"], "seed": doc.get("seed", 0),
        "budget": doc.get("budget") or {}, "source": where,
        "ground_truth": {k: v for k, v in (doc.get("ground_truth") or {}).items()
                         if k != "dir"}})
    col = attach(spec.live, where)
    try:
        recorded = (doc.get("evidence") or {}).get("collection") or {}
        now = col.describe()
        for key in ("dim", "metric"):
            if recorded.get(key) is not None and recorded[key] != getattr(now, key):
                raise DataError(f"{where}: the live collection's {key} is now {getattr(now, key)}"
                                f" (tuned at {recorded[key]}); re-run rwb sweep on it")
        queries = load_queries(spec.queries, col, seed=spec.seed)
        pacer = Pacer(BudgetSpec.model_validate(spec.budget.model_dump()))
        with tempfile.TemporaryDirectory(prefix="rwb-live-verify-") as tmp:
            truth, snap, _ = ground_truth(spec, col, queries.vectors, pacer, Path(tmp))
        col.set_search_params(**doc["search"])
        res, lat = pacer.run(col.search, queries.vectors, spec.k)
        per_q = recall_by_id(res.ids, truth.ids, spec.k)
        return {"k": spec.k, "target_recall": spec.target_recall,
                "recall": round(float(np.mean(per_q)), 6), "n_queries": int(per_q.size),
                **{k: v for k, v in latency_summary(lat).items()
                   if k in ("p50_ms", "p95_ms", "p99_ms")},
                "rows": now.rows, "live_queries": pacer.queries,
                "wall_s": round(pacer.wall_s, 3),
                "not_production_traffic": queries.not_production,
                "snapshot_fingerprint": (snap or {}).get("fingerprint")}
    finally:
        col.close()


@register_verifier(FILE_KIND)
def _verify(doc: Any, path: Path | str) -> Any:
    from retrieval.exporting.verify import NotMeasurable

    where = str(path)
    data = dict(doc)
    for key in ("live", "queries", "search", "k", "target_recall"):
        if data.get(key) is None:
            raise ConfigError(f"{where}: field '{key}' is missing; is this a file from rwb "
                              f"export of a live sweep?")
    engine = str(data.get("engine"))
    try:
        measured = _measure(data, where)
    except NotReachable as exc:
        return NotMeasurable(where, engine, str(exc))
    holds = measured["recall"] >= float(data["target_recall"]) - 1e-9
    return LiveVerifyReport(where, engine, bool(holds), measured,
                            dict(data.get("evidence") or {}))


__all__ = ["ATTACH_ENGINES", "FILE_KIND", "ExportedLive", "LiveVerifyReport", "build_doc"]
