"""Keep secrets out of everything rwb writes: URIs lose their credentials, sensitive keys and the
values of secret-looking environment variables are removed.

Used by the sweep (storage URLs in summary.json) and by export (every exported file).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: words that make a key (or an environment variable name) sensitive
SENSITIVE_WORDS = frozenset(
    {"password", "passwd", "pass", "pwd", "secret", "secrets", "token", "tokens", "apikey",
     "credential", "credentials", "auth", "cookie", "session"}
)
_PAIRS = {("api", "key"), ("private", "key"), ("access", "key")}
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
REDACTED = "***"


def is_sensitive(name: str) -> bool:
    """Whether a key or variable name denotes a secret (``password``, ``auth_token``,
    ``apiKey``, ``RWB_MILVUS_TOKEN``; not ``tokenizers``)."""
    words = [w.lower() for w in _WORD.findall(name)]
    if any(w in SENSITIVE_WORDS for w in words):
        return True
    return any(pair in _PAIRS for pair in itertools.pairwise(words))


_URI = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>]+")


def redact_uri(uri: str) -> str:
    """``uri`` with user/password replaced by ``***`` and sensitive query values masked;
    strings that are not URIs come back unchanged."""
    if "://" not in uri:
        return uri
    try:
        parts = urlsplit(uri)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    sensitive_query = any(is_sensitive(k) for k, _ in parse_qsl(parts.query))
    if "@" not in netloc and not sensitive_query:
        return uri
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, REDACTED if is_sensitive(k) else v) for k, v in pairs], safe="*"
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secret_values() -> list[str]:
    """Values of environment variables whose names look secret (long enough to matter)."""
    return [
        v for k, v in os.environ.items() if is_sensitive(k) and v and len(v) >= 4
    ]


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """Mask URIs' credentials and any known secret value inside free text."""
    out = _URI.sub(lambda m: redact_uri(m.group(0)), text)
    for s in _secret_values() if secrets is None else secrets:
        out = out.replace(s, REDACTED)
    return out


def scrub(obj: Any, secrets: list[str] | None = None) -> Any:
    """A copy of ``obj`` (JSON-like data) without sensitive keys, URI credentials or secret
    environment values."""
    secrets = _secret_values() if secrets is None else secrets
    if isinstance(obj, Mapping):
        return {
            k: scrub(v, secrets)
            for k, v in obj.items()
            if not (isinstance(k, str) and is_sensitive(k))
        }
    if isinstance(obj, list | tuple):
        return [scrub(v, secrets) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    return obj
