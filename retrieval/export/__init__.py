"""Export a tuned run as an engine-native config file with its evidence, and verify such a file.

Dispatch is by the run's kind (``summary.json`` ``kind``, else ``manifest.json`` ``kind``):
``sweep`` runs (ANN indexes) go to :mod:`retrieval.export.ann` / :mod:`retrieval.export.verify`;
semantic-cache threshold runs (``cache-tune``) go to the redisvl exporter; rerank-depth runs
(``rerank-sweep``, from ``rwb tune rerank``) go to :mod:`retrieval.export.rerank`
(``--engine rerank``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError, unknown_name_error
from retrieval.export.ann import Exported, NothingToExport, export_sweep
from retrieval.export.engines import ENGINES
from retrieval.export.files import read_config
from retrieval.export.verify import VerifyReport, verify_ann
from retrieval.store import RunDir

#: the module that exports/verifies semantic-cache thresholds for redisvl
REDISVL_MODULE = "retrieval.export.redisvl"
CACHE_KINDS = ("cache-tune",)
RERANK_KINDS = ("rerank-sweep",)


def run_kind(run: RunDir) -> str:
    """``sweep``, ``cache-tune``, ``eval``, ...: what kind of run a directory holds."""
    for name in ("summary.json", "manifest.json"):
        if run.file(name).exists():
            kind = run.read_json(name).get("kind")
            if kind:
                return str(kind)
    return "eval"


def _redisvl() -> Any:
    try:
        return importlib.import_module(REDISVL_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != REDISVL_MODULE:
            raise
        raise ConfigError(
            f"the redisvl exporter ({REDISVL_MODULE}) is not installed in this build of rwb"
        ) from None


def check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise unknown_name_error("engine", engine, ENGINES, where="--engine")
    return engine


def export_run(
    run_path: Path | str, engine: str, out: Path | str, *, backend: str | None = None
) -> Any:
    """Export the tuned config of ``run_path`` for ``engine`` into ``out``."""
    check_engine(engine)
    run = RunDir.open(run_path)
    kind = run_kind(run)
    if kind in CACHE_KINDS or engine == "redisvl":
        if kind not in CACHE_KINDS:
            raise ConfigError(
                f"--engine redisvl exports a semantic-cache threshold (a run of rwb tune cache); "
                f"run '{run.path}' is a '{kind}' run"
            )
        if engine != "redisvl":
            raise ConfigError(
                f"run '{run.path}' tuned a semantic-cache threshold: export it with "
                f"--engine redisvl; received --engine {engine}"
            )
        return _redisvl().export_run(run.path, out)
    if kind in RERANK_KINDS or engine == "rerank":
        from retrieval.export.rerank import export_rerank

        if kind not in RERANK_KINDS:
            raise ConfigError(
                f"--engine rerank exports a tuned rerank depth (a run of rwb tune rerank); "
                f"run '{run.path}' is a '{kind}' run"
            )
        if engine != "rerank":
            raise ConfigError(
                f"run '{run.path}' tuned a rerank depth: export it with --engine rerank; "
                f"received --engine {engine}"
            )
        return export_rerank(run, out)
    if kind != "sweep":
        raise NothingToExport(
            f"run '{run.path}' is an rwb '{kind}' run: it has no tuned config; tune it with "
            f"rwb sweep SPEC --target-recall R"
        )
    return export_sweep(run, engine, out, backend)


def verify_file(path: Path | str) -> Any:
    """Rebuild and re-measure an exported config; returns a report with ``holds``."""
    doc = read_config(path)
    if doc.get("engine") == "redisvl" or doc.get("kind") in CACHE_KINDS:
        return _redisvl().verify_file(path)
    if doc.get("engine") == "rerank" or doc.get("kind") == "rerank-depth":
        from retrieval.export.rerank import verify_rerank

        return verify_rerank(path)
    if doc.get("kind") != "ann-index":
        raise ConfigError(
            f"{path}: not an rwb export (field 'kind' must be 'ann-index'; received "
            f"{doc.get('kind')!r})"
        )
    return verify_ann(doc, path)


__all__ = [
    "ENGINES",
    "Exported",
    "NothingToExport",
    "VerifyReport",
    "check_engine",
    "export_run",
    "run_kind",
    "verify_file",
]
