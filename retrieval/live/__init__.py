"""Live collections: attach READ-ONLY to a collection the user already runs, compute its exact
ground truth (the engine's exact path or a snapshot), read production queries, tune its
search-time knobs in place under a query budget, export and verify against it.

The entry point other code calls is :func:`attach` (the engine's own adapter does the work:
``retrieval/engines/<engine>/live.py``, registered as its descriptor's ``attach``). The contract
(:class:`~retrieval.indexes.live.LiveCollection`) lives in :mod:`retrieval.indexes.live`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.engine import all_engines
from retrieval.indexes.live import LiveCollection

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: Any, field: str, where: str | None = None) -> Any:
    """``${NAME}`` in every string of ``value`` (nested mappings and lists too) replaced by the
    environment's value; an unset name is one line naming the field (never the value)."""
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in os.environ:
                raise ConfigError(f"{where or 'spec'}: field '{field}' uses ${{{name}}}, which "
                                  f"is not set in the environment")
            return os.environ[name]
        return _ENV.sub(sub, value)
    if isinstance(value, Mapping):
        return {k: expand_env(v, f"{field}.{k}", where) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [expand_env(v, f"{field}[{i}]", where) for i, v in enumerate(value)]
    return value


def attachable_engines() -> tuple[str, ...]:
    """The engines whose descriptor has an ``attach`` hook."""
    return tuple(n for n, d in all_engines().items() if d.attach is not None)


def attach(section: Mapping[str, Any], where: str | None = None) -> LiveCollection:
    """A read-only handle on the collection the spec's ``live:`` ``section`` names (``${NAME}``
    expanded from the environment); the engine's adapter validates its own keys and refuses a
    missing collection / wrong column (ConfigError, exit 2) or an unreachable server
    (NotReachable, exit 3) before any other work."""
    if not isinstance(section, Mapping):
        raise param_error("live", "a mapping with 'engine' and the engine's keys", section,
                          where=where)
    engine = section.get("engine")
    engines = all_engines()
    can = attachable_engines()
    if not isinstance(engine, str) or engine not in engines or engines[engine].attach is None:
        raise param_error("live.engine", f"one of {', '.join(can)} (the engines rwb can attach "
                          "to)", engine, where=where)
    hook = engines[engine].attach
    assert hook is not None
    col: LiveCollection = hook(expand_env(dict(section), "live", where), where)
    return col


__all__ = ["attach", "attachable_engines", "expand_env"]
