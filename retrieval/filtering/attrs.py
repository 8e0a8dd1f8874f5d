"""Per-vector attributes: integer columns and label columns (each row a set of strings).

A label column is stored in CSR form (``indptr`` int64 (n+1,), ``codes`` int32 into ``vocab``),
so that "row has any of these labels" is one vectorised ``np.isin`` over all the codes.
Attributes never change a dataset's fingerprint: filters are keyed by their row masks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from retrieval.errors import DataError


@dataclass(frozen=True, eq=False)
class LabelColumn:
    """Row ``i`` holds labels ``vocab[codes[indptr[i]:indptr[i+1]]]`` (possibly none)."""

    vocab: tuple[str, ...]
    indptr: np.ndarray
    codes: np.ndarray

    @property
    def n(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @classmethod
    def from_rows(cls, rows: Iterable[str | Sequence[str] | None]) -> LabelColumn:
        """From one label (str) or a list of labels (or None: no label) per row."""
        index: dict[str, int] = {}
        indptr = [0]
        codes: list[int] = []
        for row in rows:
            labels = [] if row is None else [row] if isinstance(row, str) else list(row)
            for lab in dict.fromkeys(str(x) for x in labels):
                codes.append(index.setdefault(lab, len(index)))
            indptr.append(len(codes))
        return cls(tuple(index), np.asarray(indptr, dtype=np.int64),
                   np.asarray(codes, dtype=np.int32))

    def mask_any(self, labels: Iterable[str]) -> np.ndarray:
        """bool (n,): rows having at least one of ``labels`` (unknown labels match nothing)."""
        pos = {lab: i for i, lab in enumerate(self.vocab)}
        wanted = np.asarray([pos[x] for x in labels if x in pos], dtype=np.int32)
        out = np.zeros(self.n, dtype=bool)
        if wanted.size:
            hit = np.isin(self.codes, wanted)
            out[self._row_of_code[hit]] = True
        return out

    @cached_property
    def _row_of_code(self) -> np.ndarray:
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))

    def row(self, i: int) -> list[str]:
        return [self.vocab[c] for c in self.codes[self.indptr[i]:self.indptr[i + 1]]]

    def frequencies(self) -> dict[str, float]:
        """Share of rows (0..1) carrying each label."""
        counts = np.bincount(self.codes, minlength=len(self.vocab))
        return {lab: float(c) / max(self.n, 1) for lab, c in zip(self.vocab, counts)}

    def take(self, rows: np.ndarray) -> LabelColumn:
        return LabelColumn.from_rows(self.row(int(i)) for i in rows)


@dataclass(frozen=True, eq=False)
class Attributes:
    """Attributes of ``n`` vectors: ``ints`` name -> int64 (n,); ``labels`` name -> LabelColumn.
    ``tenant``: the label attribute naming each vector's tenant, when one does (an engine that
    indexes tenants apart marks it so: Qdrant's ``is_tenant`` keyword index)."""

    n: int
    ints: dict[str, np.ndarray] = field(default_factory=dict)
    labels: dict[str, LabelColumn] = field(default_factory=dict)
    tenant: str | None = None

    def __post_init__(self) -> None:
        both = set(self.ints) & set(self.labels)
        if both:
            raise DataError(f"attributes: '{sorted(both)[0]}' is both an integer and a label "
                            f"column")
        sizes = [(k, int(v.shape[0])) for k, v in self.ints.items()]
        sizes += [(k, v.n) for k, v in self.labels.items()]
        for name, size in sizes:
            if size != self.n:
                raise DataError(f"attribute '{name}': {size} values for {self.n} vectors "
                                f"(one value per vector is required)")

    @property
    def names(self) -> list[str]:
        return sorted([*self.ints, *self.labels])

    def kind(self, name: str) -> str:
        """``int`` | ``label`` (KeyError when unknown)."""
        if name in self.ints:
            return "int"
        if name in self.labels:
            return "label"
        raise KeyError(name)

    @classmethod
    def from_columns(cls, columns: Mapping[str, object], n: int | None = None,
                     *, where: str = "attributes") -> Attributes:
        """From plain columns: an integer/bool array -> int column; strings (one per row) or
        lists of strings (several per row, also as a 2-d string array: row ``i`` holds the
        labels ``col[i, :]``) -> label column. Floats are refused."""
        ints: dict[str, np.ndarray] = {}
        labels: dict[str, LabelColumn] = {}
        for name, col in columns.items():
            if isinstance(col, list | tuple) and _ragged(col):
                # lists per row (np.asarray would turn equal-length lists into a 2-d array)
                labels[str(name)] = LabelColumn.from_rows(_label_row(v, name, where)
                                                          for v in col)
                continue
            arr = np.asarray(col)
            if arr.ndim == 2 and (arr.dtype.kind in "US" or arr.dtype == object):
                labels[str(name)] = LabelColumn.from_rows(_label_row(list(v), name, where)
                                                          for v in arr)
                continue
            if arr.ndim != 1:
                raise DataError(f"{where}: column '{name}' must be 1-d (one value per vector); "
                                f"received shape {arr.shape}")
            if arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.integer):
                ints[str(name)] = arr.astype(np.int64)
            elif arr.dtype.kind in "US" or arr.dtype == object:
                labels[str(name)] = LabelColumn.from_rows(_label_row(v, name, where) for v in arr)
            else:
                raise DataError(f"{where}: column '{name}' must hold integers or labels "
                                f"(strings, or lists of strings); received dtype {arr.dtype}")
        size = n if n is not None else next(
            (c.shape[0] for c in ints.values()), next((c.n for c in labels.values()), 0))
        return cls(int(size), ints, labels)

    def take(self, rows: np.ndarray) -> Attributes:
        """The attributes of ``rows`` (in that order)."""
        rows = np.asarray(rows, dtype=np.int64)
        return Attributes(int(rows.shape[0]), {k: v[rows] for k, v in self.ints.items()},
                          {k: v.take(rows) for k, v in self.labels.items()}, self.tenant)

    @cached_property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for name in self.names:
            h.update(name.encode() + b"\0")
            if name in self.ints:
                h.update(self.ints[name].tobytes())
            else:
                col = self.labels[name]
                h.update("\0".join(col.vocab).encode())
                h.update(col.indptr.tobytes() + col.codes.tobytes())
        return h.hexdigest()[:16]

    def describe(self) -> dict[str, str]:
        return {name: self.kind(name) for name in self.names}


def _ragged(col: object) -> bool:
    return isinstance(col, list | tuple) and any(isinstance(v, list | tuple) for v in col)


def _label_row(v: object, name: object, where: str) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, list | tuple | np.ndarray) and all(isinstance(x, str) for x in v):
        return [str(x) for x in v]
    raise DataError(f"{where}: column '{name}' must hold labels (a string or a list of strings "
                    f"per vector); received {v!r}")
