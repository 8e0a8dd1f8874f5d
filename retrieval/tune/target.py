"""Target search on a monotone knob (galloping + bisection): the code lives in
:mod:`retrieval.stats.monotone`, where the rerank quality target (:mod:`retrieval.rerank.quality`)
reaches it too; this module keeps the name every sweep imports."""

from retrieval.stats.monotone import (
    Bracket,
    Outcome,
    answer,
    bracket,
    budget,
    clog2,
    next_probe,
    solve,
)

__all__ = ["Bracket", "Outcome", "answer", "bracket", "budget", "clog2", "next_probe", "solve"]
