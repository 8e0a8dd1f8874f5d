"""Milvus connections: where an index's data lives (embedded Milvus Lite or a server by URI),
opening the sync and async clients, one-line errors for a failed RPC (credentials scrubbed).

Not a backend module: a mixin of :class:`retrieval.engines.milvus.index.MilvusIndex` (see its
module doc for the order in which the target is chosen). Times are in seconds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.engines.milvus.common import (
    URI_ENV,
    WHERE,
    install_call_filter,
    quiet_call,
    quiet_pymilvus,
    redact_uri,
)
from retrieval.engines.milvus.lite import InProcessLite
from retrieval.errors import BackendError, ConfigError, DataError, NotReachable
from retrieval.redact import redact_text, url_secrets

log = logging.getLogger(__name__)



def connection_lost(exc: BaseException) -> bool:
    """Whether a pymilvus failure means the server stopped answering (gRPC UNAVAILABLE,
    pymilvus's "Fail connecting to server" code 2), not a refused request."""
    text = str(exc)
    return (getattr(exc, "code", None) == 2 or "UNAVAILABLE" in text
            or "Fail connecting to server" in text or "Connection refused" in text)

class MilvusConnection:
    """Mixin: the client side of :class:`~retrieval.engines.milvus.index.MilvusIndex`."""

    _closed: bool
    _embedded: bool
    _uri: str | None
    _token: str
    _db_path: Path | None
    _lite: InProcessLite | None
    _owned_dirs: list[Path]
    _client: Any
    _aclient: Any
    _aloop: asyncio.AbstractEventLoop | None
    workdir: Path | None
    threads: int
    connect_timeout_s: float

    @property
    def where(self) -> str:
        """Where the data lives, safe to log: the Lite path or the URI without credentials."""
        if self._embedded:
            return str(self._db_path or self._uri or "(milvus lite, not started)")
        return redact_uri(str(self._uri))

    @property
    def embedded(self) -> bool:
        return self._embedded

    def _scrub(self, text: str) -> str:
        if self._token:
            text = text.replace(self._token, "***")
        if self._uri and not self._embedded:
            text = text.replace(self._uri, redact_uri(self._uri))
            text = redact_text(text, url_secrets(self._uri))  # pieces a client error shows
        return text

    def connect(self) -> Any:
        """Open the client (idempotent); raise BackendError naming where, within the timeout."""
        if self._closed:
            raise BackendError(f"{WHERE}: index is closed")
        if self._client is not None:
            return self._client
        from pymilvus import MilvusClient

        install_call_filter()
        if self._embedded:
            self._client = self._open_lite(MilvusClient)
            return self._client
        t0 = time.perf_counter()
        try:
            with quiet_pymilvus():
                self._client = MilvusClient(
                    uri=self._uri, token=self._token, timeout=self.connect_timeout_s,
                    dedicated=True,
                )
        except Exception as exc:  # nothing answering there: not reachable (exit 3)
            waited = time.perf_counter() - t0
            raise NotReachable(
                f"{WHERE}: cannot connect to Milvus at {self.where} (timeout "
                f"{self.connect_timeout_s:g} s, gave up after {waited:.1f} s): "
                f"{self._scrub(str(exc))[:300]}"
            ) from None
        return self._client

    def _open_lite(self, client_cls: Any) -> Any:
        try:
            import milvus_lite  # noqa: F401
        except ImportError:
            raise BackendError(
                f"{WHERE}: embedded mode needs milvus-lite (pip install "
                f"'retrieval-workbench[milvus]'), or set {URI_ENV} to a Milvus server"
            ) from None
        if self._uri is not None:
            path = Path(self._uri)
        else:
            base = self.workdir
            if base is None:
                base = Path(tempfile.mkdtemp(prefix="rwb-milvus-"))
                self._owned_dirs.append(base)
            base.mkdir(parents=True, exist_ok=True)
            path = base / f"rwb-milvus-{uuid.uuid4().hex[:12]}.db"
            self._owned_dirs.insert(0, path)
        self._db_path = path.resolve()
        try:
            with quiet_pymilvus():
                try:
                    self._lite = InProcessLite.start(self._db_path, self.threads)
                except (ImportError, AttributeError) as exc:  # Milvus Lite internals moved
                    log.warning("milvus: serving Milvus Lite through pymilvus (%r); faiss "
                                "threads in its worker threads are not pinned", exc)
                    return client_cls(str(self._db_path), timeout=self.connect_timeout_s)
                return client_cls(uri=self._lite.uri, timeout=self.connect_timeout_s,
                                  dedicated=True)
        except Exception as exc:
            raise BackendError(
                f"{WHERE}: cannot open Milvus Lite at {self._db_path} ({type(exc).__name__}: "
                f"{str(exc)[:300]}); Milvus Lite locks a path per process: use one path per "
                f"process, or run `milvus-lite server` and connect by URI"
            ) from None

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one RPC; a failure becomes a one-line BackendError (pymilvus's own traceback
        logging is silenced: a search only in the calling thread, see ``quiet_call``)."""
        quiet = quiet_pymilvus() if what != "search" else quiet_call()
        try:
            with quiet:
                return fn(*args, **kwargs)
        except Exception as exc:
            if isinstance(exc, BackendError | ConfigError | DataError):
                raise
            if not self._embedded and connection_lost(exc):  # the server went away mid-call
                raise NotReachable(
                    f"{WHERE}: {what} failed, Milvus at {self.where} is not reachable "
                    f"(connection lost): {type(exc).__name__}: {self._scrub(str(exc))[:300]}"
                ) from None
            raise BackendError(
                f"{WHERE}: {what} failed on {self.where}: {type(exc).__name__}: "
                f"{self._scrub(str(exc))[:300]}"
            ) from None

    async def _async_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._aclient is not None and self._aloop is loop:
            return self._aclient
        await self._aclose_client()
        from pymilvus import AsyncMilvusClient

        if self._lite is not None:
            target = self._lite.uri
        else:
            target = str(self._db_path) if self._embedded else str(self._uri)
        client = AsyncMilvusClient(
            uri=target, token=self._token, timeout=self.connect_timeout_s, dedicated=True
        )
        self._aclient, self._aloop = client, loop
        return client

    async def _aclose_client(self) -> None:
        client, loop = self._aclient, self._aloop
        self._aclient, self._aloop = None, None
        if client is None:
            return
        if loop is asyncio.get_running_loop():
            with contextlib.suppress(Exception), quiet_pymilvus():
                await client.close()

    async def aclose(self) -> None:
        """Close the async client inside its loop, then everything else (:meth:`close`)."""
        await self._aclose_client()
        self.close()

    def _close_async_outside_loop(self) -> None:
        client, loop = self._aclient, self._aloop
        self._aclient, self._aloop = None, None
        if client is None or loop is None or loop.is_closed() or loop.is_running():
            return  # a closed loop took its channel with it; a running one: use aclose()
        with contextlib.suppress(Exception), quiet_pymilvus():
            loop.run_until_complete(client.close())

    if TYPE_CHECKING:
        def close(self) -> None: ...


__all__ = ["MilvusConnection"]
