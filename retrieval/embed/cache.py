"""The on-disk cache in front of any embedder (:class:`CachedEmbedder`) and the process-wide
cached embedders (:func:`default_embedder`, :func:`get_embedder`)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.embed.base import Embedder, SupportsCacheTag, check_batch_size, check_texts
from retrieval.embed.models import resolve_model
from retrieval.embed.st import SentenceTransformerEmbedder, make_embedder
from retrieval.errors import DataError, param_error
from retrieval.phases import report

log = logging.getLogger(__name__)

CACHE_FORMAT = "rwb-embed-v1"
#: beside each chunk ``<key>.npy``: ``<key>.rows``, a ``.npy``-format uint8 array (n, 16) of one
#: digest per row (the model, its cache tag and the row's text), so that a chunk of other texts
#: (a cut of a corpus whose whole was embedded before) is assembled from stored rows
ROWS_SUFFIX = ".rows"


class CachedEmbedder:
    """On-disk cache in front of an embedder.

    Texts are cut into chunks of ``chunk_size``; each chunk is stored as one ``.npy`` under
    ``cache_dir`` (default ``retrieval.paths.cache_dir()/embeddings``), keyed by the sha256 of
    (model_id, the inner embedder's ``cache_tag`` such as the normalize flag, the chunk's texts).
    A hit is a memory-mapped load (copy-on-write, so callers may modify the result); a long run
    that is interrupted keeps the chunks already done. Writes are atomic (temp file + rename).
    A missing chunk reuses the rows of stored chunks (same model and cache tag) that hold the
    same texts, and embeds only the others: a cut or a reordering of a corpus embedded before
    costs no model call. A row embedded in another batch can differ in the last bits (about
    1e-7) from one embedded with this chunk's neighbours.
    """

    def __init__(
        self, inner: Embedder, cache_dir: Path | None = None, *, chunk_size: int = 8192
    ) -> None:
        if isinstance(inner, CachedEmbedder):
            inner = inner.inner
        self.inner: Embedder = inner
        if cache_dir is None:
            from retrieval.paths import cache_dir as _cache_dir

            cache_dir = _cache_dir() / "embeddings"
        self.cache_dir = Path(cache_dir)
        if chunk_size < 1:
            raise param_error("chunk_size", "an integer >= 1", chunk_size, where="CachedEmbedder")
        self.chunk_size = int(chunk_size)
        self.hits = 0
        self.misses = 0
        #: texts reused from other stored chunks (not embedded again)
        self.reused_rows = 0
        self._rows: dict[bytes, tuple[Path, int]] = {}
        self._rows_seen: set[str] = set()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, cache_dir={str(self.cache_dir)!r})"

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def cache_tag(self) -> str:
        return self.inner.cache_tag if isinstance(self.inner, SupportsCacheTag) else ""

    def key(self, texts: Sequence[str]) -> str:
        """sha256 hex of (format, model_id, cache_tag, texts) - the file name of a chunk."""
        h = hashlib.sha256()
        for part in (CACHE_FORMAT, self.model_id, self.cache_tag):
            h.update(part.encode())
            h.update(b"\0")
        for text in texts:
            data = text.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        return h.hexdigest()

    def path_for(self, texts: Sequence[str]) -> Path:
        return self.cache_dir / f"{self.key(texts)}.npy"

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed with the cache (float32 ``(n, dim)``): computes only the chunks not stored."""
        items = check_texts(texts)
        batch_size = check_batch_size(batch_size)
        parts: list[np.ndarray] = []
        t0 = time.perf_counter()
        computed = 0
        for start in range(0, len(items), self.chunk_size):
            chunk = items[start : start + self.chunk_size]
            path = self.path_for(chunk)
            arr = self._load(path, len(chunk))
            fresh = 0
            if arr is None:
                arr, fresh = self._compute(path, chunk, batch_size)
            if fresh:
                self.misses += 1
                computed += fresh
                done = start + len(chunk)
                rate = computed / max(time.perf_counter() - t0, 1e-9)
                log.info(
                    "embedded %d/%d texts with %s (%.0f texts/s)",
                    done, len(items), self.model_id, rate,
                )
                report("embed", done, len(items), "texts")  # progress lines in the CLI
            else:
                self.hits += 1
            if parts and arr.shape[1] != parts[0].shape[1]:
                raise DataError(
                    f"embedding cache: chunk {path} has dimension {arr.shape[1]}, others "
                    f"{parts[0].shape[1]}; delete the stale files in {self.cache_dir}"
                )
            parts.append(arr)
        out = np.asarray(parts[0]) if len(parts) == 1 else np.concatenate(parts, axis=0)
        log.debug(
            "embedding cache: %d texts in %.3f s (%d computed)",
            len(items), time.perf_counter() - t0, computed,
        )
        return out

    def _compute(
        self, path: Path, chunk: Sequence[str], batch_size: int
    ) -> tuple[np.ndarray, int]:
        """Embed and store one missing chunk; returns it and how many texts were computed here.

        Under a per-chunk file lock (``<key>.lock``): processes sharing a cache folder (workers
        of one run, two sweeps on the same corpus) compute a chunk once; the one that waited
        loads what the other stored (0 computed).
        """
        from filelock import FileLock

        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path.with_suffix(".lock"))):
            arr = self._load(path, len(chunk))
            if arr is not None:
                return arr, 0
            digests = self.row_digests(chunk)
            arr, computed = self._assemble(chunk, digests, batch_size)
            self._store(path, arr, len(chunk))
            self._store_rows(path, digests)
            return arr, computed

    def row_digests(self, texts: Sequence[str]) -> np.ndarray:
        """One 16-byte digest per text (uint8 ``(n, 16)``) of (format, model_id, cache_tag,
        text): rows of one model and tag match across chunks, never another model's."""
        head = hashlib.blake2b(digest_size=16)
        for part in (CACHE_FORMAT, self.model_id, self.cache_tag):
            head.update(part.encode())
            head.update(b"\0")
        out = np.empty((len(texts), 16), dtype=np.uint8)
        for i, text in enumerate(texts):
            h = head.copy()
            h.update(text.encode("utf-8", "surrogatepass"))
            out[i] = np.frombuffer(h.digest(), dtype=np.uint8)
        return out

    def _assemble(
        self, chunk: Sequence[str], digests: np.ndarray, batch_size: int
    ) -> tuple[np.ndarray, int]:
        """The chunk's vectors: rows stored in other chunks are copied, the rest embedded (one
        call); returns them and how many texts were embedded."""
        self._index_rows()
        found: dict[Path, list[tuple[int, int]]] = {}
        for i, d in enumerate(digests):
            where = self._rows.get(d.tobytes())
            if where is not None:
                found.setdefault(where[0], []).append((i, where[1]))
        n = len(chunk)
        rows: dict[int, np.ndarray] = {}
        for src, pairs in found.items():
            stored = self._load_any(src)
            if stored is None:
                continue
            for i, j in pairs:
                if j < stored.shape[0]:
                    rows[i] = stored[j]
        dims = {row.shape[0] for row in rows.values()}
        if not rows or len(dims) > 1:  # nothing stored, or stale chunks of another dimension
            return self.inner.embed(chunk, batch_size=batch_size), n
        todo = [i for i in range(n) if i not in rows]
        dim = dims.pop()
        arr = np.empty((n, dim), dtype=np.float32)
        for i, row in rows.items():
            arr[i] = row
        if todo:
            fresh = np.asarray(self.inner.embed([chunk[i] for i in todo], batch_size=batch_size))
            if fresh.ndim != 2 or fresh.shape != (len(todo), dim):
                raise DataError(f"embedder {self.model_id} returned shape {fresh.shape} for "
                                f"{len(todo)} texts; the stored rows have dimension {dim}")
            arr[todo] = fresh
        self.reused_rows += len(rows)
        log.info("embedding cache: %d of %d texts reused from stored chunks", len(rows), n)
        return arr, len(todo)

    def _index_rows(self) -> None:
        """Add the row digests of chunks stored since the last look (this process or another)."""
        if not self.cache_dir.is_dir():
            return
        for f in self.cache_dir.glob(f"*{ROWS_SUFFIX}"):
            if f.name in self._rows_seen or f.name.startswith(".tmp-"):
                continue
            self._rows_seen.add(f.name)
            chunk = f.with_suffix(".npy")
            try:
                with open(f, "rb") as fh:
                    digests = np.load(fh, allow_pickle=False)
            except (OSError, ValueError) as exc:
                log.warning("embedding cache: unreadable %s (%s); not reused", f, exc)
                continue
            if digests.ndim != 2 or digests.shape[1] != 16 or digests.dtype != np.uint8:
                continue
            for j, d in enumerate(digests):
                self._rows.setdefault(d.tobytes(), (chunk, j))

    @staticmethod
    def _load_any(path: Path) -> np.ndarray | None:
        """A stored chunk of any length (float32 2-D, memory-mapped), or None."""
        try:
            arr = np.load(path, mmap_mode="c", allow_pickle=False)
        except (OSError, ValueError):
            return None
        return arr if arr.ndim == 2 and arr.dtype == np.float32 else None

    def _store_rows(self, path: Path, digests: np.ndarray) -> None:
        """``<key>.rows`` beside the chunk ``path``, written after it (atomic rename)."""
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-", suffix=ROWS_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, np.ascontiguousarray(digests, dtype=np.uint8), allow_pickle=False)
            os.replace(tmp, path.with_suffix(ROWS_SUFFIX))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _load(self, path: Path, n: int) -> np.ndarray | None:
        if not path.is_file():
            return None
        try:
            arr = np.load(path, mmap_mode="c", allow_pickle=False)
        except (OSError, ValueError) as exc:
            log.warning("embedding cache: unreadable %s (%s); recomputing", path, exc)
            return None
        if arr.ndim != 2 or arr.shape[0] != n or arr.dtype != np.float32:
            log.warning(
                "embedding cache: %s has shape %s dtype %s, expected (%d, dim) float32; "
                "recomputing", path, arr.shape, arr.dtype, n,
            )
            return None
        return np.asarray(arr)

    def _store(self, path: Path, arr: np.ndarray, n: int) -> None:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != n:
            raise DataError(
                f"embedder {self.model_id} returned shape {arr.shape} for {n} texts"
            )
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-", suffix=".npy")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        meta = {"model_id": self.model_id, "cache_tag": self.cache_tag, "n": n,
                "dim": int(arr.shape[1]), "created": time.time()}
        meta_path = path.with_suffix(".json")
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(meta, fh)
        os.replace(tmp, meta_path)


