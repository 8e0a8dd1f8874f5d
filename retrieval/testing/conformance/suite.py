"""The checks of the conformance suite: :class:`Conformance` runs them on one
:class:`~retrieval.testing.conformance.kit.ConformanceCase` (see the package docstring)."""

from __future__ import annotations

import contextlib
import itertools
import logging
import tempfile
from collections.abc import Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError, DataError, RwbError
from retrieval.indexes.base import (
    BuildInfo,
    IndexBackend,
    SearchResult,
    SupportsDeadFraction,
    SupportsMemoryReport,
    SupportsSnapshot,
    SupportsWrites,
    VectorIndex,
)
from retrieval.indexes.registry import create_index, get_backend
from retrieval.indexes.writes import require_writes
from retrieval.loaders.synthetic import make_synthetic
from retrieval.params import Params, validate_params
from retrieval.testing.conformance.kit import (
    CHECKS,
    CheckNotApplicable,
    ConformanceCase,
    ConformanceReport,
    Expect,
    check_rows,
    exact_live,
    exact_neighbours,
    knob_grid,
    misspelling,
    recall,
    true_distances,
)

log = logging.getLogger(__name__)


class Conformance:
    """The checks for one :class:`ConformanceCase`; data, exact neighbours and one built index
    are made once and shared by the checks (each check sets the search params it needs)."""

    def __init__(self, case: ConformanceCase) -> None:
        self.case = case
        self.cls: type[IndexBackend] = get_backend(case.backend)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._counter = itertools.count()
        self._shared: IndexBackend | None = None
        self.build_info: BuildInfo | None = None
        self.results: dict[str, dict[str, Any]] = {}

    # --- fixtures ------------------------------------------------------------------------------
    @cached_property
    def dataset(self) -> VectorDataset:
        c = self.case
        return make_synthetic(c.n, c.dim, c.n_queries, metric=c.metric, seed=c.seed,
                              cluster_spread=c.cluster_spread, name=f"conformance-{c.metric}")

    @cached_property
    def exact(self) -> np.ndarray:
        return exact_neighbours(self.dataset, self.case.k)[0]

    @cached_property
    def build_params(self) -> Params:
        return validate_params(self.cls.BuildParams, self.case.build,
                               where=f"conformance case '{self.case.id}' build")

    def _workdir(self) -> Path:
        if self.case.workdir is not None:
            root = Path(self.case.workdir)
        else:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="rwb-conformance-")
            root = Path(self._tmp.name)
        path = root / f"{self.case.backend}-{next(self._counter)}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def new_index(self, *, seed: int | None = None, build: Mapping[str, Any] | None = None,
                  threads: int = 1) -> IndexBackend:
        """A fresh, unbuilt index of the case (one thread unless index_kwargs says otherwise)."""
        kwargs: dict[str, Any] = {"threads": threads, **self.case.index_kwargs}
        return create_index(
            self.case.backend, self.case.dim, self.case.metric,
            dict(self.case.build if build is None else build),
            seed=self.case.seed if seed is None else seed, workdir=self._workdir(), **kwargs,
        )

    @contextlib.contextmanager
    def fresh_index(self, **kwargs: Any) -> Iterator[IndexBackend]:
        index = self.new_index(**kwargs)
        try:
            yield index
        finally:
            index.close()

    @property
    def index(self) -> IndexBackend:
        """The shared index, built on the dataset with row-number ids."""
        if self._shared is None:
            index = self.new_index()
            self.build_info = index.build(self.dataset.base)
            self._shared = index
        return self._shared

    def most_accurate(self) -> dict[str, Any]:
        return dict(self.cls.most_accurate_search(self.build_params))

    def search(self, index: IndexBackend, params: Mapping[str, Any], k: int | None = None,
               queries: np.ndarray | None = None) -> SearchResult:
        index.set_search_params(**params)
        return index.search(self.dataset.queries if queries is None else queries,
                            self.case.k if k is None else k)

    def recall(self, result: SearchResult) -> float:
        return recall(result.ids, self.exact, self.case.k)

    # --- running -------------------------------------------------------------------------------
    def run(self, name: str) -> dict[str, Any]:
        """Run one check by name; return what it measured (also kept in ``self.results``).
        :class:`CheckNotApplicable` when the check does not apply to the backend."""
        if name not in CHECKS:
            raise ConfigError(f"conformance: unknown check '{name}'; allowed: {', '.join(CHECKS)}")
        out: dict[str, Any] = getattr(self, f"check_{name}")() or {}
        self.results[name] = out
        log.info("conformance %s %s: %s", self.case.id, name, out)
        return out

    def run_all(self) -> ConformanceReport:
        not_applicable: dict[str, str] = {}
        for name in CHECKS:
            if name not in self.case.skip:
                try:
                    self.run(name)
                except CheckNotApplicable as exc:
                    not_applicable[name] = str(exc)
        return ConformanceReport(self.case.id, dict(self.results), not_applicable)

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()
            self._shared = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # --- checks --------------------------------------------------------------------------------
    def check_declaration(self) -> dict[str, Any]:
        """Class attributes are consistent: name, params models, knobs, version."""
        cls = self.cls
        assert cls.name == self.case.backend, f"class name {cls.name!r} != {self.case.backend!r}"
        for attr in ("BuildParams", "SearchParams"):
            model = getattr(cls, attr)
            assert issubclass(model, Params), f"{attr} must subclass retrieval.params.Params"
            assert model.model_config.get("extra") == "forbid", f"{attr} must forbid extra keys"
        fields = set(cls.SearchParams.model_fields)
        for knob in cls.monotone_knobs:
            assert knob in fields, f"monotone knob '{knob}' is not a search param ({fields})"
            lo, hi = cls.knob_range(knob, self.build_params, self.case.k)
            assert 1 <= lo <= hi, f"knob_range('{knob}') = ({lo}, {hi}) is not a range"
        version = cls.library_version()
        assert isinstance(version, str) and version, "library_version() must be a non-empty str"
        index = self.new_index()
        try:
            assert isinstance(index, VectorIndex), "instances must satisfy VectorIndex"
        finally:
            index.close()
        return {"version": version, "knobs": list(cls.monotone_knobs)}

    def check_search_before_build(self) -> dict[str, Any]:
        with self.fresh_index() as index, Expect((RwbError,), "search before build") as e:
            index.search(self.dataset.queries[:2], self.case.k)
        return {"message": e.message}

    def check_shapes_ids_distances(self) -> dict[str, Any]:
        """Shapes (nq, k), int64 ids in [0, n) or -1 (inf distance), ascending distances;
        with ``exact_distances`` the distances equal the true ones (rtol 1e-3)."""
        ds, k = self.dataset, self.case.k
        res = self.search(self.index, self.most_accurate())
        nq = ds.n_queries
        assert res.ids.shape == (nq, k), f"ids shape {res.ids.shape} != {(nq, k)}"
        assert res.distances.shape == (nq, k), f"distances shape {res.distances.shape}"
        assert res.ids.dtype == np.int64, f"ids dtype {res.ids.dtype} != int64"
        assert res.distances.dtype == np.float32, f"distances dtype {res.distances.dtype}"
        check_rows(res, ds.n_base)
        err = 0.0
        if self.case.exact_distances:
            true = true_distances(ds, res.ids, ds.queries)
            valid = res.ids >= 0
            got = res.distances.astype(np.float64)
            ok = np.isclose(got, true, rtol=1e-3, atol=1e-3) | ~valid
            assert ok.all(), (
                f"distances are not rwb '{ds.metric}' distances: e.g. received "
                f"{got[~ok][0]:.6g}, true {true[~ok][0]:.6g}"
            )
            err = float(np.abs(got - true)[valid].max())
        return {"max_abs_distance_error": err}

    def check_recall_at_most_accurate(self) -> dict[str, Any]:
        params = self.most_accurate()
        rec = self.recall(self.search(self.index, params))
        assert rec >= self.case.min_recall, (
            f"recall@{self.case.k} at most_accurate_search {params} is {rec:.4f} "
            f"< {self.case.min_recall}"
        )
        return {"params": params, "recall": rec}

    def check_monotone_knobs(self) -> dict[str, Any]:
        """For each knob (others at their most accurate value), recall does not drop by more
        than the tolerance as the knob grows; knobs_with_effect must change recall."""
        curves: dict[str, list[tuple[int, float]]] = {}
        effect = self.case.knobs_with_effect
        if effect is None:
            effect = self.cls.monotone_knobs[:1]
        for knob in self.cls.monotone_knobs:
            lo, hi = self.cls.knob_range(knob, self.build_params, self.case.k)
            curve = []
            for v in knob_grid(lo, hi):
                params = {**self.most_accurate(), knob: v}
                curve.append((v, self.recall(self.search(self.index, params))))
            curves[knob] = curve
            tol = self.case.monotone_tolerance
            for (v0, r0), (v1, r1) in itertools.pairwise(curve):
                assert r1 >= r0 - tol, (
                    f"recall drops as '{knob}' grows: {v0} -> {r0:.4f}, {v1} -> {r1:.4f}"
                )
            if knob in effect:
                assert curve[0][1] < curve[-1][1], (
                    f"'{knob}' has no effect on recall ({curve}); a silent brute-force fallback?"
                )
        return {"curves": curves}

    def check_unknown_params_rejected(self) -> dict[str, Any]:
        """Misspelt search/build params raise ConfigError suggesting the right name; bad values
        raise ConfigError naming the field; a failed update leaves the params unchanged."""
        index = self.index
        index.set_search_params(**self.most_accurate())
        before = index.search_params
        messages = []
        search_fields = list(self.cls.SearchParams.model_fields)
        for name in search_fields:
            typo = misspelling(name, search_fields)
            if typo is None:
                continue
            with Expect((ConfigError,), f"unknown search param '{typo}'",
                         must_mention=f"Did you mean '{name}'") as e:
                index.set_search_params(**{typo: 1})
            messages.append(e.message)
        for knob in self.cls.monotone_knobs:
            for bad in (-1, "many"):
                with Expect((ConfigError,), f"search param {knob}={bad!r}",
                             must_mention=knob) as e:
                    index.set_search_params(**{knob: bad})
                messages.append(e.message)
        assert index.search_params == before, "a rejected update changed the search params"
        build_fields = list(self.cls.BuildParams.model_fields)
        for name in build_fields[:3]:
            typo = misspelling(name, build_fields)
            if typo is None:
                continue
            with Expect((ConfigError,), f"unknown build param '{typo}'",
                         must_mention=f"Did you mean '{name}'") as e:
                self.new_index(build={**self.case.build, typo: 1}).close()
            messages.append(e.message)
        return {"messages": messages}

    def check_invalid_combinations_rejected(self) -> dict[str, Any]:
        """Each knob just outside ``knob_range`` (e.g. ef_search = k-1, nprobe = nlist+1) is
        rejected with a ConfigError naming it, at set_search_params or at search; the index
        stays usable."""
        index, k = self.index, self.case.k
        q = self.dataset.queries[:5]
        messages = []
        for knob in self.cls.monotone_knobs:
            lo, hi = self.cls.knob_range(knob, self.build_params, k)
            for bad in ([lo - 1] if lo > 1 else []) + [hi + 1]:
                params = {**self.most_accurate(), knob: bad}
                with Expect((ConfigError,), f"{knob}={bad} (allowed [{lo}, {hi}] for k={k})",
                             must_mention=knob) as e:
                    self.search(index, params, queries=q)
                messages.append(e.message)
        res = self.search(index, self.most_accurate(), queries=q)
        assert res.ids.shape == (len(q), k), "index unusable after a rejected combination"
        return {"messages": messages}

    def check_bad_inputs_rejected(self) -> dict[str, Any]:
        """Wrong dimension, NaN, bad ids -> DataError; k < 1 -> ConfigError."""
        ds, k = self.dataset, self.case.k
        base = ds.base
        nan = base.copy()
        nan[7, 3] = np.nan
        n = ds.n_base
        cases: list[tuple[str, np.ndarray, np.ndarray | None]] = [
            ("vectors of the wrong dimension", base[:, :-1], None),
            ("vectors with NaN", nan, None),
            ("too few ids", base, np.arange(n - 1)),
            ("duplicate ids", base, np.zeros(n, dtype=np.int64)),
            ("negative ids", base, np.arange(n) - 1),
            ("float ids", base, np.arange(n) + 0.5),
        ]
        messages = []
        with self.fresh_index() as fresh:
            for what, vectors, ids in cases:
                with Expect((DataError,), what) as e:
                    fresh.build(vectors, ids)
                messages.append(e.message)
        shared = self.index
        shared.set_search_params(**self.most_accurate())
        with Expect((DataError,), "queries of the wrong dimension") as e:
            shared.search(ds.queries[:, :-1], k)
        messages.append(e.message)
        for bad_k in (0, -3):
            with Expect((ConfigError,), f"k={bad_k}", must_mention="k") as e:
                shared.search(ds.queries, bad_k)
            messages.append(e.message)
        return {"messages": messages}

    def check_k_larger_than_n(self) -> dict[str, Any]:
        """Asking for more than n results pads with -1 / inf after at most n distinct ids."""
        n = self.dataset.n_base
        k = n + 5
        res = self.search(self.index, self.cls.most_accurate_search(self.build_params), k=k,
                          queries=self.dataset.queries[:3])
        assert res.ids.shape == (3, k), f"ids shape {res.ids.shape} != {(3, k)}"
        check_rows(res, n)
        assert (res.ids[:, n:] == -1).all(), "more than n ids returned"
        return {"valid_per_row": (res.ids >= 0).sum(axis=1).tolist()}

    def check_custom_ids(self) -> dict[str, Any]:
        """Ids given at build come back (large int64, reversed order), with the same recall."""
        n = self.dataset.n_base
        ids = (2**40 + 7 * np.arange(n, dtype=np.int64))[::-1].copy()
        with self.fresh_index() as index:
            index.build(self.dataset.base, ids)
            res = self.search(index, self.most_accurate())
        found = res.ids[res.ids >= 0]
        unknown = found[~np.isin(found, ids)]
        assert unknown.size == 0, f"ids not given at build returned, e.g. {unknown[:3]}"
        rec = recall(res.ids, ids[self.exact], self.case.k)
        assert rec >= self.case.min_recall, (
            f"recall with custom ids {rec:.4f} < {self.case.min_recall}"
        )
        return {"recall": rec}

    def check_deterministic_build(self) -> dict[str, Any]:
        """Two builds with the same seed and one thread answer identically (at the least
        accurate knob values, where differences show most)."""
        if not getattr(self.cls, "deterministic", True):
            raise CheckNotApplicable("backend declares deterministic = False (unseeded build)")
        low = {
            knob: self.cls.knob_range(knob, self.build_params, self.case.k)[0]
            for knob in self.cls.monotone_knobs
        }
        params = {**self.most_accurate(), **low}
        results = []
        for _ in range(2):
            with self.fresh_index(threads=1) as index:
                index.build(self.dataset.base)
                results.append(self.search(index, params))
        a, b = results
        assert np.array_equal(a.ids, b.ids), "two builds with the same seed return different ids"
        assert np.array_equal(a.distances, b.distances), "same seed, different distances"
        return {"params": params, "recall": self.recall(a)}

    def check_memory_report(self) -> dict[str, Any]:
        index = self.index
        info = self.build_info
        assert info is not None
        assert info.n == self.dataset.n_base, f"BuildInfo.n {info.n} != {self.dataset.n_base}"
        assert info.build_s >= 0, f"BuildInfo.build_s {info.build_s} < 0"
        assert info.memory_bytes is None or info.memory_bytes > 0, "memory_bytes must be > 0"
        mem = None
        if isinstance(index, SupportsMemoryReport):
            mem = index.memory_bytes()
            assert isinstance(mem, int) and mem > 0, f"memory_bytes() = {mem!r}"
        return {"build_s": info.build_s, "memory_bytes": info.memory_bytes, "measured": mem}

    def check_snapshot_round_trip(self) -> dict[str, Any]:
        """A backend with a snapshot format (the build cache's): the saved index, loaded into a
        fresh one, answers exactly as the built one (custom ids included); a snapshot of
        another size is refused with a DataError."""
        if not isinstance(self.index, SupportsSnapshot):
            raise CheckNotApplicable("backend has no snapshot format (built every time)")
        n = self.dataset.n_base
        ids = (2**40 + 3 * np.arange(n, dtype=np.int64))[::-1].copy()
        params = self.most_accurate()
        with tempfile.TemporaryDirectory(prefix="rwb-snapshot-") as tmp, \
                self.fresh_index() as built, self.fresh_index() as loaded:
            folder = Path(tmp)
            built.build(self.dataset.base, ids)
            assert isinstance(built, SupportsSnapshot) and isinstance(loaded, SupportsSnapshot)
            names = built.save_snapshot(folder)
            assert names and all((folder / f).is_file() for f in names), names
            loaded.load_snapshot(folder, n)
            a, b = self.search(built, params), self.search(loaded, params)
            assert np.array_equal(a.ids, b.ids), "the loaded snapshot returns other ids"
            assert np.array_equal(a.distances, b.distances), "loaded: other distances"
            with self.fresh_index() as wrong, Expect((DataError,), "snapshot of another n"):
                assert isinstance(wrong, SupportsSnapshot)
                wrong.load_snapshot(folder, n - 1)
        return {"files": names, "format": type(loaded).snapshot_format}

    def check_close_idempotent(self) -> dict[str, Any]:
        """close() twice is fine (built or not); search after close raises an rwb error."""
        unbuilt = self.new_index()
        unbuilt.close()
        unbuilt.close()
        index = self.new_index()
        index.build(self.dataset.base)
        index.close()
        index.close()
        with Expect((RwbError,), "search after close") as e:
            index.search(self.dataset.queries[:2], self.case.k)
        return {"message": e.message}


    def check_writes(self) -> dict[str, Any]:
        """A backend that claims :class:`SupportsWrites`: built on 2/3 of the rows (custom
        ids), 30% of them deleted (every query's exact nearest among them), the last 1/3
        inserted under new ids, some deleted again and one re-inserted: no deleted id is ever
        returned (at the most accurate knobs, over every query), only live ids come back, the
        inserted vectors (a sample of about n_queries) find their own ids (l2 / cosine),
        recall over the live set is at least ``min_recall - 0.02``, ``live_count`` is right
        after every step and after ``maintain``; a live id inserted again or an unknown id
        deleted is a DataError. A backend that does not
        claim it (or whose build cannot write) is refused by ``require_writes`` in one line
        naming the backend."""
        c = self.case
        with self.fresh_index() as index:
            if not isinstance(index, SupportsWrites) or index.cannot_write():
                with Expect((ConfigError,), "a write step on a backend without writes",
                            must_mention=c.backend) as e:
                    require_writes(index, ("insert", "delete", "search"))
                assert "\n" not in e.message, f"refusal is not one line: {e.message!r}"
                return {"refused": e.message}
            return self._writes_sequence(index)

    def _writes_sequence(self, index: Any) -> dict[str, Any]:
        c, ds = self.case, self.dataset
        n = ds.n_base
        split = 2 * n // 3
        base, q = ds.base, ds.queries
        ids = 2**40 + 3 * np.arange(n, dtype=np.int64)  # caller ids, never row numbers
        index.build(base[:split], ids[:split])
        live = np.zeros(n, dtype=bool)
        live[:split] = True
        counts = [index.live_count()]
        assert counts[0] == split, f"live_count() after build {counts[0]} != {split}"
        rng = np.random.default_rng(c.seed)
        nearest = exact_live(base[:split], np.arange(split), q, c.metric, 1)[:, 0]
        gone = np.union1d(nearest, rng.choice(split, size=int(0.3 * split), replace=False))
        index.delete(ids[gone])
        live[gone] = False
        counts.append(index.live_count())
        index.insert(base[split:], ids[split:])
        live[split:] = True
        counts.append(index.live_count())
        again = rng.choice(np.arange(split, n), size=max(1, (n - split) // 10), replace=False)
        index.delete(ids[again])
        live[again] = False
        back = gone[:1]  # a deleted id inserted again (its own vector)
        index.insert(base[back], ids[back])
        live[back] = True
        counts.append(index.live_count())
        with Expect((DataError,), "inserting a live id again", must_mention=str(ids[back[0]])):
            index.insert(base[back], ids[back])
        with Expect((DataError,), "deleting an id that is not in the index"):
            index.delete(ids[gone[1:2]])
        expected = [split, split - len(gone), n - len(gone), n - len(gone) - len(again) + 1]
        assert counts == expected, f"live_count() {counts} != {expected}"
        recalls = [self._check_live(index, live, ids, "after writes")]
        info = index.maintain()
        assert info.seconds >= 0 and isinstance(info.action, str), f"maintain() -> {info}"
        assert index.live_count() == expected[-1], "live_count() changed by maintain()"
        recalls.append(self._check_live(index, live, ids, f"after maintain ({info.action})"))
        dead = index.dead_fraction() if isinstance(index, SupportsDeadFraction) else None
        assert dead is None or 0.0 <= dead <= 1.0, f"dead_fraction() = {dead}"
        return {"live_counts": counts, "recall": recalls, "maintain": info.action,
                "maintain_s": info.seconds, "dead_fraction": dead}

    def _check_live(self, index: Any, live: np.ndarray, ids: np.ndarray, when: str) -> float:
        c, ds = self.case, self.dataset
        rows = np.flatnonzero(live)
        res = self.search(index, self.most_accurate())
        found = res.ids[res.ids >= 0]
        dead = found[~np.isin(found, ids[rows])]
        assert dead.size == 0, f"{when}: ids not live returned, e.g. {dead[:3].tolist()}"
        exact = exact_live(ds.base[rows], ids[rows], ds.queries, c.metric, c.k)
        rec = recall(res.ids, exact, c.k)
        assert rec >= c.min_recall - 0.02, f"{when}: recall@{c.k} over the live set {rec:.4f}"
        inserted = rows[rows >= 2 * ds.n_base // 3][:: max(1, (ds.n_base // 3) // c.n_queries)]
        own = self.search(index, self.most_accurate(), queries=ds.base[inserted])
        dead = own.ids[(own.ids >= 0) & ~np.isin(own.ids, ids[rows])]
        assert dead.size == 0, f"{when}: ids not live returned, e.g. {dead[:3].tolist()}"
        if c.metric != "ip":  # under inner product a vector need not be its own neighbour
            hit = float((own.ids == ids[inserted][:, None]).any(axis=1).mean())
            assert hit >= 0.99, f"{when}: only {hit:.3f} of the inserted vectors find their id"
        return rec


__all__ = ["Conformance"]
