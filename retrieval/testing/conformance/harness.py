"""Two ways to run the whole suite: :class:`BackendConformance` (a pytest class, one test per
check) and :func:`run_conformance` (one call)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from retrieval.data import Metric
from retrieval.testing.conformance.kit import (
    CheckNotApplicable,
    ConformanceCase,
    ConformanceReport,
)
from retrieval.testing.conformance.suite import Conformance


class BackendConformance:
    """Subclass as ``class TestX(BackendConformance): case = ConformanceCase(...)`` and pytest
    runs one test per check, sharing one :class:`Conformance` per class."""

    case: ClassVar[ConformanceCase]
    _suite: ClassVar[Conformance | None] = None

    @classmethod
    def suite(cls) -> Conformance:
        if cls.__dict__.get("_suite") is None:
            cls._suite = Conformance(cls.case)
        suite = cls._suite
        assert suite is not None
        return suite

    @classmethod
    def teardown_class(cls) -> None:
        suite = cls.__dict__.get("_suite")
        if suite is not None:
            suite.close()
            cls._suite = None

    def _run(self, name: str) -> None:
        if name in self.case.skip:
            import pytest

            pytest.skip(f"check '{name}' skipped by the case")
        run_or_skip(self.suite(), name)

    def test_declaration(self) -> None:
        self._run("declaration")

    def test_search_before_build(self) -> None:
        self._run("search_before_build")

    def test_shapes_ids_distances(self) -> None:
        self._run("shapes_ids_distances")

    def test_recall_at_most_accurate(self) -> None:
        self._run("recall_at_most_accurate")

    def test_monotone_knobs(self) -> None:
        self._run("monotone_knobs")

    def test_unknown_params_rejected(self) -> None:
        self._run("unknown_params_rejected")

    def test_invalid_combinations_rejected(self) -> None:
        self._run("invalid_combinations_rejected")

    def test_bad_inputs_rejected(self) -> None:
        self._run("bad_inputs_rejected")

    def test_k_larger_than_n(self) -> None:
        self._run("k_larger_than_n")

    def test_custom_ids(self) -> None:
        self._run("custom_ids")

    def test_deterministic_build(self) -> None:
        self._run("deterministic_build")

    def test_memory_report(self) -> None:
        self._run("memory_report")

    def test_snapshot_round_trip(self) -> None:
        self._run("snapshot_round_trip")

    def test_close_idempotent(self) -> None:
        self._run("close_idempotent")

    def test_writes(self) -> None:
        self._run("writes")


def run_or_skip(suite: Conformance, name: str) -> dict[str, Any]:
    """``suite.run(name)`` for pytest: a check that does not apply to the backend is a pytest
    skip with the reason (never a pass that checked nothing)."""
    try:
        return suite.run(name)
    except CheckNotApplicable as exc:
        import pytest

        pytest.skip(f"check '{name}' does not apply to {suite.case.id}: {exc}")
        raise  # unreachable: pytest.skip raises


def run_conformance(backend: str, *, metric: Metric = "l2",
                    build: Mapping[str, Any] | None = None, **case_kwargs: Any
                    ) -> ConformanceReport:
    """Run every check on ``backend`` and return what was measured (AssertionError on failure).

    ``case_kwargs`` are :class:`ConformanceCase` fields (``workdir``, ``min_recall``, ...).
    """
    suite = Conformance(ConformanceCase(backend, metric=metric, build=dict(build or {}),
                                        **case_kwargs))
    try:
        return suite.run_all()
    finally:
        suite.close()


__all__ = ["BackendConformance", "run_conformance", "run_or_skip"]
