"""Bring your own reranker: a Python callable, an HTTP ``rerank`` endpoint, or an entry point.

- :class:`CallableReranker`: any ``fn(query, passages) -> scores`` (or an object with a
  ``score(query, passages)`` method). A run records it by import path ``module:qualname``
  (:func:`callable_path`), which is how ``rwb verify`` finds it again (:func:`import_callable`);
  a lambda or a local function has no import path: pass it to ``retrieval.verify(...,
  reranker=fn)``.
- :class:`HttpReranker`: the ``rerank`` request most hosted and self-hosted rerankers speak.
  ``shape: cohere`` (Cohere, Jina, vLLM, Infinity): ``POST {model, query, documents, top_n}`` ->
  ``{"results": [{"index", "relevance_score"}]}``; ``shape: tei`` (Hugging Face Text Embeddings
  Inference): ``POST {query, texts}`` -> ``[{"index", "score"}]``. Either response form is read
  whatever the shape. A call is split into requests of at most ``max_documents`` passages sent
  over at most ``concurrency`` threads (one bound per reranker, however many callers); each
  request has a ``timeout_s`` and is retried ``retries`` times on a connection error, a timeout,
  HTTP 429 or 5xx (exponential back-off from ``backoff_s``, ``Retry-After`` honoured up to 10 s).
  The key comes from the environment variable named by ``key_env`` (sent as ``Authorization:
  Bearer``) and is never recorded; credentials inside the URL are redacted from run files and
  exports (:mod:`retrieval.redact`), so a URL carrying them cannot be verified from the export.
- entry points: a third-party package registers ``name = "pkg.module:factory"`` in the
  ``rwb.rerankers`` group; ``reranker: {kind: entry-point, name: NAME, options: {...}}`` calls
  ``factory(**options)`` and uses what it returns (a reranker object or a callable).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from retrieval.errors import BackendError, ConfigError
from retrieval.redact import redact_error, redact_uri, register_secret

log = logging.getLogger(__name__)

#: the entry-point group of third-party rerankers (factory(**options) -> reranker or callable)
ENTRY_POINT_GROUP = "rwb.rerankers"
SHAPES = ("cohere", "jina", "tei")
_RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_MAX_RETRY_AFTER_S = 10.0

ScoreFn = Callable[[str, Sequence[str]], Any]


def callable_path(fn: Any) -> str | None:
    """``module:qualname`` of ``fn`` when importing that path gives back ``fn``; else None
    (a lambda, a local function, an instance)."""
    module = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None)
    if not module or not qual or "<" in qual or module == "__main__":
        return None
    try:
        found = import_callable(f"{module}:{qual}")
    except ConfigError:
        return None
    return f"{module}:{qual}" if found is fn else None


def import_callable(path: str, where: str = "reranker.callable") -> Any:
    """The object at ``module:attr.attr`` (ConfigError naming ``where`` when it is not)."""
    module_name, sep, attrs = path.partition(":")
    if not sep or not module_name or not attrs:
        raise ConfigError(f"{where}: expected an import path 'module:function'; received "
                          f"{path!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attrs.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{where}: cannot import {path!r} ({type(exc).__name__}: {exc}); "
                          f"it must be importable where rwb runs") from None
    if not callable(obj) and not hasattr(obj, "score"):
        raise ConfigError(f"{where}: {path!r} is not callable")
    return obj


class CallableReranker:
    """``fn(query, passages) -> scores`` as a :class:`~retrieval.rerank.rerankers.Reranker`
    (an object with ``score`` is called through it). Pointwise scores are the caller's
    promise: the depth sweep scores once at the largest depth."""

    def __init__(self, fn: Any, label: str | None = None) -> None:
        if not callable(fn) and not callable(getattr(fn, "score", None)):
            raise ConfigError(f"reranker: expected a callable (query, passages) -> scores or "
                              f"an object with score(); received {type(fn).__name__}")
        self.fn = fn
        self.label = label or callable_path(fn) or getattr(fn, "name", None) or repr(fn)

    @property
    def name(self) -> str:
        return f"callable:{self.label}"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        call = getattr(self.fn, "score", None)
        out = call(query, list(passages)) if callable(call) else self.fn(query, list(passages))
        return np.asarray(out, dtype=np.float64).reshape(-1)


class HttpReranker:
    """A ``rerank`` endpoint (Cohere / Jina / TEI request shape); see the module doc. Units:
    ``timeout_s`` and ``backoff_s`` seconds; ``max_documents`` passages per request."""

    def __init__(self, url: str, *, shape: str = "cohere", model: str | None = None,
                 key_env: str | None = None, timeout_s: float = 30.0, retries: int = 3,
                 backoff_s: float = 0.5, concurrency: int = 4, max_documents: int = 100,
                 environ: dict[str, str] | None = None) -> None:
        import os

        if "***" in url:
            raise ConfigError(f"reranker.url {redact_uri(url)}: its credentials were redacted "
                              f"when recorded; put the key in an environment variable named by "
                              f"reranker.key_env instead of the URL")
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"reranker.url: expected an http:// or https:// URL; received "
                              f"{redact_uri(url)!r}")
        if shape not in SHAPES:
            raise ConfigError(f"reranker.shape: expected one of {', '.join(SHAPES)}; received "
                              f"{shape!r}")
        env = os.environ if environ is None else environ
        self.key: str | None = None
        if key_env:
            self.key = env.get(key_env)
            if not self.key:
                raise ConfigError(f"reranker.key_env: environment variable {key_env} is not set")
            register_secret(self.key)  # masked in every output, whatever the variable's name
        self.url, self.shape, self.model = url, shape, model
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.concurrency, self.max_documents = max(1, concurrency), max(1, max_documents)
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self.requests = 0  # sent, retries included (for tests and logs)
        self._count_lock = threading.Lock()

    @property
    def name(self) -> str:
        model = f" model={self.model}" if self.model else ""
        return f"http:{redact_uri(self.url)} ({self.shape}{model})"

    def _body(self, query: str, docs: Sequence[str]) -> dict[str, Any]:
        if self.shape == "tei":
            return {"query": query, "texts": list(docs), "raw_scores": False}
        body: dict[str, Any] = {"query": query, "documents": list(docs), "top_n": len(docs),
                                "return_documents": False}
        if self.model:
            body["model"] = self.model
        return body

    def _post(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        last = ""
        for attempt in range(self.retries + 1):
            wait = self.backoff_s * (2 ** attempt)
            with self._count_lock:
                self.requests += 1
            started = time.monotonic()
            try:
                req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
                with self._slots, urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return json.loads(self._read_by_deadline(resp, started).decode() or "null")
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
                if exc.code not in _RETRY_STATUS:
                    detail = exc.read().decode(errors="replace")[:200]
                    raise BackendError(f"reranker {self.name}: {last}: "
                                       f"{redact_error(detail, self.url)}") from None
                after = exc.headers.get("Retry-After") if exc.headers else None
                if after:
                    with contextlib.suppress(ValueError):
                        wait = min(float(after), _MAX_RETRY_AFTER_S)
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                last = redact_error(getattr(exc, "reason", exc), self.url)
            except json.JSONDecodeError as exc:
                raise BackendError(f"reranker {self.name}: the response is not JSON: "
                                   f"{exc}") from None
            if attempt < self.retries:
                log.info("reranker %s: %s; retry %d/%d in %.2f s", self.name, last,
                         attempt + 1, self.retries, wait)
                time.sleep(wait)
        raise BackendError(f"reranker {self.name}: {last} after {self.retries + 1} attempts "
                           f"(timeout {self.timeout_s} s each)")

    def _read_by_deadline(self, resp: Any, started: float) -> bytes:
        """The response body, read in pieces: ``timeout_s`` is a deadline for the whole request
        (``started``: time.monotonic() before it was sent), so an endpoint trickling a byte at a
        time is timed out too (TimeoutError, retried like any timeout)."""
        parts: list[bytes] = []
        while True:
            left = self.timeout_s - (time.monotonic() - started)
            if left <= 0:
                raise TimeoutError(f"no complete answer within {self.timeout_s} s")
            with contextlib.suppress(AttributeError, OSError):
                resp.fp.raw._sock.settimeout(left)  # the socket read waits no longer
            piece = resp.read1(65536)
            if not piece:
                return b"".join(parts)
            parts.append(piece)

    def _parse(self, out: Any, n: int) -> np.ndarray:
        rows = out.get("results", out.get("data")) if isinstance(out, dict) else out
        if not isinstance(rows, list):
            raise BackendError(f"reranker {self.name}: expected a list of {{index, score}} or "
                               f"{{\"results\": [...]}}; received {type(out).__name__}")
        scores = np.full(n, np.nan, dtype=np.float64)
        for row in rows:
            try:
                raw = row["index"]
                s = row["relevance_score"] if "relevance_score" in row else row["score"]
                if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw < n:
                    raise IndexError(raw)
                value = float(s)
            except (KeyError, TypeError, ValueError, IndexError):
                raise BackendError(f"reranker {self.name}: a result row lacks an index in "
                                   f"[0, {n}) and a relevance_score/score: "
                                   f"{str(row)[:120]}") from None
            if not np.isfinite(value):
                raise BackendError(f"reranker {self.name}: passage {raw} got the score "
                                   f"{value!r}; expected a finite number")
            if not np.isnan(scores[raw]):
                raise BackendError(f"reranker {self.name}: passage {raw} is scored twice in "
                                   f"one answer")
            scores[raw] = value
        if np.isnan(scores).any():
            raise BackendError(f"reranker {self.name}: {int(np.isnan(scores).sum())} of {n} "
                               f"passages got no score (top_n too small?)")
        return scores

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        docs = list(passages)
        if not docs:
            return np.empty(0, dtype=np.float64)
        chunks = [docs[i:i + self.max_documents]
                  for i in range(0, len(docs), self.max_documents)]

        def one(chunk: list[str]) -> np.ndarray:
            return self._parse(self._post(self._body(query, chunk)), len(chunk))

        if len(chunks) == 1:
            return one(chunks[0])
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(chunks))) as pool:
            return np.concatenate(list(pool.map(one, chunks)))


def entry_point_factory(name: str, group: str = ENTRY_POINT_GROUP) -> Any:
    """The object an installed package registered as ``name`` in ``group``."""
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group=group)}
    if name not in eps:
        have = ", ".join(sorted(eps)) or "none installed"
        raise ConfigError(f"entry point '{name}' is not in group {group} ({have})")
    try:
        return eps[name].load()
    except Exception as exc:
        raise ConfigError(f"entry point '{name}' ({eps[name].value}) failed to load: "
                          f"{type(exc).__name__}: {exc}") from None


def entry_point_reranker(name: str, options: dict[str, Any] | None = None) -> Any:
    """``factory(**options)`` of the ``rwb.rerankers`` entry point ``name``, as a reranker."""
    made = entry_point_factory(name)(**(options or {}))
    if callable(getattr(made, "score", None)) and hasattr(made, "name"):
        return made
    return CallableReranker(made, label=f"entry-point:{name}")


def make_custom_reranker(spec: Any, obj: Any = None) -> tuple[Any, dict[str, Any]]:
    """(reranker, description) for a ``callable`` / ``http`` / ``entry-point`` RerankerSpec.
    ``obj``: the callable given to the API (wins over ``spec.callable``)."""
    if spec.kind == "callable":
        fn = obj if obj is not None else (
            import_callable(spec.callable) if spec.callable else None)
        if fn is None:
            raise ConfigError("reranker: kind 'callable' needs 'callable: module:function' (or "
                              "the callable passed to the Python API as reranker=)")
        rr = CallableReranker(fn, label=spec.callable)
        return rr, {"kind": "callable", "name": rr.name, "callable": spec.callable or None}
    if spec.kind == "http":
        hr = HttpReranker(spec.url, shape=spec.shape, model=spec.model, key_env=spec.key_env,
                          timeout_s=spec.timeout_s, retries=spec.retries,
                          concurrency=spec.concurrency, max_documents=spec.max_documents)
        return hr, {"kind": "http", "name": hr.name, "url": redact_uri(spec.url),
                    "shape": spec.shape}
    if spec.kind == "entry-point":
        ep = entry_point_reranker(spec.name, spec.options)
        return ep, {"kind": "entry-point", "name": f"entry-point:{spec.name}"}
    raise ConfigError(f"reranker.kind {spec.kind!r} is not a custom kind")


__all__ = [
    "ENTRY_POINT_GROUP",
    "SHAPES",
    "CallableReranker",
    "HttpReranker",
    "callable_path",
    "entry_point_factory",
    "entry_point_reranker",
    "import_callable",
    "make_custom_reranker",
]
