"""Conformance suite every index backend must pass (shipped in the library, like optuna's
storage tests), so a new adapter is checked the same way as the built-in ones.

Three ways to use it:

- one call: ``run_conformance("hnswlib", build={"M": 16})`` runs every check and returns a
  :class:`ConformanceReport` (raises ``AssertionError`` on the first failure);
- one check at a time: ``suite = Conformance(ConformanceCase("faiss-ivf", build={"nlist": 32}))``
  then ``suite.run("monotone_knobs")`` (``CHECKS`` lists the names; pytest can parametrize on
  them), and ``suite.close()`` at the end;
- a pytest class: ``class TestMine(BackendConformance): case = ConformanceCase("mine")`` gives
  one test per check (no fixtures needed; ``case.skip`` names checks to skip).

A check that does not apply to a backend (``deterministic_build`` on an unseeded build,
``snapshot_round_trip`` without a snapshot format) raises :class:`CheckNotApplicable`;
:func:`run_or_skip` and :class:`BackendConformance` make it a pytest skip with the reason, and
:func:`run_conformance` lists it in ``ConformanceReport.not_applicable``.

The dataset is :func:`retrieval.loaders.synthetic.make_synthetic` (3000 x 32, 100 queries,
overlapping clusters (``cluster_spread=3``) so that every knob visibly moves recall); the exact
neighbours are computed here with Faiss ``IndexFlat`` (rwb distance convention, cosine on
normalised vectors). Recall is the id-intersection recall@k (not the tie-aware variant), mean
over queries.

Modules: :mod:`.kit` (the case, the report, exact neighbours and the assertion helpers),
:mod:`.suite` (:class:`Conformance`, the checks), :mod:`.harness` (:class:`BackendConformance`
for pytest, :func:`run_conformance`). Every public name is importable from here.
"""

from retrieval.testing.conformance.harness import (
    BackendConformance,
    run_conformance,
    run_or_skip,
)
from retrieval.testing.conformance.kit import (
    CHECKS,
    CheckNotApplicable,
    ConformanceCase,
    ConformanceReport,
    engine_cases,
    exact_neighbours,
    true_distances,
)
from retrieval.testing.conformance.suite import Conformance

__all__ = [
    "CHECKS",
    "BackendConformance",
    "CheckNotApplicable",
    "Conformance",
    "ConformanceCase",
    "ConformanceReport",
    "engine_cases",
    "exact_neighbours",
    "run_conformance",
    "run_or_skip",
    "true_distances",
]