_DEFAULT: CachedEmbedder | None = None
_BY_MODEL: dict[str, CachedEmbedder] = {}
_LOCK = threading.Lock()


def default_embedder() -> CachedEmbedder:
    """The process-wide cached packaged all-MiniLM-L6-v2 (384-d, normalised, CPU)."""
    global _DEFAULT
    with _LOCK:
        if _DEFAULT is None:
            _DEFAULT = CachedEmbedder(SentenceTransformerEmbedder())
        return _DEFAULT


def get_embedder(model: str | Path | None = None, runtime: str | None = None) -> CachedEmbedder:
    """A cached embedder for ``model`` (None: :func:`default_embedder`) on ``runtime`` (None or
    ``torch``: sentence-transformers fp32), one per model and runtime per process."""
    from retrieval.embed.plugins import entry_point_name, load_embedder

    plugin = entry_point_name(model)
    if plugin is not None:  # a third-party embedder (rwb.embedders entry point)
        with _LOCK:
            key = f"{model}@entry-point"
            if key not in _BY_MODEL:
                _BY_MODEL[key] = CachedEmbedder(load_embedder(plugin))
            return _BY_MODEL[key]
    name = "torch" if runtime is None else runtime
    if name != "torch":
        from retrieval.embed.runtimes import parse_runtime

        name = parse_runtime(name, where="embedder").name
    if name == "torch" and model is None:
        return default_embedder()
    _, model_id = resolve_model(model)
    if name == "torch" and model_id == default_embedder().model_id:
        return default_embedder()
    key = model_id if name == "torch" else f"{model_id}@{name}"
    with _LOCK:
        if key not in _BY_MODEL:
            _BY_MODEL[key] = CachedEmbedder(make_embedder(model, name))
        return _BY_MODEL[key]
