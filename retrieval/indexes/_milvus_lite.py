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
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from concurrent import futures
from pathlib import Path
from typing import Any

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
