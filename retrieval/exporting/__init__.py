"""Export a tuned run as an engine-native config file with its evidence, and verify such a file.

Exporters are registered by (run kind, engine) and verifiers by the exported file's ``kind``
(:mod:`retrieval.exporting.registry`): ``sweep`` runs (ANN indexes) go to
:mod:`retrieval.exporting.ann` / :mod:`retrieval.exporting.verify`; semantic-cache threshold runs
(``cache-tune``) to :mod:`retrieval.exporting.redisvl` (``--engine redisvl``); rerank-depth runs
(``rerank-sweep``, from ``rwb tune rerank``) to :mod:`retrieval.exporting.rerank`
(``--engine rerank``). The run's kind is ``summary.json`` ``kind``, else ``manifest.json``
``kind``, else ``eval``; an unfinished or failed run is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError, DataError, unknown_name_error
from retrieval.exporting.ann import Exported
from retrieval.exporting.files import read_config
from retrieval.exporting.registry import (
    ChecksReport,
    ExportResult,
    NothingToExport,
    VerifyResult,
    engines,
    exporter_for,
    verifier_for,
)
from retrieval.exporting.verify import VerifyReport
from retrieval.runs import FAILED, RUNNING, RunDir, RunKind
from retrieval.tune.summary import EvalSummary


def run_kind(run: RunDir) -> str:
    """``sweep``, ``cache-tune``, ``eval``, ...: what kind of run a directory holds (a
    :class:`~retrieval.runs.RunKind` value, or whatever other kind the run names). A run
    whose manifest says it is still running (or was killed) or failed, or that names no kind
    and has no summary.json, is refused (DataError, one line): it is not a finished run."""
    manifest = run.read_json("manifest.json") if run.file("manifest.json").exists() else {}
    manifest = manifest if isinstance(manifest, dict) else {}
    status = manifest.get("status")
    what = f"rwb {manifest.get('kind') or 'run'}"
    if status == FAILED:
        reason = manifest.get("error") or "no reason recorded"
        raise DataError(f"run '{run.path}' failed ({reason}); nothing to export: the {what} "
                        f"did not finish")
    summary = run.file("summary.json").exists()
    if status == RUNNING or not (summary or manifest.get("kind")):
        has = "a summary.json" if summary else "no summary.json"
        raise DataError(
            f"run '{run.path}' is incomplete (manifest status {status or 'absent'}, {has}): "
            f"the {what} was killed or is still running; nothing to export (resume or re-run it)"
        )
    for name in ("summary.json", "manifest.json"):
        if run.file(name).exists():
            kind = run.read_json(name).get("kind")
            if kind:
                return RunKind.parse(kind) or str(kind)
    return EvalSummary.KIND  # an eval summary names no kind


def check_engine(engine: str) -> str:
    known = engines()
    if engine not in known:
        raise unknown_name_error("engine", engine, known, where="--engine")
    return engine


def export_run(
    run_path: Path | str, engine: str, out: Path | str, *, backend: str | None = None
) -> ExportResult:
    """Export the tuned config of ``run_path`` for ``engine`` into ``out``."""
    check_engine(engine)
    run = RunDir.open(run_path)
    return exporter_for(run, run_kind(run), engine).export(run, engine, out, backend)


def _cache_kind() -> str:
    from retrieval.exporting.redisvl import KIND

    return KIND


def _rerank_kind() -> str:
    from retrieval.exporting.rerank import KIND

    return KIND


def verify_file(path: Path | str, *, engine: str | None = None,
                dataset: Any = None, reranker: Any = None) -> VerifyResult:
    """Rebuild and re-measure an exported config; returns a report with ``holds``.
    ``engine``: measure an ANN export's settings on that engine instead (does the target
    transfer?). ``dataset``: an ANN export's data when its recorded reference is not reachable
    (a VectorDataset, or a dataset name / manifest / HDF5 path; the fingerprint must match), a
    rerank export's BEIR folder, or a cache export's pairs file."""
    doc = read_config(path)
    if reranker is not None:  # a rerank export's callable, given by the Python API
        from retrieval.exporting.rerank import KIND as RERANK_KIND
        from retrieval.exporting.rerank import verify_rerank

        if doc.get("kind") != RERANK_KIND:
            raise ConfigError(f"{path}: reranker= applies to rerank exports (kind "
                              f"'{RERANK_KIND}'); received kind {doc.get('kind')!r}")
        return verify_rerank(path, reranker=reranker)
    if dataset is not None and doc.get("kind") == _rerank_kind():
        from retrieval.exporting.rerank import verify_rerank

        return verify_rerank(path, dataset=dataset)  # a BEIR folder moved or on a CI runner
    if dataset is not None and doc.get("kind") == _cache_kind():
        from retrieval.exporting.redisvl import verify_file as verify_cache

        return verify_cache(path, dataset=dataset)  # a pairs file moved or on a CI runner
    if dataset is not None:
        from retrieval.exporting.verify import FILE_KIND, verify_ann

        if doc.get("kind") != FILE_KIND:
            raise ConfigError(f"{path}: --dataset applies to ANN index exports (kind "
                              f"'{FILE_KIND}'); received kind {doc.get('kind')!r}")
        if engine is not None:
            check_engine(engine)
        return verify_ann(doc, path, engine=engine, dataset=dataset)
    if engine is not None:
        from retrieval.exporting.verify import FILE_KIND, verify_ann

        check_engine(engine)
        if doc.get("kind") != FILE_KIND:
            raise ConfigError(f"{path}: --engine applies to ANN index exports (kind "
                              f"'{FILE_KIND}'); received kind {doc.get('kind')!r}")
        return verify_ann(doc, path, engine=engine)
    return verifier_for(doc).verify(doc, path)


__all__ = [
    "ChecksReport",
    "ExportResult",
    "Exported",
    "NothingToExport",
    "VerifyReport",
    "VerifyResult",
    "check_engine",
    "engines",
    "export_run",
    "run_kind",
    "verify_file",
]
