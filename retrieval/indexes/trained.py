"""Trained parts shared between builds of one dataset (IVF coarse quantizers): in memory for
this process and, with an index cache, on disk as its ``quantizer`` entries."""

from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np

from retrieval.indexes.cachekeys import FORMAT, code_version


class ArrayCache(Protocol):
    """Where trained arrays persist (:class:`retrieval.indexes.buildcache.IndexCache`)."""

    def fetch_array(self, identity: dict[str, Any]) -> np.ndarray | None: ...

    def store_array(self, identity: dict[str, Any], arr: np.ndarray) -> str | None: ...


class TrainedStore:
    """Trained parts shared between builds of one dataset (Faiss IVF coarse quantizers): kept
    in memory for this process and, with a cache, on disk as ``quantizer`` entries. Keys are
    the backend's description of what was trained, with its ``library_version`` (data is added
    here)."""

    def __init__(self, cache: ArrayCache | None, data: str) -> None:
        self.cache = cache
        self.data = data
        self._mem: dict[str, np.ndarray] = {}
        #: how many gets were answered (memory or disk) and how many trainings were stored
        self.shared = 0
        self.trained = 0

    def _identity(self, key: dict[str, Any]) -> dict[str, Any]:
        return {**key, "kind": "quantizer", "format": FORMAT, "data": self.data,
                "library_version": str(key.get("library_version", "")),
                "build_code": code_version()}

    def get(self, key: dict[str, Any]) -> np.ndarray | None:
        ident = self._identity(key)
        mem_key = json.dumps(ident, sort_keys=True)
        arr = self._mem.get(mem_key)
        if arr is None and self.cache is not None:
            arr = self.cache.fetch_array(ident)
            if arr is not None:
                self._mem[mem_key] = arr
        if arr is not None:
            self.shared += 1
        return arr

    def put(self, key: dict[str, Any], arr: np.ndarray) -> None:
        ident = self._identity(key)
        self._mem[json.dumps(ident, sort_keys=True)] = np.asarray(arr, dtype=np.float32)
        self.trained += 1
        if self.cache is not None:
            self.cache.store_array(ident, np.asarray(arr, dtype=np.float32))

    def give(self, other: TrainedStore) -> int:
        """Hand every trained part this store holds in memory to ``other`` (a store of the
        same data, e.g. an evaluator's: its builds then reuse them); returns how many."""
        for mem_key, arr in self._mem.items():
            other._mem.setdefault(mem_key, arr)
        return len(self._mem)


__all__ = ["TrainedStore"]
