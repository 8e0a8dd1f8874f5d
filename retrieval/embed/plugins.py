"""Third-party embedders by entry point: a package registers ``NAME = "pkg.module:factory"`` in
the ``rwb.embedders`` group; a spec then names ``model: "entry-point:NAME"`` and
:func:`retrieval.embed.get_embedder` calls ``factory()``, which returns an
:class:`~retrieval.embed.base.Embedder` (``model_id``, ``dim``, ``embed(texts, batch_size)``)."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from retrieval.errors import ConfigError

#: the entry-point group of third-party embedders (factory() -> Embedder)
ENTRY_POINT_GROUP = "rwb.embedders"
#: the prefix of a model string that names an entry point
PREFIX = "entry-point:"


def entry_point_name(model: object) -> str | None:
    """``NAME`` of a ``model`` string ``entry-point:NAME``; else None."""
    if isinstance(model, str) and model.startswith(PREFIX):
        return model[len(PREFIX):].strip() or None
    return None


def load_embedder(name: str) -> Any:
    """The embedder made by the ``rwb.embedders`` entry point ``name`` (ConfigError when it is
    not installed, fails to load, or does not make an embedder)."""
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    if name not in eps:
        have = ", ".join(sorted(eps)) or "none installed"
        raise ConfigError(f"embedder: entry point '{name}' is not in group {ENTRY_POINT_GROUP} "
                          f"({have})")
    try:
        made = eps[name].load()()
    except Exception as exc:
        raise ConfigError(f"embedder: entry point '{name}' ({eps[name].value}) failed: "
                          f"{type(exc).__name__}: {exc}") from None
    missing = [a for a in ("model_id", "dim", "embed") if not hasattr(made, a)]
    if missing:
        raise ConfigError(f"embedder: entry point '{name}' made a {type(made).__name__} "
                          f"without {', '.join(missing)}")
    return made


__all__ = ["ENTRY_POINT_GROUP", "PREFIX", "entry_point_name", "load_embedder"]
