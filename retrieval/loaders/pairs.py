"""Labelled text pairs (``a``, ``b``, ``duplicate``) and plain text lists from the user's files.

Formats: ``jsonl`` (one JSON object per line), ``csv`` and ``tsv`` (a header row names the
columns). Labels are 0/1, true/false (any case) or JSON booleans. Every problem is a DataError
(or ConfigError for a setting) of one line naming the file, the line or field, and the value
received: a missing file or column, an empty file, text that is not UTF-8, a bad label, an
empty text.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from retrieval.errors import ConfigError, DataError, DataNotFound

log = logging.getLogger(__name__)

Format = Literal["jsonl", "csv", "tsv"]
FORMATS: tuple[str, ...] = ("jsonl", "csv", "tsv")
_TRUE = {"1", "true"}
_FALSE = {"0", "false"}


@dataclass(frozen=True)
class LabelledPair:
    """Two texts and whether they mean the same (``label`` 1) or not (0)."""

    text_a: str
    text_b: str
    label: int


def infer_format(path: str | Path, fmt: str | None, *, field: str = "format") -> str:
    """``fmt`` or the file's suffix (.jsonl/.csv/.tsv); ConfigError naming ``field`` else."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ConfigError(f"field '{field}' must be one of {', '.join(FORMATS)}; received "
                              f"{fmt!r}")
        return fmt
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix in FORMATS:
        return suffix
    if suffix == "json":
        return "jsonl"
    raise ConfigError(f"field '{field}' must be one of {', '.join(FORMATS)} (the file {path} has "
                      f"no .jsonl/.csv/.tsv suffix to infer it from); received None")


def _text(path: Path) -> str:
    if not path.is_file():
        raise DataNotFound(f"pairs file not found: {path} (looked in {path.resolve()})")
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"{path}: the file is empty")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                        f"{col})") from None


def _records(path: Path, fmt: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of every non-blank record; the header row for csv/tsv."""
    text = _text(path)
    if fmt == "jsonl":
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object; received "
                                f"{type(rec).__name__}")
            yield lineno, rec
        return
    # newline="": lines end at \n, \r\n or a lone \r (old Mac / some exports), while a line
    # break inside a quoted field is kept as written (as csv wants its files opened)
    reader = csv.DictReader(io.StringIO(text, newline=""),
                            delimiter="," if fmt == "csv" else "\t")
    try:
        if not reader.fieldnames:
            raise DataError(f"{path}: the file has no header row")
        for rec in reader:
            if not any((v or "").strip() for k, v in rec.items() if k is not None):
                continue
            yield reader.line_num, dict(rec)
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: not valid {fmt.upper()} ({exc})") from None


def _need(rec: dict[str, Any], col: str, field: str, path: Path, lineno: int) -> Any:
    if col not in rec:
        have = ", ".join(repr(str(k)) for k in rec if k is not None) or "(none)"
        raise DataError(f"{path}:{lineno}: field '{field}' names column {col!r}, which is not in "
                        f"the file; columns found: {have}")
    if rec[col] is None:
        raise DataError(f"{path}:{lineno}: the row has no value for column {col!r} (too few "
                        f"fields)")
    return rec[col]


def parse_label(value: Any, path: Path, lineno: int, col: str) -> int:
    """0/1, true/false (any case) or a JSON boolean -> 0 or 1; DataError otherwise."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, float) and value in (0.0, 1.0):
        return int(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return 1
        if v in _FALSE:
            return 0
    raise DataError(f"{path}:{lineno}: column {col!r} must be 0, 1, true or false; received "
                    f"{value!r}")


def _as_text(value: Any, path: Path, lineno: int, col: str) -> str:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise DataError(f"{path}:{lineno}: column {col!r} must be text; received {value!r}")
    text = str(value)
    if not text.strip():
        raise DataError(f"{path}:{lineno}: column {col!r} is empty")
    return text


def read_pairs(path: str | Path, fmt: str | None = None, *, text_a: str = "a",
               text_b: str = "b", label: str = "duplicate",
               field: str = "pairs") -> list[LabelledPair]:
    """The labelled pairs of a file (see the module docstring); ``field`` names the spec field
    the columns came from (``pairs``, ``heldout``, ...) in error messages."""
    p = Path(path).expanduser()
    fmt = infer_format(p, fmt, field=f"{field}.format")
    out: list[LabelledPair] = []
    for lineno, rec in _records(p, fmt):
        cols = {f"{field}.text_a": text_a, f"{field}.text_b": text_b, f"{field}.label": label}
        vals = {f: _need(rec, c, f, p, lineno) for f, c in cols.items()}
        out.append(LabelledPair(_as_text(vals[f"{field}.text_a"], p, lineno, text_a),
                                _as_text(vals[f"{field}.text_b"], p, lineno, text_b),
                                parse_label(vals[f"{field}.label"], p, lineno, label)))
    if not out:
        raise DataError(f"{p}: the file has no pairs (only a header or blank lines)")
    log.info("%s: %d labelled pairs (%d duplicates)", p, len(out), sum(x.label for x in out))
    return out


def read_texts(path: str | Path, fmt: str | None = None, *, column: str = "text",
               field: str = "distractors_file") -> list[str]:
    """Texts of a file: ``txt`` (one per non-blank line) or a column of jsonl/csv/tsv."""
    p = Path(path).expanduser()
    if fmt == "txt" or (fmt is None and p.suffix.lower() == ".txt"):
        texts = [t.strip() for t in _text(p).splitlines() if t.strip()]
    else:
        fmt = infer_format(p, fmt, field=f"{field}.format")
        texts = []
        for lineno, rec in _records(p, fmt):
            value = _need(rec, column, f"{field}.column", p, lineno)
            texts.append(_as_text(value, p, lineno, column))
    if not texts:
        raise DataError(f"{p}: the file has no texts")
    return texts


def file_fingerprint(path: str | Path) -> str:
    """sha256 of the file's bytes (16 hex digits), what a result was measured on."""
    return hashlib.sha256(Path(path).expanduser().read_bytes()).hexdigest()[:16]


__all__ = ["FORMATS", "LabelledPair", "file_fingerprint", "infer_format", "parse_label",
           "read_pairs", "read_texts"]
