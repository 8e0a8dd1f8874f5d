"""Reading and writing exported config files (YAML by default, JSON for ``.json``); everything
written passes through :func:`retrieval.redact.scrub` so that no secret reaches the file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.registry import get_backend
from retrieval.params import validate_params
from retrieval.redact import scrub
from retrieval.runs import write_atomic, written_by_rwb
from retrieval.specfile import parse_yaml, read_text

FORMAT_VERSION = 1


def tidy(obj: Any) -> Any:
    """Floats to 6 significant digits (the measurement is not more precise than that), in
    nested dicts and lists; every exported config and evidence (plain and filtered) passes
    through it."""
    if isinstance(obj, float):
        return float(f"{obj:.6g}")
    if isinstance(obj, dict):
        return {k: tidy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [tidy(v) for v in obj]
    return obj


#: the evidence figures `rwb verify` cannot re-measure exactly (machine-dependent timings,
#: the build's bytes): the export seals them with :func:`recorded_digest`
RECORDED_FIGURES = ("latency_ms", "qps", "build_s", "memory_bytes")


def recorded_digest(evidence: Mapping[str, Any]) -> str:
    """sha256 (16 hex) of the :data:`RECORDED_FIGURES` of a tidied ``evidence``: `rwb verify`
    recomputes it, so a figure edited after the export fails the check (no secret: a seal
    against hand edits, not against a forger)."""
    import hashlib

    body = json.dumps({f: evidence.get(f) for f in RECORDED_FIGURES}, sort_keys=True,
                      default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def full_search(backend: str, search: Mapping[str, Any]) -> dict[str, Any]:
    """``search`` as ``backend`` validates it, every default filled in (JSON values)."""
    cls = get_backend(backend)
    return validate_params(cls.SearchParams, search).model_dump(mode="json", exclude_none=True)


def write_config(path: Path | str, doc: dict[str, Any]) -> Path:
    """Write ``doc`` (scrubbed) atomically; the format follows the suffix."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out '{p}': folder cannot be created ({exc.strerror})") from None
    clean = scrub(doc)
    if p.suffix.lower() == ".json":
        text = json.dumps(clean, indent=2) + "\n"
    else:
        text = yaml.safe_dump(clean, sort_keys=False, allow_unicode=True)
    try:
        write_atomic(p, text)  # never through a link
    except OSError as exc:
        raise ConfigError(f"--out '{p}': cannot be written ({exc.strerror})") from None
    return p


def read_config(path: Path | str) -> dict[str, Any]:
    """Read an exported file (through the shared reader for YAML); errors name the file."""
    p = Path(path)
    text = read_text(p, what="config file")
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}: not valid JSON ({str(exc).splitlines()[0]})") from None
    else:
        data = parse_yaml(text, str(p))
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: an exported config must be a mapping; received "
                          f"{type(data).__name__}")
    return data


_MISSING: Any = object()
_ALLOWED = {"number": "a number", "integer": "an integer", "mapping": "a mapping",
            "string": "a string", "list": "a list"}


def field_of(
    doc: Mapping[str, Any], dotted: str, where: str, kind: Literal[
        "number", "integer", "mapping", "string", "list"], *, default: Any = _MISSING,
    ge: float | None = None, le: float | None = None, gt: float | None = None,
) -> Any:
    """The value at ``dotted`` (``evidence.confidence.level``) of an exported file, checked to be
    of ``kind`` (and in range); a missing value is ``default`` or a ConfigError, a wrong one a
    ConfigError naming the file, the field, what is allowed and what was received."""
    value: Any = doc
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            raise param_error(dotted.rsplit(".", 1)[0], "a mapping", value, where=where)
        value = value.get(part)
        if value is None:
            if default is _MISSING:
                raise ConfigError(f"{where}: field '{dotted}' is missing; is this a file from "
                                  f"rwb export?")
            return default
    ok = {
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "mapping": isinstance(value, Mapping),
        "string": isinstance(value, str),
        "list": isinstance(value, list),
    }[kind]
    if not ok:
        raise param_error(dotted, _ALLOWED[kind], value, where=where)
    if kind in ("number", "integer"):
        for bound, test, text in ((ge, lambda b: value >= b, ">="), (gt, lambda b: value > b, ">"),
                                  (le, lambda b: value <= b, "<=")):
            if bound is not None and not test(bound):
                raise param_error(dotted, f"{_ALLOWED[kind]} {text} {bound:g}", value,
                                  where=where)
    return value


#: a run directory's own records: an export never replaces one without --force
RUN_RECORDS = ("manifest.json", "summary.json", "spec.yaml")
_EXPORT_MARKS = written_by_rwb("rwb_export", "rwb_version", "kind: cache-tune",
                               "kind: rerank-depth", '"kind": "cache-tune"',
                               '"kind": "rerank-depth"')


def is_rwb_export(path: Path) -> bool:
    """Whether ``path`` is an earlier rwb export (which ``rwb export --out`` may replace); a run
    directory's own record (manifest.json, ...) never is."""
    if path.name in RUN_RECORDS and (path.parent / "manifest.json").is_file():
        return False
    return _EXPORT_MARKS(path)


def check_layout(doc: Mapping[str, Any], where: str, kind: str, top: tuple[str, ...],
                 evidence: tuple[str, ...]) -> None:
    """Refuse (ConfigError, one line naming the field) an export of ``kind`` whose format
    version is not this rwb's (``rwb_export``), or that has a top-level or ``evidence`` field
    its exporter never writes: an edit verify would otherwise ignore."""
    version = doc.get("rwb_export")
    if version is None:
        raise ConfigError(f"{where}: field 'rwb_export' is missing; is this a file from rwb "
                          f"export?")
    if isinstance(version, bool) or version != FORMAT_VERSION:
        raise param_error("rwb_export", f"{FORMAT_VERSION} (the export format this rwb "
                          f"reads)", version, where=where)
    for prefix, allowed, values in (("", top, doc), ("evidence.", evidence,
                                                      doc.get("evidence") or {})):
        if not isinstance(values, Mapping):
            continue
        unknown = sorted(str(k) for k in values if k not in allowed)
        if unknown:
            raise ConfigError(
                f"{where}: unknown field '{prefix}{unknown[0]}' (an {kind} export has "
                f"{'evidence fields' if prefix else 'fields'}: {', '.join(allowed)}); an edit "
                f"rwb cannot verify: export the run again")
