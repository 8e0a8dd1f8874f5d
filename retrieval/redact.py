"""Keep secrets out of everything rwb writes: URIs and connection strings lose their credentials,
sensitive keys and the values of secret environment variables are removed.

The one redaction policy of rwb (every module that shows or records a URL, a DSN, an error or a
run file goes through it): :func:`mask` for run files (manifest, summary, spec.yaml, study user
attrs; keys are kept), :func:`redact_argv` for the command line, :func:`scrub` for exported
files (sensitive keys removed), :func:`redact_uri` / :func:`redact_text` for what is shown, and
:func:`redact_error` for a client's error about a connection string.

The rules:

- **Names** (mapping keys, environment variables, options, DSN and query keys) are split into
  words (``auth_token``, ``apiKey``, ``RWB_MILVUS_TOKEN``); a whole word from
  :data:`SENSITIVE_WORDS`, a word ending in ``password`` / ``passwd`` / ``passphrase``
  (``sslpassword``, ``PGPASSWORD``), a credential ``pass`` (``DB_PASS``) or a pair such as
  ``api key`` makes it sensitive. Words are matched whole, never as a substring of a name or a
  value: ``tokenizers``, ``OLDPWD`` and a path holding ``pwd`` are not secrets.
- **Environment variables** whose value is masked wherever it appears: a sensitive name, except
  the shell's ``PWD`` / ``OLDPWD`` (the current and previous directory), names whose only
  sensitive word is ``session`` (``XDG_SESSION_CLASS=user``, ``DBUS_SESSION_BUS_ADDRESS``) and
  values that are an existing absolute path (``SSH_AUTH_SOCK``: a place, not a secret) or
  shorter than 4 characters.
- **URIs**: the user information is read the way each client reads it, and the widest reading
  wins: SQLAlchemy ``make_url`` and libpq take the password up to the *first* ``@`` (so ``#``,
  ``/``, ``'`` belong to it), urllib / redis-py / pymilvus take the userinfo up to the *last*
  ``@`` of the netloc. A sensitive query value (``?password=``, ``?sslpassword=``) is masked up
  to the next ``&`` (libpq does not end it at ``#``).
- **libpq key=value DSNs** (``host=h password='a b' dbname=d``): the value of each sensitive key,
  quoted or not, as psycopg's ``conninfo_to_dict`` reads it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

#: words that make a key (or an environment variable name) sensitive
SENSITIVE_WORDS = frozenset(
    {"password", "passwd", "pwd", "passphrase", "secret", "secrets", "token", "tokens", "apikey",
     "credential", "credentials", "auth", "cookie", "session"}
)
#: a word ending in one of these is sensitive too (``sslpassword``, ``pgpassword``)
_SENSITIVE_SUFFIXES = ("password", "passwd", "passphrase")
#: words that make a bare "pass" a credential (``db_pass``), not a processing pass
_PASS_CONTEXT = frozenset({"db", "user", "admin", "root", "redis", "pg", "postgres", "mysql",
                           "login", "smtp", "ftp", "basic", "http", "proxy", "app", "account"})
_PAIRS = {("api", "key"), ("private", "key"), ("access", "key")}
#: environment variables of the shell whose names hold a sensitive word but whose values are not
#: secrets (the current and the previous directory)
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})
#: sensitive words that do not make an environment variable secret (XDG_SESSION_CLASS=user)
_ENV_ONLY_WORDS = frozenset({"session"})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
REDACTED = "***"
#: a secret value shorter than this is not searched for in free text (it would mask words)
_MIN_SECRET = 4


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(name)]


def _sensitive_words(words: list[str], ignore: frozenset[str] = frozenset()) -> bool:
    if any(w in SENSITIVE_WORDS and w not in ignore for w in words):
        return True
    if any(w.endswith(_SENSITIVE_SUFFIXES) for w in words):
        return True
    if "pass" in words and (len(words) == 1 or any(w in _PASS_CONTEXT for w in words)):
        return True  # PASS, DB_PASS, redis_pass; not a processing pass (quality_pass)
    return any(pair in _PAIRS for pair in itertools.pairwise(words))


def is_sensitive(name: str) -> bool:
    """Whether a key or variable name denotes a secret (``password``, ``auth_token``,
    ``apiKey``, ``RWB_MILVUS_TOKEN``, ``sslpassword``; not ``tokenizers`` or ``OLDPWD``)."""
    return _sensitive_words(_words(name))


def is_secret_env(name: str, value: str) -> bool:
    """Whether environment variable ``name`` holds a secret whose ``value`` must be masked
    wherever it appears (see the module doc: not ``PWD``, ``XDG_SESSION_*``, paths)."""
    if name in _NOT_SECRET_ENV or len(value) < _MIN_SECRET:
        return False
    if not _sensitive_words(_words(name), ignore=_ENV_ONLY_WORDS):
        return False
    return not (os.path.isabs(value) and os.path.exists(value))


#: secrets rwb itself sends (an API key read from a variable of any name), masked everywhere
_IN_USE: set[str] = set()


def register_secret(value: str | None) -> None:
    """Mask ``value`` wherever it appears from now on, whatever the name of the variable it
    came from (e.g. the HTTP reranker's key read from ``key_env: COHERE_KEY``)."""
    if value and len(value) >= _MIN_SECRET:
        _IN_USE.add(value)


class SecretFilter:
    """A :mod:`logging` filter masking secrets (:func:`redact_text`) in every record's message;
    the CLI installs it on its log handlers."""

    def filter(self, record: Any) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record: leave it to logging
            return True
        clean = redact_text(text)
        if clean != text:
            record.msg, record.args = clean, None
        return True


def _secret_values() -> list[str]:
    """Values of environment variables that hold secrets (:func:`is_secret_env`) and the
    secrets rwb sends (:func:`register_secret`)."""
    found = [v for k, v in os.environ.items() if is_secret_env(k, v)]
    return [*found, *(v for v in _IN_USE if v not in found)]


# --------------------------------------------------------------------------- URIs

_SCHEME = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://")
#: SQLAlchemy / libpq: user (no ':' or '/'), then ':' and a password up to the first '@'; in
#: free text a URI ends at white space, a whole string may hold some in its password
_USERINFO_FIRST_AT = {False: re.compile(r"[^:/@\s]*(?::[^@\s]*)?@"),
                      True: re.compile(r"[^:/@]*(?::[^@]*)?@")}
_NETLOC = {False: re.compile(r"[^/?#\s]*"), True: re.compile(r"[^/?#]*")}


def _userinfo_end(body: str, whole: bool = False) -> int:
    """Index of the ``@`` that ends the user information of ``body`` (a URI after ``://``; the
    whole string: ``whole``) in the widest reading of the clients (see the module doc); -1 when
    there is none."""
    ends = []
    m = _USERINFO_FIRST_AT[whole].match(body)
    if m:
        ends.append(m.end() - 1)
    netloc = _NETLOC[whole].match(body)
    if netloc and "@" in netloc.group(0):
        ends.append(netloc.group(0).rindex("@"))
    return max(ends, default=-1)


def _mask_query(rest: str) -> str:
    """``rest`` (host, path, query) with the value of each sensitive query key masked up to the
    next ``&`` or the end (a ``#`` does not end it: libpq reads it as part of the value)."""
    q = rest.find("?")
    if q < 0:
        return rest
    head, query = rest[: q + 1], rest[q + 1:]
    parts = query.split("&")
    out: list[str] = []
    masking = False
    for part in parts:
        key, eq, _value = part.partition("=")
        if masking and not eq:  # '&' inside the value (password=Pl4nt&edS3c): still the value
            continue
        masking = bool(eq) and is_sensitive(unquote(key))
        out.append(f"{key}={REDACTED}" if masking else part)
    return head + "&".join(out)


def _redact_body(body: str, whole: bool = False) -> str:
    """A URI after its ``scheme://`` with the credentials masked (``whole``: the URI is a whole
    string, not a token in free text)."""
    end = _userinfo_end(body, whole)
    if end >= 0:
        return f"{REDACTED}@{_mask_query(body[end + 1:])}"
    return _mask_query(body)


# --------------------------------------------------------------------------- DSNs and text

#: ``key=value`` (libpq conninfo, a query string, ``--token=x``): the value quoted ('...' with
#: backslash escapes) or up to the next white space or ``&``
_KEY_VALUE = re.compile(
    r"(?<![\w.\-])(?P<key>[A-Za-z_][\w.\-]*)(?P<sep>\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*(?:'|$)|(?:[^\s\\&]|\\.)*)"
)
#: ``"key": "value"`` / ``'key': 'value'`` (a mapping shown as text)
_QUOTED_KEY = re.compile(
    r"(?P<q>[\"'])(?P<key>[A-Za-z_][\w.\-]*)(?P=q)(?P<sep>\s*:\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
)
_UNQUOTED_REST = re.compile(r"(?:[^\s\\]|\\.)*")
#: free text ``password: X`` (a YAML-like line, a log message): the value up to white space
_COLON_KEY = re.compile(
    r"(?<![\w.\-'\"])(?P<key>[A-Za-z_][\w.\-]*)(?P<sep>:[ \t]+)(?P<value>[^\s'\"]+)"
)


def _sensitive_values(text: str) -> list[tuple[int, int]]:
    """(start, end) of the value of each sensitive ``key=value`` / ``"key": "value"`` in
    ``text``; an unquoted sensitive value runs to the next white space (a libpq password may
    hold ``&``)."""
    spans = []
    for pattern in (_KEY_VALUE, _QUOTED_KEY, _COLON_KEY):
        for m in pattern.finditer(text):
            if not is_sensitive(m.group("key")):
                continue
            start, end = m.span("value")
            value = m.group("value")
            if value[:1] in ("'", '"'):
                start, end = start + 1, end - (1 if len(value) > 1 and value[-1] == value[0]
                                               else 0)
            else:
                rest = _UNQUOTED_REST.match(text, start)
                end = rest.end() if rest else end
            if end > start:
                spans.append((start, end))
    return spans


def _mask_pairs(text: str) -> str:
    """``text`` (no URI in it) with the value of each sensitive ``key=value`` / ``"key":
    "value"`` masked."""
    out, pos = [], 0
    for start, end in sorted(_sensitive_values(text)):
        if start < pos:
            continue
        out += [text[pos:start], REDACTED]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _redact_structure(text: str) -> str:
    """``text`` with every URI's credentials and every sensitive ``key=value`` masked (a URI
    runs to the next white space)."""
    out: list[str] = []
    pos = 0
    for m in _SCHEME.finditer(text):
        if m.start() < pos:
            continue
        out.append(_mask_pairs(text[pos:m.start()]))
        end = re.compile(r"\S*").match(text, m.end())
        stop = end.end() if end else m.end()
        out.append(m.group(0) + _redact_body(text[m.end():stop]))
        pos = stop
    out.append(_mask_pairs(text[pos:]))
    return "".join(out)


def _replace_secrets(text: str, secrets: Iterable[str]) -> str:
    for s in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(s, REDACTED)
    return text


def url_secrets(value: str) -> list[str]:
    """The passwords in ``value`` (a URI or a libpq DSN) as each client reads them (SQLAlchemy
    ``make_url``, psycopg ``conninfo_to_dict``, redis-py ``parse_url``, urllib), with their
    %-encoded and decoded spellings and their pieces between URL-special characters (a client's
    error may show a piece: redis-py's "Port could not be cast ... 'PW'"); pieces shorter than
    4 characters are left out."""
    found: set[str] = set()
    if "://" in value:
        body = value.split("://", 1)[1]
        end = _userinfo_end(body, whole=True)
        if end >= 0:  # the password of the widest reading (the user is no secret)
            found.add(body[:end].partition(":")[2])
        with contextlib.suppress(ValueError):
            found.add(unquote(urlsplit(value).password or ""))
        try:
            from sqlalchemy.engine import make_url

            found.add(str(make_url(value).password or ""))
        except Exception:
            pass
        if value.startswith(("redis://", "rediss://", "unix://")):
            try:
                from redis.connection import parse_url

                found.add(str(parse_url(value).get("password") or ""))
            except Exception:
                pass
    if "://" not in value or value.startswith(("postgresql://", "postgres://")):
        try:
            from psycopg.conninfo import conninfo_to_dict

            info = conninfo_to_dict(value)
            found.update(str(v) for k, v in info.items() if is_sensitive(k) and v)
        except Exception:
            pass
    for start, end in _sensitive_values(value):  # DSN values, query values
        raw = value[start:end]
        found.update({raw, re.sub(r"\\(.)", r"\1", raw)})
    spellings = set()
    for s in found:
        spellings.update({s, unquote(s), quote(s, safe=""), quote(s)})
        spellings.update([*s.split("&"), *re.split(r"[#/?@'&%:\s]", s)])
    return sorted((s for s in spellings if len(s) >= _MIN_SECRET), key=len, reverse=True)


def redact_uri(uri: str) -> str:
    """``uri`` (a whole URI, or a libpq ``key=value`` DSN) with user/password replaced by
    ``***`` and sensitive query / DSN values masked; other strings come back unchanged (but
    for any URI or sensitive ``key=value`` inside them)."""
    m = _SCHEME.match(uri)
    if m:  # the whole string is the URI (white space in a password included)
        return m.group(0) + _redact_body(uri[m.end():], whole=True)
    return _redact_structure(uri)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """Mask URIs' credentials, sensitive ``key=value`` values and any known secret value
    (default: the secret environment values) inside free text."""
    out = _redact_structure(text)
    return _replace_secrets(out, _secret_values() if secrets is None else secrets)


def redact_error(error: BaseException | str, *sources: str | None) -> str:
    """The first line of a client's ``error`` about ``sources`` (URIs / DSNs it was given), safe
    to show: structure masked (:func:`redact_text`) and every password of the sources, in each
    client's reading and spelling (:func:`url_secrets`), removed."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    secrets = [*_secret_values(), *(s for src in sources if src for s in url_secrets(src))]
    return redact_text(line, secrets)


# --------------------------------------------------------------------------- structures


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
    """A command line safe to record: every argument through :func:`redact_uri` (a URI or DSN
    argument loses its credentials, a password with white space included) and the secret
    environment values, the value of a secret-named option (``--password X``, ``--token=X``)
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
        out.append(redact_text(redact_uri(arg), _secret_values()))
    return out
