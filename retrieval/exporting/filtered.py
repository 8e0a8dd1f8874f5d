"""Export the operating-point table of a filtered target sweep in an engine's own names.

One entry per selectivity bucket: the strategy, the engine-native index config of the setting
chosen there (``config``, via :mod:`retrieval.exporting.engines`; none for ``prefilter``, which is
an exact search over the matching rows), the search depth a post-filter fetches, how the filter
travels in that engine (``filter_in_engine``), and the evidence (p95, recall and its lower
bound, held-out recall). A bucket whose chosen setting the engine cannot express names the
reason. The file's ``kind`` is ``ann-filtered``; ``rwb verify`` re-measures each point from its
``source`` params and the sweep spec in ``source.spec``
(:mod:`retrieval.exporting.verify_filtered`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from retrieval._version import __version__
from retrieval.errors import ConfigError, unknown_name_error
from retrieval.exporting.engines import translate
from retrieval.exporting.files import FORMAT_VERSION, full_search, tidy, write_config
from retrieval.exporting.portable import portable, stated_build
from retrieval.exporting.registry import NothingToExport
from retrieval.indexes.engine import all_engines, engine_of_backend
from retrieval.indexes.registry import get_backend
from retrieval.params import validate_params
from retrieval.runs import RunDir

FILE_KIND = "ann-filtered"
#: the top-level and ``evidence`` fields of a filtered export (``rwb verify`` refuses others)
TOP_FIELDS = ("rwb_export", "kind", "engine", "operating_points", "source", "evidence")
EVIDENCE_FIELDS = ("target_recall", "k", "recall_definition", "cheapest_rule",
                   "cliff_selectivity", "buckets", "dataset", "cpu", "run_id", "exported_at",
                   "exported_by")


@dataclass(frozen=True)
class FilteredExported:
    path: Path
    engine: str
    label: str
    backend: str
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


def _entry(op: Mapping[str, Any], engine: str, metric: str, dim: int, k: int) -> dict[str, Any]:
    strategy = op["strategy"]
    doc: dict[str, Any] = {
        "bucket": op["bucket"], "selectivity": op["selectivity"], "strategy": strategy,
        "measured_with": {"backend": op.get("backend"), "label": op.get("label")},
        # the params it was measured with (what `rwb verify` rebuilds and re-measures)
        # the build as the backend takes it again (defaults it refuses when stated left out)
        "source": {"backend": op.get("backend"),
                   "build": stated_build(str(op.get("backend")), op.get("build") or {}),
                   "search": dict(op.get("search") or {}), "overfetch": op.get("overfetch")},
        "evidence": {"p95_ms": op.get("p95_ms"), "qps": op.get("qps"), "recall": op.get("recall"),
                     "recall_lower_bound": op.get("recall_lb"),
                     "heldout_recall": op.get("heldout_recall")},
    }
    if strategy == "prefilter":
        doc.update({"config": None, "search": f"exact search over the rows the filter matches "
                    f"(an attribute index, then brute force), limit {k}"})
        return doc
    name = str(op["backend"])
    search = full_search(name, op["search"])
    own = engine_of_backend(name)
    extras = None
    if own is not None and own.name == engine and own.filter_knobs is not None:
        extras = own.filter_knobs(search, op.get("search") or {})
    try:
        native = translate(engine, portable(name, op["build"], search), metric, dim, k)
    except ConfigError as exc:
        doc.update({"config": None, "note": f"not expressible in {engine}: {exc}"})
        return doc
    entry_extra: dict[str, Any] = {}
    if extras is not None:  # the engine's own filter-only knobs, measured on that engine
        native, entry_extra = extras(native)
    doc["config"] = native
    if strategy == "postfilter":
        doc["search"] = (f"unfiltered search with limit {k * int(op.get('overfetch') or 1)} "
                         f"(over-fetch {op.get('overfetch')}), then keep the first {k} matches")
    else:
        desc = all_engines().get(engine)
        doc["filter_in_engine"] = (desc.filter_form if desc is not None and desc.filter_form
                                   else "the engine's filtered search")
        doc.update(entry_extra)
    return doc


def entry_config(file_op: Mapping[str, Any], engine: str, metric: str, dim: int, k: int
                 ) -> dict[str, Any] | None:
    """The ``config`` the export writes for a point of an exported table, from its ``source``
    params (what `rwb verify` compares the file's ``config`` with)."""
    src = file_op.get("source") or {}
    backend = str(src.get("backend"))
    build = validate_params(get_backend(backend).BuildParams,
                            stated_build(backend, src.get("build") or {}))
    op = {"bucket": file_op.get("bucket"), "selectivity": file_op.get("selectivity"),
          "strategy": file_op.get("strategy"), "backend": backend,
          "build": build.model_dump(mode="json", exclude_none=True),
          "search": src.get("search") or {},
          "overfetch": src.get("overfetch")}
    config: dict[str, Any] | None = tidy(_entry(op, engine, metric, dim, k)).get("config")
    return config


def _points_of(summary: Mapping[str, Any], backend: str | None) -> list[dict[str, Any]]:
    """The run's operating points; with ``backend`` (an index label or backend name), each
    bucket's cheapest setting among that backend's choices (the sweep's own rule)."""
    if backend is None:
        return list(summary.get("operating_points") or [])
    from retrieval.tune.bucket_summary import operating_points

    choices = list(summary.get("choices") or [])
    mine = [c for c in choices if backend in (c.get("label"), c.get("backend"))]
    if not mine:
        names = {str(c.get(k)) for c in choices for k in ("label", "backend") if c.get(k)}
        raise unknown_name_error("backend", backend, names, where="--backend")
    return operating_points(mine)


def _with_data_ref(spec: Mapping[str, Any] | None, ds: Mapping[str, Any]
                   ) -> dict[str, Any] | None:
    """The run's spec with its ``dataset`` as the reference the sweep recorded (absolute paths,
    :func:`retrieval.loaders.catalog.dataset_ref`), so ``rwb verify`` finds the data from any
    folder."""
    if not spec:
        return None
    out = dict(spec)
    if ds.get("ref") is not None:
        out["dataset"] = ds["ref"]
    return out


def export_filtered(run: RunDir, engine: str, out: Path | str, summary: Mapping[str, Any],
                    manifest: Mapping[str, Any], spec: Mapping[str, Any] | None = None,
                    backend: str | None = None) -> FilteredExported:
    """Write the operating-point table of a filtered target sweep; ``spec``: the run's resolved
    sweep spec, kept in ``source.spec`` for `rwb verify`; ``backend``: only that index label's
    (or backend's) settings."""
    ops = [o for o in _points_of(summary, backend) if o.get("strategy")]
    if not ops:
        of = f" of backend '{backend}'" if backend else ""
        raise NothingToExport(f"run '{run.path}': no bucket has a setting{of} meeting target "
                              f"recall {summary.get('target_recall')}")
    dim = int((manifest.get("dataset") or {}).get("dim") or 0)
    metric, k = str(summary.get("metric")), int(summary.get("k") or 0)
    table = [_entry(o, engine, metric, dim, k) for o in ops]
    ds = manifest.get("dataset") or {}
    doc = {
        "rwb_export": FORMAT_VERSION, "kind": FILE_KIND, "engine": engine,
        "operating_points": tidy(table),
        "source": {"spec": _with_data_ref(spec, ds), "run": str(run.path)},
        "evidence": tidy({
            "target_recall": summary.get("target_recall"), "k": k,
            "recall_definition": summary.get("recall_definition"),
            "cheapest_rule": summary.get("cheapest_rule"),
            "cliff_selectivity": summary.get("cliff_selectivity"),
            "buckets": (summary.get("filters") or {}).get("buckets"),
            "dataset": {key: ds.get(key) for key in ("name", "fingerprint", "n_base", "dim",
                                                     "metric")},
            "cpu": manifest.get("cpu"), "run_id": summary.get("run_id"),
            "exported_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "exported_by": f"rwb {__version__}",
        }),
    }
    path = write_config(out, doc)
    first = next((t for t in table if t.get("config")), table[0])
    return FilteredExported(path, engine, "operating points",
                    str(first["measured_with"]["backend"]), first.get("config") or {})
