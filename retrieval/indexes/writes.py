"""Inserts and deletes: the refusal check and the id bookkeeping of the in-process backends.

- :func:`require_writes` is what a runbook runner calls before the run: an index that cannot do
  a write step is refused in one line naming the backend and what it lacks (never mid-run).
- :class:`SlotWrites` is a mixin for in-process backends whose library numbers vectors itself
  ("slots": rows ``0..n-1`` at build, then ``n, n+1, ...`` for each insert, never reused): it
  keeps the caller's ids (``_ids``: slot -> id) and the reverse map (id -> slot), checks every
  write, and calls the backend's ``_insert_rows`` / ``_delete_rows`` with slots only. Ids stay
  the caller's int64 through any sequence of inserts and deletes. Writes come from one thread
  at a time; searches may run in other threads meanwhile (the slot -> id map is extended before
  the library sees a new slot, and replaced, never changed in place).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from retrieval.data import as_matrix
from retrieval.errors import ConfigError, DataError
from retrieval.indexes.base import BuildInfo, MaintainInfo, SupportsWrites
from retrieval.indexes.inprocess import check_ids

#: runbook step kinds that change the index (``search`` does not)
WRITE_STEPS = frozenset({"insert", "delete", "replace", "maintain"})


def require_writes(index: object, steps: Iterable[str] = ("insert", "delete")) -> None:
    """Raise ConfigError (one line) when ``index`` cannot run ``steps`` (runbook step kinds);
    a search-only runbook passes on any index. ``index`` may be a backend class (checked
    before any instance exists, e.g. before connecting to a server): then only whether it
    implements writes at all is checked, not an instance's ``cannot_write``."""
    needed = sorted(set(steps) & WRITE_STEPS)
    if not needed:
        return
    kind = index if isinstance(index, type) else type(index)
    name = getattr(kind, "name", kind.__name__)
    what = "/".join(needed)
    if not issubclass(kind, SupportsWrites):
        reason = getattr(kind, "writes_refusal", "it implements no inserts or deletes")
        raise ConfigError(f"backend '{name}' cannot run {what} steps: {reason}")
    if isinstance(index, type):
        return
    assert isinstance(index, SupportsWrites)
    reason = index.cannot_write()
    if reason:
        raise ConfigError(f"backend '{name}' cannot run {what} steps: {reason}")


def check_write_ids(ids: object, n: int, where: str) -> np.ndarray:
    """Ids of one write: 1-d int64 >= 0, unique, ``n`` of them (DataError otherwise)."""
    return check_ids(ids, n, where)


