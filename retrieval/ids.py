"""The caller's ids of a dataset's vectors, and the one place they meet row positions.

A dataset's base vectors (and queries) may carry the caller's own ids: int64 ids that are not
``0..n-1``, or strings. Indexes, exact ground truth and filter masks work over row positions
(the base's order); :class:`CallerIds` maps caller ids to positions where they come in (ground
truth files, attribute files keyed by an id column, runbooks) and positions back to caller ids
where they go out (saved retrieved ids, exports). Integer ids must be >= 0 (-1 marks "no
result" in every result matrix); ids must be distinct.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from retrieval.errors import DataError

#: the largest integer id a write runbook accepts (ids stay exact through JSON's doubles)
MAX_RUNBOOK_ID = 2**53


def as_ids(values: object, what: str) -> np.ndarray:
    """``values`` as a 1-d id array: int64 (integers >= 0) or unicode strings; DataError (one
    line naming ``what``) for another dtype, a negative integer, an empty string or a
    duplicate."""
    arr = np.asarray(values)
    if arr.dtype == object:
        if not all(isinstance(v, str) for v in arr.ravel().tolist()):
            raise DataError(f"{what}: ids must be integers or strings; received a column of "
                            f"mixed Python objects")
        arr = arr.astype(str)
    if arr.ndim != 1:
        raise DataError(f"{what}: ids must be a 1-d array (one id per vector); received shape "
                        f"{arr.shape}")
    if np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_:
        out = arr.astype(np.int64)
        if out.size and int(out.min()) < 0:
            bad = int(out[np.argmax(out < 0)])
            raise DataError(f"{what}: integer ids must be >= 0 (-1 marks 'no result'); "
                            f"received {bad}")
    elif arr.dtype.kind in "US":
        out = arr.astype(str)
        if out.size and (out == "").any():
            raise DataError(f"{what}: string ids must not be empty; received '' at row "
                            f"{int(np.argmax(out == ''))}")
    else:
        raise DataError(f"{what}: ids must be int64 integers or strings; received dtype "
                        f"{arr.dtype}")
    _check_distinct(out, what)
    return out


def _check_distinct(ids: np.ndarray, what: str) -> None:
    uniq, counts = np.unique(ids, return_counts=True)
    if uniq.shape[0] != ids.shape[0]:
        dup = int(np.argmax(counts > 1))
        rows = np.flatnonzero(ids == uniq[dup])[:2].tolist()
        raise DataError(f"{what}: ids must be distinct; id {_plain(uniq[dup])!r} appears "
                        f"{int(counts[dup])} times (rows {rows[0]} and {rows[1]})")


def read_id_file(path: Path, n: int, what: str) -> np.ndarray:
    """The ids of ``n`` vectors from a ``.npy`` file (int64 or strings, one per vector)."""
    if not path.is_file():
        raise DataError(f"{what}: id file not found: {path}")
    if path.suffix != ".npy":
        raise DataError(f"{what}: an id file must be a .npy (int64 or strings, one per "
                        f"vector); received {path}")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        why = ("it holds pickled Python objects, which rwb does not load; save strings as a "
               "fixed-width unicode array (np.array(ids, dtype=str))" if "pickle" in str(exc)
               else f"{type(exc).__name__}: {str(exc).strip()[:200]}")
        raise DataError(f"{path}: not a readable .npy id file ({why})") from None
    ids = as_ids(arr, f"{what} {path}")
    if ids.shape[0] != n:
        raise DataError(f"{what} {path}: {ids.shape[0]} ids for {n} vectors (one id per "
                        f"vector, in the vectors' order)")
    return ids


@dataclass(frozen=True, eq=False)
class CallerIds:
    """The caller's id of each row (``ids[row]``): int64 (>= 0) or strings."""

    ids: np.ndarray

    @property
    def n(self) -> int:
        return int(self.ids.shape[0])

    @property
    def is_int(self) -> bool:
        return self.ids.dtype == np.int64

    @cached_property
    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.ids, kind="stable")
        return self.ids[order], order.astype(np.int64)

    def lookup(self, ids: object, what: str) -> np.ndarray:
        """Row positions of caller ``ids`` (any shape; int64), -1 where an id is not one of the
        dataset's; DataError when the ids' kind (integer / string) is not the dataset's."""
        arr = np.asarray(ids)
        if arr.dtype == object:
            arr = arr.astype(str)
        if self.is_int != (np.issubdtype(arr.dtype, np.integer) and arr.dtype != np.bool_):
            kind = "integer" if self.is_int else "string"
            raise DataError(f"{what}: the dataset's ids are {kind}s; received dtype "
                            f"{arr.dtype}")
        keys, order = self._sorted
        flat = arr.astype(np.int64).ravel() if self.is_int else arr.astype(str).ravel()
        if self.n == 0:
            return np.full(arr.shape, -1, dtype=np.int64)
        at = np.clip(np.searchsorted(keys, flat), 0, self.n - 1)
        found = keys[at] == flat
        return np.where(found, order[at], -1).reshape(arr.shape)

    def positions(self, ids: object, what: str) -> np.ndarray:
        """Row positions of caller ``ids`` (any shape; int64); DataError naming ``what`` and
        the first id that is not one of the dataset's."""
        pos = self.lookup(ids, what)
        if (pos < 0).any():
            flat = np.asarray(ids).ravel()
            bad = flat[int(np.argmax(pos.ravel() < 0))]
            raise DataError(f"{what}: id {_plain(bad)!r} is not one of the dataset's "
                            f"{self.n} ids ({int((pos < 0).sum())} unknown)")
        return pos

    def of(self, rows: np.ndarray) -> list[list[int | str]]:
        """Caller ids of the row positions in each row of ``rows`` (2-d; -1, no result, is
        left out)."""
        out: list[list[int | str]] = []
        for r in np.asarray(rows):
            got = r[r >= 0]
            out.append(self.ids[got].tolist())
        return out


def _plain(v: object) -> object:
    return v.item() if isinstance(v, np.generic) else v


def plain_ids(rows: np.ndarray) -> list[list[int]]:
    """Row positions as ids (a dataset without caller ids: its ids are its row numbers), -1
    left out."""
    return [r[r >= 0].astype(np.int64).tolist() for r in np.asarray(rows)]


def ids_or_rows(ids: CallerIds | None, rows: np.ndarray) -> list[list[int | str]]:
    """Caller ids of ``rows`` (2-d row positions), or the positions when there are none."""
    return ids.of(rows) if ids is not None else list(plain_ids(rows))  # type: ignore[arg-type]


def query_keys(ids: CallerIds | None, qidx: Sequence[int] | np.ndarray) -> list[int | str]:
    """How saved tables name the queries ``qidx``: their caller ids, else their positions."""
    q = np.asarray(qidx, dtype=np.int64)
    return ids.ids[q].tolist() if ids is not None else q.tolist()
