"""The run directory ``runs/<id>/``: created under the out-dir guards, written atomically (never
through links, through the redaction policy), marked running / complete / failed."""

from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from retrieval import phases
from retrieval.errors import ConfigError, DataError
from retrieval.redact import mask
from retrieval.runs.kinds import RunSummary, S
from retrieval.runs.provenance import build_manifest, thread_info
from retrieval.runs.tables import flatten, json_default, typed_frame

log = logging.getLogger(__name__)


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


#: the marker file inside a scratch folder rwb made (only such a folder is ever removed)
SCRATCH_MARK = ".rwb-scratch"

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


def check_utf8_path(path: Path | str, what: str = "--out") -> None:
    """Refuse a path that is not valid UTF-8 (a byte name the file system allowed): rwb
    records paths in UTF-8 JSON / YAML, so such a run could not be written. One line, exit 2."""
    full = os.fspath(Path(path).absolute())
    try:
        full.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{what} {os.fspath(path)!a} is not valid UTF-8 (rwb records paths in UTF-8 "
            f"JSON and YAML): choose a name in UTF-8 (the folder it is in too)"
        ) from None


def check_out_dir(
    out: Path | str | None, *, force: bool = False,
    resumable: Callable[[Path], bool] | None = None,
) -> None:
    """Refuse ``--out`` when it names a non-empty folder (or a file), unless ``force`` is set
    or ``resumable(path)`` says it holds the very run being resumed. One line, exit 2."""
    if not out:
        return
    path = Path(out)
    check_utf8_path(path)
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
    check_utf8_path(path)
    if path.is_symlink():
        raise ConfigError(f"--out '{path}' is a symbolic link; rwb never writes through links")
    if path.is_file() and not force and not ours(path):
        raise ConfigError(
            f"--out '{path}' exists and was not written by rwb; rwb does not overwrite it: "
            f"choose another file, or pass --force (force=True in the Python API) to replace it"
        )


def _record_load(manifest: dict[str, Any], path: Path, *, warn: bool = True) -> None:
    """Add the machine's load at the end to ``manifest['machine_load']`` with ``busy`` (the
    1-minute load average above the CPUs at the start or the end of the timed work), and, when
    busy and ``warn`` (a run that completed: its latencies are what a user reads), say so in
    one WARNING log line."""
    from retrieval.runs.provenance import busy, machine_load, steal_between

    record = manifest.get("machine_load")
    record = dict(record) if isinstance(record, dict) else {}
    record["end"] = machine_load()
    record["busy"] = any(busy(v) for v in record.values() if isinstance(v, dict))
    start = record.get("start")
    record["steal_during_run"] = (steal_between(start, record["end"])
                                  if isinstance(start, dict) else None)
    manifest["machine_load"] = record
    if record["busy"] and warn:
        worst = max(float((v.get("load_average") or [0])[0]) for v in record.values()
                    if isinstance(v, dict))
        log.warning("run %s: the machine was busy while it was timed (load average %s on %s "
                    "CPUs; manifest.json machine_load.busy): its latencies may be inflated; "
                    "re-run on a quiet machine to compare them", path, worst,
                    record["end"].get("cpus"))


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
    #: ``path``: the scratch folder :meth:`work_dir` chose (and marked) for this run
    _scratch: dict[str, Path] = field(default_factory=dict, compare=False, repr=False)

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
        phases.reset()  # the manifest's time per phase counts from here
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
        """The run's scratch folder for index files (removed at the end): ``<run>/work``,
        created by this call with rwb's marker file inside (:data:`SCRATCH_MARK`). A ``work``
        folder rwb did not make (no marker: the user's), or a file of that name, is never used
        nor removed: the scratch is then a fresh ``<run>/.rwb-work-<hex>``. A symbolic link is
        refused."""
        held = self._scratch.get("path")
        if held is not None:
            return held
        work = self.file("work")
        if work.is_symlink():
            raise ConfigError(
                f"'{work}' is a symbolic link; rwb never writes through links (remove it)"
            )
        if work.exists() and not (work.is_dir() and (work / SCRATCH_MARK).is_file()):
            log.info("%s is not rwb's (no %s inside): kept; index files go to a folder of "
                     "rwb's own", work, SCRATCH_MARK)
            work = Path(tempfile.mkdtemp(dir=self.path, prefix=".rwb-work-"))
        try:
            work.mkdir(exist_ok=True)
            (work / SCRATCH_MARK).write_text(f"rwb scratch of run {self.run_id}\n",
                                            encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"scratch folder '{work}' is not writable ({exc.strerror or exc})"
            ) from None
        self._scratch["path"] = work
        return work

    def remove_work(self) -> None:
        """Remove the scratch folder (index files, e.g. a Milvus Lite db) only when it carries
        rwb's marker (:meth:`work_dir`); a folder the user had is left as it was."""
        work = self._scratch.get("path", self.file("work"))
        if work.is_symlink() or not work.is_dir():
            return
        if (work / SCRATCH_MARK).is_file():
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
            _record_load(manifest, self.path, warn=status == COMPLETE)
            # time per phase (fingerprint, ground truth, builds, searches) and resident peak
            manifest["resources"] = phases.snapshot()
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