@dataclass
class _WriteState:
    """slot_of: caller id -> slot of every live vector; next_slot: the next slot an insert
    takes; dead: slots deleted but still held by the library (marked, not reclaimed)."""

    slot_of: dict[int, int]
    next_slot: int
    dead: int = 0
    inserted: int = 0
    deleted: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class SlotWrites:
    """Mixin (before the backend's base class) implementing
    :class:`~retrieval.indexes.base.SupportsWrites` over slots (see the module docstring).

    The backend implements ``_insert_rows(x, slots)`` (x float32 (m, dim), validated, not yet
    prepared for the metric) and ``_delete_rows(slots)``, and may override ``_maintain`` and
    ``_live_slots_held`` (slots the library still holds, deleted ones included: for
    :meth:`dead_fraction`). A snapshot after writes is refused (the build cache holds built
    indexes only); a new ``build`` forgets every write.
    """

    name: ClassVar[str]
    dim: int
    _ids: np.ndarray | None
    _wstate: _WriteState | None = None

    # --- hooks ---------------------------------------------------------------------------------
    def _insert_rows(self, x: np.ndarray, slots: np.ndarray) -> None:
        raise NotImplementedError

    def _delete_rows(self, slots: np.ndarray) -> None:
        raise NotImplementedError

    def _maintain(self) -> tuple[str, dict[str, Any]]:
        """Run the clean-up; return (action, extra). Default: nothing to do."""
        return "none", {}

    def _built_count(self) -> int:
        """Vectors the index held at build (before any write)."""
        raise NotImplementedError

    def _check_writable(self) -> None:
        """Raise ConfigError when the index is closed or not built."""
        raise NotImplementedError

    def _after_writes(self, live: int) -> None:
        """Called after each write with the new live count (e.g. to update ``_n``)."""

    # --- protocol ------------------------------------------------------------------------------
    def cannot_write(self) -> str | None:
        return None

    def _state(self) -> _WriteState:
        if self._wstate is None:
            n = self._built_count()
            ids = np.arange(n, dtype=np.int64) if self._ids is None else self._ids
            self._ids = ids
            self._wstate = _WriteState({int(v): s for s, v in enumerate(ids.tolist())}, n)
        return self._wstate

    def insert(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add ``vectors`` (m, dim) under the caller's ``ids`` (int64 >= 0, none of them live)."""
        where = f"backend '{self.name}' insert"
        self._check_writable()
        reason = self.cannot_write()
        if reason:
            raise ConfigError(f"{where}: {reason}")
        x = as_matrix(vectors, f"{where} vectors", dim=self.dim)
        new = check_write_ids(ids, x.shape[0], where)
        st = self._state()
        live = [int(v) for v in new.tolist() if int(v) in st.slot_of]
        if live:
            raise DataError(f"{where}: id {live[0]} is already in the index ({len(live)} of "
                            f"the {len(new)} ids are); delete it first")
        if new.shape[0] == 0:
            return
        slots = np.arange(st.next_slot, st.next_slot + new.shape[0], dtype=np.int64)
        assert self._ids is not None
        before = self._ids
        # the id map grows first: a search running in another thread may see the new slots
        # as soon as the library has them (one reference swap, no lock on the search path)
        self._ids = np.concatenate([before, new])
        try:
            self._insert_rows(x, slots)
        except BaseException:
            self._ids = before
            raise
        st.slot_of.update(zip(new.tolist(), slots.tolist(), strict=True))
        st.next_slot += int(new.shape[0])
        st.inserted += int(new.shape[0])
        self._after_writes(len(st.slot_of))

    def delete(self, ids: np.ndarray) -> None:
        """Remove the live ``ids`` (int64); a deleted id is never returned again."""
        where = f"backend '{self.name}' delete"
        self._check_writable()
        reason = self.cannot_write()
        if reason:
            raise ConfigError(f"{where}: {reason}")
        arr = np.asarray(ids)
        if arr.ndim != 1:
            raise DataError(f"{where}: ids must be a 1-d array; received shape {arr.shape}")
        gone = check_write_ids(arr, arr.shape[0], where)
        st = self._state()
        missing = [int(v) for v in gone.tolist() if int(v) not in st.slot_of]
        if missing:
            raise DataError(f"{where}: id {missing[0]} is not in the index ({len(missing)} of "
                            f"the {len(gone)} ids are not)")
        if gone.shape[0] == 0:
            return
        slots = np.array([st.slot_of[int(v)] for v in gone.tolist()], dtype=np.int64)
        self._delete_rows(slots)
        for v in gone.tolist():
            del st.slot_of[int(v)]
        st.deleted += int(gone.shape[0])
        self._after_writes(len(st.slot_of))

    def maintain(self) -> MaintainInfo:
        """The engine's clean-up, timed (seconds)."""
        self._check_writable()
        t0 = time.perf_counter_ns()
        action, extra = self._maintain()
        return MaintainInfo(action, (time.perf_counter_ns() - t0) / 1e9, extra)

    def live_count(self) -> int:
        """Live vectors: built + inserted - deleted."""
        self._check_writable()
        return self._built_count() if self._wstate is None else len(self._wstate.slot_of)

    # --- guards --------------------------------------------------------------------------------
    def build(self, vectors: np.ndarray, ids: np.ndarray | None = None) -> BuildInfo:
        self._wstate = None
        return super().build(vectors, ids)  # type: ignore[misc]



class SnapshotSlotWrites(SlotWrites):
    """:class:`SlotWrites` for a backend with a snapshot format: loading a snapshot forgets
    every write; a snapshot after writes is refused."""

    def load_snapshot(self, folder: Path, n: int) -> None:
        self._wstate = None
        super().load_snapshot(folder, n)  # type: ignore[misc]

    def save_snapshot(self, folder: Path) -> list[str]:
        if self._wstate is not None and (self._wstate.inserted or self._wstate.deleted):
            raise ConfigError(f"backend '{self.name}': no snapshot after inserts or deletes "
                              f"(the build cache holds built indexes only)")
        return super().save_snapshot(folder)  # type: ignore[misc]


__all__ = ["WRITE_STEPS", "SlotWrites", "SnapshotSlotWrites", "check_write_ids", "require_writes"]
