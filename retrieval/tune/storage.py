"""Optuna storages by URL, and studies bound to exactly one resolved sweep spec.

``--storage`` accepts:

- ``sqlite:///PATH`` (the default is ``sqlite:///<run dir>/study.db``), ``postgresql://...``,
  ``mysql://...`` (any SQLAlchemy URL of those dialects): :class:`optuna.storages.RDBStorage`;
- ``journal:PATH`` or a ``PATH`` ending in ``.log``: a journal file
  (:class:`optuna.storages.journal.JournalFileBackend`), good on shared file systems;
- ``redis://...``: a journal in Redis.

All of them open in optuna-dashboard. A study remembers the spec it was made from (resolved
spec JSON + its hash + the dataset fingerprint, in study user attrs); joining or resuming it
with a different spec is refused, naming the first field that differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from retrieval._version import __version__
from retrieval.errors import BackendError, ConfigError
from retrieval.redact import mask, redact_error, redact_uri
from retrieval.tune.config import RESUMABLE_FIELDS

log = logging.getLogger(__name__)

RDB_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "oracle", "mssql")
ALLOWED = "sqlite:///PATH, postgresql://..., mysql://..., redis://..., journal:PATH or PATH.log"
SPEC_ATTR = "rwb:spec"
HASH_ATTR = "rwb:spec_hash"
SQLITE_TIMEOUT_S = 120


@dataclass(frozen=True)
class OpenedStorage:
    """An opened Optuna storage and how to name it safely (credentials removed)."""

    storage: Any
    display: str
    kind: str  # "rdb" | "journal-file" | "journal-redis"


#: Optuna's SQL schema holds a study name in VARCHAR(512) (PostgreSQL and MySQL refuse a longer
#: one at the commit, with a misleading message; SQLite does not check)
STUDY_NAME_MAX = 512


def check_study_name(name: str, storage: str | None) -> None:
    """ConfigError (one line) for a study name an SQL storage (``storage``, None: the run's
    own SQLite) cannot hold; checked before the run folder is created."""
    if storage is not None and _scheme(storage) not in RDB_SCHEMES:
        return
    if len(name) > STUDY_NAME_MAX:
        shown = name if len(name) <= 40 else name[:37] + "..."
        raise ConfigError(f"--study: a study name in an SQL storage holds at most "
                          f"{STUDY_NAME_MAX} characters (Optuna's schema); received "
                          f"{len(name)} characters ({shown!r})")
class StorageLost(BackendError):
    """The study's storage stopped answering mid-sweep (its server died or became unreachable):
    every trial finished before is kept in it; the sweep resumes once it answers again.
    ``run_path``: the run directory to resume into."""

    def __init__(self, message: str, run_path: Path | None = None) -> None:
        super().__init__(message)
        self.run_path = run_path


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _connection_error(e: BaseException) -> bool:
    """A lost connection, by the client library's own exception types (imported only when the
    library is: a storage that never used it cannot have raised it)."""
    import sys

    checks = []
    if "sqlalchemy" in sys.modules:
        import sqlalchemy.exc as sa

        checks.append(isinstance(e, sa.OperationalError | sa.InterfaceError)
                      or (isinstance(e, sa.DBAPIError) and bool(e.connection_invalidated)))
    if "psycopg" in sys.modules:
        import psycopg

        checks.append(isinstance(e, psycopg.OperationalError | psycopg.InterfaceError))
    if "redis" in sys.modules:
        import redis.exceptions as rx

        checks.append(isinstance(e, rx.ConnectionError | rx.TimeoutError))
    return any(checks) or isinstance(e, ConnectionError)


def storage_failure(exc: BaseException) -> BaseException | None:
    """The connection error behind ``exc`` when ``exc`` is a storage that stopped answering
    (optuna wraps it as a StorageInternalError, "e.g. exceeding max length"), else None. Only
    an error raised inside Optuna's storage code counts (a pgvector or Redis index backend that
    lost its server is that backend's failure, not the study's)."""
    chain = list(_chain(exc))
    if not any(_in_optuna_storage(e) for e in chain):
        return None
    return next((e for e in chain if _connection_error(e)), None)


def _in_optuna_storage(e: BaseException) -> bool:
    tb = e.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if "/optuna/storages/" in path:
            return True
        tb = tb.tb_next
    return False


def storage_lost(display: str, cause: BaseException, run_path: Path | None) -> StorageLost:
    """One line: which storage (credentials removed) stopped answering, why (the driver's
    first line), and that the trials finished before are kept."""
    why = redact_uri(str(cause).strip().splitlines()[0] if str(cause).strip() else "")
    why = f"{type(cause).__name__}: {why}" if why else type(cause).__name__
    if len(why) > 200:
        why = why[:197] + "..."
    if _scheme(display) in ("redis", "rediss", "unix"):
        # a Redis keeps what it held only if it persists (RDB / AOF): rwb's own
        # (`rwb services start`, tests) runs with --save '' --appendonly no and restarts empty
        kept = ("the trials finished before are kept only if that Redis persists its data "
                "(RDB or AOF; the Redis `rwb services start` runs does not: restarted, it is "
                "empty and the sweep starts over)")
    else:
        kept = ("every trial finished before is kept there (the one in flight is failed when "
                "the sweep resumes)")
    return StorageLost(f"--storage '{display}' stopped answering mid-sweep ({why}); {kept}",
                       run_path)


def default_url(run_dir: Path) -> str:
    return f"sqlite:///{(run_dir / 'study.db').resolve()}"


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""


def _check_journal_file(path: Path, display: str) -> None:
    """ConfigError (one line) when ``path`` exists and is not an Optuna journal (its first line
    a JSON record with ``op_code``): rwb never appends to a file it did not create. An empty
    file is taken (nothing in it is lost)."""
    if path.is_symlink():
        raise ConfigError(f"--storage '{display}': '{path}' is a symbolic link; rwb never "
                          f"writes through links")
    if not path.exists():
        return
    if not path.is_file():
        raise ConfigError(f"--storage '{display}': '{path}' exists and is not a file")
    try:
        with open(path, "rb") as fh:
            first = fh.readline(65536)
    except OSError as exc:
        raise ConfigError(f"--storage '{display}': '{path}' cannot be read "
                          f"({exc.strerror or exc})") from None
    if not first.strip():
        return
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if not (isinstance(record, dict) and "op_code" in record):
        raise ConfigError(
            f"--storage '{display}': '{path}' exists and is not an Optuna journal (rwb did not "
            f"create it); rwb never appends to it: name a new .log file")


def open_storage(url: str) -> OpenedStorage:
    """Open ``url`` (see module doc); a ConfigError names the redacted URL when it cannot be
    opened. Nothing is created in the storage here except its empty schema."""
    import optuna

    display = redact_uri(url)
    scheme = _scheme(url)
    try:
        if url.startswith("journal:") or (not scheme and url.endswith(".log")):
            path = Path(url.removeprefix("journal:")).expanduser()
            if not path.parent.is_dir():
                raise FileNotFoundError(f"folder '{path.parent}' does not exist")
            _check_journal_file(path, display)
            from optuna.storages.journal import JournalFileBackend

            backend = JournalFileBackend(str(path))
            return OpenedStorage(optuna.storages.JournalStorage(backend), display, "journal-file")
        if scheme == "redis":
            from optuna.storages.journal import JournalRedisBackend

            with warnings.catch_warnings():  # "experimental": noise before any error line
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                rbackend = JournalRedisBackend(url)
            storage = optuna.storages.JournalStorage(rbackend)
            storage.get_all_studies()  # connect now, not at the first trial
            return OpenedStorage(storage, display, "journal-redis")
        if scheme in RDB_SCHEMES:
            kwargs: dict[str, Any] = {}
            if scheme == "sqlite":
                db_path = _check_sqlite_path(url)
                kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
                with _locked(db_path):  # one process at a time creates the schema
                    rdb = _rdb(url, kwargs)
                _fast_sqlite(rdb)
            else:
                rdb = _rdb(url, {"pool_pre_ping": True})
            return OpenedStorage(rdb, display, "rdb")
    except ConfigError:
        raise
    except ImportError as exc:  # optuna re-raises the driver's ModuleNotFoundError as this
        raise ConfigError(_driver_hint(display, scheme, url, exc)) from None
    except Exception as exc:  # any driver/IO failure: name the storage, hide credentials
        reason = redact_error(exc, url)  # also a piece of the password a client echoes
        raise ConfigError(f"--storage '{display}': cannot be opened ({reason})") from None
    raise ConfigError(f"--storage: unknown storage '{display}'; allowed: {ALLOWED}")


STORAGE_EXTRA = "pip install 'retrieval-workbench[storage]'"


def _driver_hint(display: str, scheme: str, url: str, exc: ImportError) -> str:
    """One line for a missing database driver: which module, and rwb's install hint (the
    ``storage`` extra: psycopg2-binary for ``postgresql+psycopg2://``, pymysql for
    ``mysql+pymysql://``; plain ``mysql://`` needs mysqlclient and plain ``postgresql://``
    psycopg 3 under SQLAlchemy 2.1, which the extra does not hold)."""
    cause: BaseException | None = exc
    missing = None
    while cause is not None and missing is None:
        missing = getattr(cause, "name", None)
        cause = cause.__cause__ or cause.__context__
    what = f"module '{missing}' is missing" if missing else "it is not installed"
    hint = f"install rwb's storage drivers: {STORAGE_EXTRA}"
    dialect = url.split("://", 1)[0].lower()
    if "+" not in dialect and scheme in ("mysql", "mariadb"):
        hint += (f", and write the URL as {scheme}+pymysql://... (plain {scheme}:// needs "
                 f"mysqlclient)")
    elif "+" not in dialect and scheme in ("postgresql", "postgres"):
        hint += (f", and write the URL as postgresql+psycopg2://... (plain {scheme}:// needs "
                 f"psycopg 3 with SQLAlchemy 2.1)")
    return f"--storage '{display}': its database driver is not installed ({what}); {hint}"


def _rdb(url: str, kwargs: dict[str, Any], attempts: int = 5) -> Any:
    """RDBStorage, retried when another worker is creating the schema at the same moment
    (``table ... already exists`` / ``database is locked``)."""
    import optuna

    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except Exception as exc:
            text = str(exc)
            racing = any(m in text for m in ("already exists", "database is locked",
                                             "alembic_version", "Duplicate"))
            if not racing or attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _fast_sqlite(rdb: Any) -> None:
    """WAL journal + synchronous=NORMAL: a commit no longer waits for an fsync (a process that
    is killed loses nothing committed; a power cut may lose the last commits, never the file),
    and readers do not block the writer. Several processes on one host share it safely."""
    import sqlalchemy

    def pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    sqlalchemy.event.listen(rdb.engine, "connect", pragmas)
    rdb.engine.dispose()  # reconnect so that every pooled connection has them


def _check_sqlite_path(url: str) -> Path | None:
    path = url.split(":///", 1)[1] if ":///" in url else ""
    if not path or path == ":memory:":
        return None
    p = Path(path).expanduser()
    if not p.parent.is_dir():
        raise FileNotFoundError(f"folder '{p.parent}' does not exist")
    return p


@contextlib.contextmanager
def _locked(path: Path | None) -> Iterator[None]:
    """An exclusive lock on ``<db>.lock`` (same host; SQLite is single-host anyway)."""
    if path is None:
        yield
        return
    from filelock import FileLock

    with FileLock(f"{path}.lock"):
        yield


# --- spec identity ------------------------------------------------------------------------------
def spec_document(resolved_spec: Mapping[str, Any], fingerprint: str) -> dict[str, Any]:
    """What a study is bound to: the resolved spec (minus resumable fields) + data fingerprint.
    Stored in the study's user attrs, so credentials are masked (:func:`retrieval.redact.mask`,
    without environment values: the document, and so its hash, must not depend on them)."""
    doc = mask(json.loads(json.dumps(dict(resolved_spec), default=str)), secrets=[])
    for dotted in RESUMABLE_FIELDS:
        node = doc
        *parents, last = dotted.split(".")
        for p in parents:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(last, None)
    doc["dataset_fingerprint"] = fingerprint
    return doc


def spec_hash(doc: Mapping[str, Any]) -> str:
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first dotted path where ``a`` and ``b`` differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return sub, a.get(key, "<absent>"), b.get(key, "<absent>")
            found = first_difference(a[key], b[key], sub)
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else (path or "<root>", a, b)


def _short(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def open_study(
    opened: OpenedStorage,
    name: str,
    doc: Mapping[str, Any],
    *,
    direction: Literal["minimize", "maximize"],
    sampler: Any,
    wait_s: float = 30.0,
) -> tuple[Any, bool]:
    """Create study ``name`` bound to ``doc``, or load it and check it was made from the same
    spec. Returns ``(study, created)``. Refuses (ConfigError) a study made from another spec or
    by something other than rwb; a failed creation leaves no study behind."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    digest = spec_hash(doc)
    try:
        study = optuna.create_study(
            storage=opened.storage, study_name=name, direction=direction, sampler=sampler
        )
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(storage=opened.storage, study_name=name, sampler=sampler)
        _check_same_spec(study, name, opened.display, doc, digest, wait_s)
        return study, False
    try:
        study.set_user_attr(SPEC_ATTR, dict(doc))
        study.set_user_attr("rwb:rwb_version", __version__)
        study.set_user_attr(HASH_ATTR, digest)  # last: its presence means "ready"
    except Exception:
        optuna.delete_study(study_name=name, storage=opened.storage)
        raise
    return study, True


def _check_same_spec(
    study: Any, name: str, display: str, doc: Mapping[str, Any], digest: str, wait_s: float
) -> None:
    deadline = time.monotonic() + wait_s
    attrs = study.user_attrs
    while HASH_ATTR not in attrs and time.monotonic() < deadline:
        time.sleep(0.2)  # the creator may be writing the attrs right now
        attrs = study.user_attrs
    if HASH_ATTR not in attrs:
        raise ConfigError(
            f"--study '{name}' in storage '{display}' was not made by rwb sweep (no spec "
            f"recorded); choose another --study name"
        )
    if attrs[HASH_ATTR] == digest:
        return
    diff = first_difference(attrs.get(SPEC_ATTR, {}), dict(doc))
    where, old, new = diff if diff else ("<spec>", attrs[HASH_ATTR], digest)
    raise ConfigError(
        f"--study '{name}' in storage '{display}' was made from a different spec: field "
        f"'{where}' is {_short(old)} there and {_short(new)} here; resume with the same spec "
        f"(only tune.n_trials may change) or use another --study name"
    )
