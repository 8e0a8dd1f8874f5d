"""One error family for bad input.

Every message names where the problem is (file and/or field), what is allowed and what was
received, in the scikit-learn style. The CLI turns any :class:`RwbError` into a one-line message
and exit code 2 (3 for :class:`NotReachable`: an engine, a server or the data not reachable from
here); library callers can catch them by type.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class RwbError(Exception):
    """Base class of every user-facing error raised by rwb."""


class ConfigError(RwbError, ValueError):
    """A spec, parameter or option is invalid."""


class DataError(RwbError, ValueError):
    """A dataset is missing, corrupt or inconsistent."""


class BackendError(RwbError, RuntimeError):
    """A backend (library or server) is unavailable or failed."""


class NotReachable(BackendError):
    """An engine, a server or the data is not reachable from here (connection refused, no URL,
    credentials refused, a file gone). The CLI exits 3 ("not measurable here",
    docs/exit-codes.md); nothing was judged or changed."""


class DataNotFound(DataError, NotReachable):
    """A data file or folder the input names is not there (not found from here): a
    :class:`DataError` for callers, and :class:`NotReachable` for the CLI (exit 3, "not
    measurable here", docs/exit-codes.md), so a CI job without its data is told apart from an
    invalid file."""


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, built without ever making the whole text (a
    YAML alias bomb expands to hundreds of MB): nested containers are shown a few items deep."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 6, 6, 6, 6
    r.maxstring, r.maxother, r.maxlong = limit, limit, limit
    text = r.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short(value: Any, limit: int = 80) -> str:
    return short_repr(value, limit)


def param_error(
    field: str, allowed: str, received: Any, *, where: str | None = None
) -> ConfigError:
    """Build a ConfigError: ``<where>: field 'x' must be <allowed>; received <value>``."""
    prefix = f"{where}: " if where else ""
    return ConfigError(f"{prefix}field '{field}' must be {allowed}; received {_short(received)}")


def unknown_name_error(
    kind: str, name: str, known: Iterable[str], *, where: str | None = None
) -> ConfigError:
    """ConfigError for an unknown name, suggesting the closest known one."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    if not close:  # 'm' for 'M', 'ef' for 'ef_search': case-insensitive, then a unique prefix
        lower = {k.lower(): k for k in known}
        close = [lower[c] for c in difflib.get_close_matches(name.lower(), lower, n=1, cutoff=0.5)]
    if not close and name:
        close = [k for k in known if k.lower().startswith(name.lower())][:2]
        close = close if len(close) == 1 else []
    hint = f" Did you mean '{close[0]}'?" if close else ""
    prefix = f"{where}: " if where else ""
    return ConfigError(f"{prefix}unknown {kind} '{name}'; allowed: {', '.join(known)}.{hint}")
