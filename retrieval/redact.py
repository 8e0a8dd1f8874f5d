"""Keep secrets out of everything rwb writes: URIs lose their credentials, sensitive keys and the
values of secret-looking environment variables are removed.

The one policy for everything rwb records: :func:`mask` for run files (manifest, summary,
spec.yaml, study user attrs; keys are kept), :func:`redact_argv` for the command line, and
:func:`scrub` for exported files (sensitive keys removed).
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
    {"password", "passwd", "pwd", "passphrase", "secret", "secrets", "token", "tokens", "apikey",
     "credential", "credentials", "auth", "cookie", "session"}
)
#: words that make a bare "pass" a credential (``db_pass``), not a processing pass
_PASS_CONTEXT = frozenset({"db", "user", "admin", "root", "redis", "pg", "postgres", "mysql",
                           "login", "smtp", "ftp", "basic", "http", "proxy", "app", "account"})
_PAIRS = {("api", "key"), ("private", "key"), ("access", "key")}
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
REDACTED = "***"


def is_sensitive(name: str) -> bool:
    """Whether a key or variable name denotes a secret (``password``, ``auth_token``,
    ``apiKey``, ``RWB_MILVUS_TOKEN``; not ``tokenizers``)."""
    words = [w.lower() for w in _WORD.findall(name)]
    if any(w in SENSITIVE_WORDS for w in words):
        return True
    if "pass" in words and (len(words) == 1 or any(w in _PASS_CONTEXT for w in words)):
        return True  # PASS, DB_PASS, redis_pass; not a processing pass (quality_pass)
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


def mask(obj: Any, secrets: list[str] | None = None) -> Any:
    """A copy of ``obj`` (JSON-like data) safe to record in a run: strings lose URI credentials
    and secret environment values; a string under a sensitive key becomes ``***``. Unlike
    :func:`scrub`, every key is kept (a count named ``tokens`` stays a count)."""
    secrets = _secret_values() if secrets is None else secrets
    if isinstance(obj, Mapping):
        return {
            k: REDACTED if isinstance(k, str) and is_sensitive(k) and isinstance(v, str) and v
            else mask(v, secrets)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [mask(v, secrets) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    return obj


def _secret_option(arg: str) -> bool:
    """``--password``, ``--api-key``, ``-token``: an option whose name denotes a secret."""
    return arg.startswith("-") and len(arg) > 1 and is_sensitive(arg.lstrip("-"))


def redact_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    """A command line safe to record: every argument through :func:`redact_text` (URIs lose
    credentials), the value of a secret-named option (``--password X``, ``--token=X``)
    replaced by ``***``."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _value = arg.partition("=")
        if _secret_option(name):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact_text(arg))
    return out
