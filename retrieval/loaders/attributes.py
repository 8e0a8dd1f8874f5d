"""Per-vector attributes from the forms users have them in:

- an attribute column file beside the vector files: ``.parquet`` (one column per attribute,
  one row per base vector) or ``.npy`` (a structured array: one field per attribute);
- BEIR corpus metadata: ``corpus.jsonl`` rows' ``metadata`` fields (by document id);
- Reuters-21578 labels: each paragraph gets its article's ``TOPICS`` and ``PLACES`` (``<D>``
  entries; an article may have several or none).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.errors import DataError, DataNotFound, param_error
from retrieval.filtering.attrs import Attributes
from retrieval.ids import CallerIds, as_ids

log = logging.getLogger(__name__)

REUTERS_FIELDS: tuple[str, ...] = ("topics", "places")
_REC = re.compile(r"<REUTERS (.*?)>(.*?)</REUTERS>", re.S)
_NEWID = re.compile(r'NEWID="(\d+)"')
_D = re.compile(r"<D>(.*?)</D>", re.S)


def read_attribute_file(path: Path, n: int, *, ids: CallerIds | None = None,
                        id_column: str = "id") -> Attributes:
    """Attributes of ``n`` base vectors from a ``.parquet`` or structured ``.npy`` file: one
    row per base vector in the base's order or, when the dataset has caller ``ids``, rows
    keyed by the column ``id_column`` (joined on the ids, in any order; the id column stays
    an attribute, so a filter can name the caller's ids)."""
    if not path.is_file():
        raise DataNotFound(f"attributes file not found: {path}")
    if path.suffix == ".parquet":
        import pandas as pd

        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError / ValueError kinds
            raise DataError(f"{path}: not a readable parquet file ({type(exc).__name__}: "
                            f"{_first_line(exc)})") from None
        cols: dict[str, Any] = {}
        for c in frame.columns:
            s = frame[c]
            cols[str(c)] = (s.to_numpy() if s.dtype.kind in "iub" else
                            [list(v) if isinstance(v, list | tuple | np.ndarray) else v
                             for v in s.tolist()])
    elif path.suffix == ".npy":
        with path.open("rb") as fh:
            magic = fh.read(6)
        if magic != b"\x93NUMPY":
            raise DataError(f"{path}: not a .npy file (it does not start with the NumPy magic "
                            f"bytes)")
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            why = ("it holds pickled Python objects, which rwb does not load" if "pickle"
                   in str(exc) else f"{type(exc).__name__}: {_first_line(exc)}")
            raise DataError(f"{path}: not a readable .npy file ({why})") from None
        if arr.dtype.names is None:
            raise DataError(f"{path}: an attributes .npy must be a structured array (one field "
                            f"per attribute); received dtype {arr.dtype}")
        cols = {name: arr[name] for name in arr.dtype.names}
    else:
        raise param_error("attributes", "a .parquet or .npy file", str(path))
    if ids is not None:
        cols = _join_on_ids(cols, ids, id_column, path)
    attrs = Attributes.from_columns(cols, where=str(path))
    if attrs.n != n:
        raise DataError(f"{path}: {attrs.n} attribute rows for {n} base vectors (one per base "
                        f"vector)")
    return attrs


def _join_on_ids(cols: dict[str, Any], ids: CallerIds, id_column: str, path: Path
                 ) -> dict[str, Any]:
    """``cols`` reordered to the base's row order by joining ``cols[id_column]`` on the
    caller ``ids``: a duplicate id or a base id without a row is a DataError (one line); rows
    of ids the dataset does not have are dropped (logged)."""
    if id_column not in cols:
        raise DataError(f"{path}: the dataset has ids, so its attributes are keyed by an id "
                        f"column; no column '{id_column}' (columns: "
                        f"{', '.join(map(str, cols)) or 'none'}; set id_column to name yours)")
    raw = cols[id_column]
    key = as_ids(raw if isinstance(raw, np.ndarray) else np.asarray(raw), f"{path} column "
                 f"'{id_column}'")
    pos = ids.lookup(key, f"{path} column '{id_column}'")
    known = pos >= 0
    if not known.all():
        log.info("%s: %d attribute rows name ids the dataset does not have (dropped)", path,
                 int((~known).sum()))
    have = np.zeros(ids.n, dtype=bool)
    have[pos[known]] = True
    if not have.all():
        miss = ids.ids[int(np.argmax(~have))]
        raise DataError(f"{path}: no attribute row for id {miss.item()!r} (column "
                        f"'{id_column}'; {int((~have).sum())} of the dataset's {ids.n} ids "
                        f"have none: one row per id is required)")
    take = np.empty(ids.n, dtype=np.int64)
    take[pos[known]] = np.flatnonzero(known)
    out: dict[str, Any] = {}
    for name, col in cols.items():
        if isinstance(col, np.ndarray):
            out[name] = col[take]
        else:
            out[name] = [col[i] for i in take.tolist()]
    return out


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


@functools.lru_cache(maxsize=2)
def _reuters_labels(folder: Path) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for i in range(22):
        raw = (folder / f"reut2-{i:03d}.sgm").read_text(encoding="latin-1")
        for attrs, rec in _REC.findall(raw):
            m = _NEWID.search(attrs)
            if m is None:
                continue
            out[m.group(1)] = {f: _D.findall(_section(rec, f.upper())) for f in REUTERS_FIELDS}
    return out


def _section(rec: str, tag: str) -> str:
    m = re.search(rf"<{tag}>(.*?)</{tag}>", rec, re.S)
    return m.group(1) if m else ""


def reuters_attributes(folder: Path, base_ids: Sequence[str], fields: Sequence[str]
                       ) -> Attributes:
    """TOPICS / PLACES of each paragraph's article (ids ``<NEWID>-<j>``)."""
    for f in fields:
        if f not in REUTERS_FIELDS:
            raise param_error("attributes", f"a subset of {', '.join(REUTERS_FIELDS)} for "
                              f"reuters", f)
    labels = _reuters_labels(folder)
    cols = {f: [labels.get(i.split("-")[0], {}).get(f, []) for i in base_ids] for f in fields}
    return Attributes.from_columns(cols, n=len(base_ids), where="reuters labels")


def beir_attributes(folder: Path, base_ids: Sequence[str], fields: Sequence[str]) -> Attributes:
    """``metadata`` fields of a BEIR ``corpus.jsonl`` (ints stay ints, strings/lists are
    labels; a document without the field gets no label, or -1 for an int field)."""
    path = folder / "corpus.jsonl"
    meta: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                meta[str(row.get("_id"))] = dict(row.get("metadata") or {})
    cols: dict[str, Any] = {}
    for f in fields:
        vals = [meta.get(i, {}).get(f) for i in base_ids]
        present = [v for v in vals if v is not None]
        if not present:
            raise DataError(f"{path}: no document has metadata field '{f}'")
        if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            cols[f] = np.asarray([-1 if v is None else v for v in vals], dtype=np.int64)
        else:
            cols[f] = [v if isinstance(v, list) else (None if v is None else str(v))
                       for v in vals]
    return Attributes.from_columns(cols, n=len(base_ids), where=str(path))
