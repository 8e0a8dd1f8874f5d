"""Milvus Lite's gRPC server in this process, started by rwb instead of by pymilvus.

``MilvusClient("x.db")`` makes pymilvus start Milvus Lite's server in threads of this process.
Faiss (OpenMP) runs inside those threads, and an OpenMP thread count is per thread: calling
``faiss.omp_set_num_threads(n)`` in the caller's thread does not reach them (they keep the
process default, all cores). Starting the server here lets every worker thread pin its faiss
threads at start (a ThreadPoolExecutor initializer), so ``threads`` means what it says and
one-thread builds are reproducible. It also keeps a handle on the database, to wait for the
background compaction Milvus Lite runs after each flush.

Uses Milvus Lite's servicer class (``milvus_lite.adapter.grpc.servicer.MilvusServicer``) and
two private members (``Collection._wait_for_bg``, ``Collection._bg_executor``); when they move,
:func:`start` raises ImportError/AttributeError and the caller falls back to pymilvus's own
in-process server (threads then not pinned; recorded in the build info). Not a backend module.

Also here: where Milvus Lite keeps a collection on disk (data segments, index files), which the
backend checks after a build (:func:`segment_facts`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from concurrent import futures
from pathlib import Path
from typing import Any

from retrieval.engines.milvus.common import WHERE
from retrieval.errors import BackendError

log = logging.getLogger(__name__)

#: gRPC worker threads of the in-process server (Milvus Lite's own default)
WORKERS = 10
#: message size limit, as Milvus Lite's server (and Milvus standalone): 256 MiB
_MAX_MESSAGE = 256 * 1024 * 1024


def _pin(threads: int) -> None:
    import faiss

    faiss.omp_set_num_threads(threads)


class InProcessLite:
    """One Milvus Lite database served on a loopback port by threads of this process."""

    def __init__(self, server: Any, db: Any, pool: futures.ThreadPoolExecutor, port: int,
                 threads: int) -> None:
        self.server, self.db, self.pool, self.port = server, db, pool, port
        self.threads = threads

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, path: Path, threads: int) -> InProcessLite:
        """Open the database at ``path`` (Milvus Lite locks it) and serve it on 127.0.0.1."""
        grpc: Any = importlib.import_module("grpc")  # no type stubs installed
        from milvus_lite import MilvusLite
        from milvus_lite.adapter.grpc.servicer import MilvusServicer
        from pymilvus.grpc_gen import milvus_pb2_grpc

        db = MilvusLite(str(path))
        pool = futures.ThreadPoolExecutor(
            max_workers=WORKERS, thread_name_prefix="rwb-milvus-lite",
            initializer=_pin, initargs=(threads,),
        )
        try:
            server = grpc.server(pool, options=[
                ("grpc.max_receive_message_length", _MAX_MESSAGE),
                ("grpc.max_send_message_length", _MAX_MESSAGE),
            ])
            milvus_pb2_grpc.add_MilvusServiceServicer_to_server(MilvusServicer(db), server)
            port = server.add_insecure_port("127.0.0.1:0")
            if not port:
                raise OSError("could not bind a loopback port for Milvus Lite")
            server.start()
        except BaseException:
            pool.shutdown(wait=False)
            db.close()
            raise
        return cls(server, db, pool, int(port), threads)

    def collection(self, name: str) -> Any:
        return self.db.get_collection(name)

    def pin_background(self, name: str) -> None:
        """Pin faiss threads in the collection's background worker (compaction, index builds
        on merged segments) too; it is a single long-lived thread."""
        self.collection(name)._bg_executor.submit(_pin, self.threads).result(timeout=60)

    def drain(self, name: str, timeout_s: float) -> None:
        """Wait until the collection's queued background work (post-flush) is done."""
        self.collection(name)._wait_for_bg(timeout=timeout_s)

    def stop(self) -> None:
        """Stop serving and close the database (releases its lock). Never raises."""
        with contextlib.suppress(Exception):
            self.server.stop(grace=1).wait(5)
        with contextlib.suppress(Exception):
            self.db.close()
        with contextlib.suppress(Exception):
            self.pool.shutdown(wait=False)


# --------------------------------------------------------------------------- on disk


def collection_dir(db_path: Path | None, collection: str) -> Path | None:
    if db_path is None:
        return None
    hits = list(db_path.glob(f"**/collections/{collection}"))
    return hits[0] if hits else None


def lite_files(db_path: Path | None, collection: str) -> tuple[list[Path], list[Path]]:
    """(data segment files, index files) of ``collection`` in the database at ``db_path``."""
    root = collection_dir(db_path, collection)
    if root is None:
        return [], []
    segments = sorted(root.glob("partitions/*/data/*.parquet"))
    index_files = sorted(p for p in root.glob("partitions/*/indexes/*") if p.is_file())
    return segments, index_files


def collection_bytes(db_path: Path | None, collection: str) -> int:
    root = collection_dir(db_path, collection)
    if root is None:
        return 0
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def segment_facts(db_path: Path | None, collection: str, n: int, index_type: str, where: str,
                  drained: bool) -> tuple[int, dict[str, Any]]:
    """After a build and load: (bytes of the index files, facts for ``BuildInfo.extra``).
    BackendError when a data segment has no index file (searches would be brute-forced)."""
    segments, index_files = lite_files(db_path, collection)
    if len(index_files) < len(segments):
        raise BackendError(
            f"{WHERE}: Milvus Lite holds {len(segments)} data segment(s) but only "
            f"{len(index_files)} index file(s) after load at {where}: searches "
            f"would be brute-forced"
        )
    memory = sum(p.stat().st_size for p in index_files)
    extra: dict[str, Any] = {"segments": len(segments), "background_drained": drained}
    if len(segments) > 1:
        log.warning(
            "milvus: Milvus Lite split %d rows into %d segments (memtable limit); each "
            "segment has its own %s index and results are merged, so recall per "
            "ef/nprobe differs from one index over all rows", n, len(segments),
            index_type,
        )
    extra["disk_bytes"] = collection_bytes(db_path, collection)
    extra["memory_kind"] = "serialized index files of the loaded collection (bytes)"
    return memory, extra
