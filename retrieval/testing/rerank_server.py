"""A local ``rerank`` endpoint for tests and examples (stdlib ``http.server`` on 127.0.0.1 in a
thread) speaking the Cohere / Jina request shape (``POST {query, documents, top_n}`` ->
``{"results": [{"index", "relevance_score"}]}``) and TEI's (``POST {query, texts}`` ->
``[{"index", "score"}]``), scored by :func:`overlap_scores` (word overlap; meaningless beyond
tests). ``fail_first`` answers the first N requests with HTTP 503 (retries are exercised);
``token`` requires ``Authorization: Bearer <token>`` (``echo_auth``: the 401 body echoes the
header received, as some endpoints do). ``trickle_s`` sends the answer one byte every
``trickle_s`` seconds (a slow endpoint that never stalls a socket read). ``max_in_flight``
records the most requests served at once (concurrency is bounded by the client)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORD = re.compile(r"\w+")


def overlap_scores(query: str, passages: Sequence[str]) -> list[float]:
    """Fraction of the query's distinct words found in each passage (0..1), a pointwise toy
    reranker importable as ``retrieval.testing.rerank_server:overlap_scores``."""
    q = {w.lower() for w in _WORD.findall(query)}
    out = []
    for p in passages:
        words = {w.lower() for w in _WORD.findall(p)}
        out.append(len(q & words) / max(1, len(q)))
    return out


class RerankServer:
    """``with RerankServer() as srv: srv.url``; see the module doc."""

    def __init__(self, *, fail_first: int = 0, token: str | None = None,
                 delay_s: float = 0.0, echo_auth: bool = False,
                 trickle_s: float = 0.0) -> None:
        self.fail_first = fail_first
        self.echo_auth = echo_auth
        self.trickle_s = trickle_s
        self.token = token
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.completed = 0  # trickled answers sent to the end
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/rerank"

    def __enter__(self) -> RerankServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        srv = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not srv.trickle_s:
                    self.wfile.write(data)
                    return
                try:
                    for i in range(len(data)):
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                        time.sleep(srv.trickle_s)
                except OSError:  # the client gave up (its deadline)
                    return
                with srv._lock:
                    srv.completed += 1

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                with srv._lock:
                    srv.requests.append(body)
                    fail = len(srv.requests) <= srv.fail_first
                    srv.in_flight += 1
                    srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
                try:
                    if srv.delay_s:
                        time.sleep(srv.delay_s)
                    if srv.token and self.headers.get("Authorization") != f"Bearer {srv.token}":
                        said = self.headers.get("Authorization") if srv.echo_auth else None
                        answer: tuple[int, Any] = (401, {"message": "invalid api token"
                                                         + (f": {said}" if said else "")})
                    elif fail:
                        answer = (503, {"message": "warming up"})
                    elif "texts" in body:  # TEI
                        s = overlap_scores(body["query"], body["texts"])
                        answer = (200, [{"index": i, "score": v} for i, v in enumerate(s)])
                    elif "documents" in body:  # Cohere / Jina
                        s = overlap_scores(body["query"], body["documents"])
                        order = sorted(range(len(s)), key=lambda i: -s[i])
                        top = order[: int(body.get("top_n") or len(s))]
                        answer = (200, {"results": [{"index": i, "relevance_score": s[i]}
                                                    for i in top]})
                    else:
                        answer = (422, {"message": "expected documents or texts"})
                finally:
                    # out of flight before the answer is written: a client that has read it may
                    # send its next request at once, and a descheduled server thread must not
                    # count this one beside it (max_in_flight over-counted under load)
                    with srv._lock:
                        srv.in_flight -= 1
                self._send(*answer)

        return Handler


__all__ = ["RerankServer", "overlap_scores"]
