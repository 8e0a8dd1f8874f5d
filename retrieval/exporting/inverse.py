"""From an exported engine config back to the rwb backend that runs it: one inverse per engine.

``rwb verify`` builds what the file's ``config`` says (never the ``source:`` block's params), so
each inverse reads only the engine's own names, validates them against the engine's rules (an
edit outside the limits is one line naming ``config.<field>``) and returns the backend with its
build and search params. Each engine's inverse is its descriptor's ``from_native``
(:mod:`retrieval.indexes.engine`); an engine with none (export only) is "not measurable here".
"""

from __future__ import annotations

from retrieval.indexes.engine import all_engines
from retrieval.indexes.portable import Inverse, PortableReader, Rebuilt

#: engine -> inverse, for every engine rwb can run
INVERSES: dict[str, Inverse] = {
    n: d.from_native for n, d in all_engines().items() if d.from_native is not None}
#: engine -> its config in neutral terms, for engines rwb cannot run (``--engine`` transfers)
PORTABLE_READERS: dict[str, PortableReader] = {
    n: d.portable_reader for n, d in all_engines().items() if d.portable_reader is not None}


def inverse_for(engine: str) -> Inverse | None:
    """The inverse of ``engine``, or None when rwb cannot run that engine (not measurable)."""
    return INVERSES.get(engine)


__all__ = ["INVERSES", "PORTABLE_READERS", "Inverse", "Rebuilt", "inverse_for"]
