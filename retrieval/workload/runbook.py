"""Runbooks: write workloads as data, in big-ann-benchmarks' streaming shape.

A runbook is an ordered list of steps, each a one-key mapping (YAML, under ``runbook:`` in a
churn spec, or a file of its own holding ``steps:``)::

    steps:
      - insert: {start: 0, end: 10000}          # base rows [start, end) join the index
      - search: {}                              # queries scored over the live set
      - replace: {start: 10000, end: 11000}     # 1,000 live ids get these rows' vectors
      - delete: {start: 0, end: 500}            # the ids holding base rows [0, 500) leave
      - delete: {fraction: 0.1, seed: 3}        # 10% of the live ids, chosen with a seed
      - maintain: {}                            # vacuum / compact / optimize
      - search: {control: true}                 # + a fresh build on the live set

Ranges are row numbers of the dataset's base (positions in ``order``: the dataset's own order,
or grouped by k-means cluster for drift runbooks); the index starts empty, so the first write is
an insert (an index cannot be built on zero rows: the runner builds on that first batch). Ids
are NOT row numbers: row ``r`` enters under the dataset's own integer id when it has ids
(:func:`dataset_row_ids`), else under ``ids.offset + perm[r]`` (``perm`` a seeded
permutation), and a ``replace`` keeps the replaced ids (an update in place). Resolving a
runbook (:func:`resolve_runbook`) simulates the live set once, so every step becomes explicit
ids and rows (:class:`~retrieval.workload.core.Step`): any run of the same runbook applies the
same writes, which is what makes a killed run resumable.

Errors are one line naming the step and the field (``runbook.steps[3].delete.end: ...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from retrieval.data import Metric
from retrieval.errors import ConfigError
from retrieval.groundtruth.exact import GroundTruth
from retrieval.ids import MAX_RUNBOOK_ID, CallerIds
from retrieval.params import Params
from retrieval.workload.core import Step, StepOp

#: the step names of a runbook (big-ann-benchmarks' streaming runbooks)
STEP_NAMES: tuple[StepOp, ...] = ("insert", "delete", "replace", "search", "maintain")


class RangeStep(Params):
    """Base rows ``[start, end)`` (positions in the runbook's ``order``)."""

    start: int = Field(ge=0)
    end: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> RangeStep:
        if self.end <= self.start:
            raise ValueError(f"'end' must be > 'start' ({self.start}); received {self.end}")
        return self


class InsertStep(RangeStep):
    """Insert the base rows ``[start, end)``."""


class DeleteStep(Params):
    """Delete the ids holding base rows ``[start, end)``, or a seeded ``fraction`` of the
    live ids (0 < fraction < 1)."""

    start: int | None = Field(None, ge=0)
    end: int | None = Field(None, ge=1)
    fraction: float | None = Field(None, gt=0.0, lt=1.0)
    seed: int = 0

    @model_validator(mode="after")
    def _one_form(self) -> DeleteStep:
        ranged = self.start is not None or self.end is not None
        if ranged == (self.fraction is not None):
            raise ValueError("give either 'start' and 'end' (base rows) or 'fraction' (of the "
                             "live ids)")
        if ranged and (self.start is None or self.end is None or self.end <= self.start):
            raise ValueError(f"'start' and 'end' must both be given with end > start; received "
                             f"start={self.start}, end={self.end}")
        return self


class ReplaceStep(RangeStep):
    """``end - start`` live ids get the vectors of base rows ``[start, end)``: the ids holding
    rows ``[old_start, old_end)`` (same count), or live ids chosen with ``seed``."""

    old_start: int | None = Field(None, ge=0)
    old_end: int | None = Field(None, ge=1)
    seed: int = 0

    @model_validator(mode="after")
    def _old(self) -> ReplaceStep:
        if (self.old_start is None) != (self.old_end is None):
            raise ValueError("give both 'old_start' and 'old_end' or neither")
        if self.old_start is not None and self.old_end is not None and \
                self.old_end - self.old_start != self.end - self.start:
            raise ValueError(f"'old_end' - 'old_start' must equal 'end' - 'start' "
                             f"({self.end - self.start}); received {self.old_end - self.old_start}")
        return self


class SearchStep(Params):
    """Search the queries; ``control``: also measure a fresh build on the live set (default:
    the churn spec's ``control`` rule)."""

    control: bool | None = None


class MaintainStep(Params):
    """The engine's clean-up (VACUUM, compaction, optimize; nothing for hnswlib)."""


class RunbookStep(Params):
    """One step: exactly one of the keys."""

    insert: InsertStep | None = None
    delete: DeleteStep | None = None
    replace: ReplaceStep | None = None
    search: SearchStep | None = None
    maintain: MaintainStep | None = None

    @model_validator(mode="before")
    @classmethod
    def _empty_is_default(cls, data: Any) -> Any:
        # `- search:` (YAML null) and `- search: {}` mean the same
        if isinstance(data, Mapping):
            return {k: ({} if v is None and k in STEP_NAMES else v) for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> RunbookStep:
        given = [n for n in STEP_NAMES if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"a step is one of {', '.join(STEP_NAMES)}; received "
                             f"{', '.join(given) or 'none of them'}")
        return self

    @property
    def op(self) -> StepOp:
        return next(n for n in STEP_NAMES if getattr(self, n) is not None)


class IdMap(Params):
    """Caller ids of the base rows: ``offset + perm[row]``, ``perm`` a permutation of the rows
    seeded with ``seed`` (ids are never row numbers)."""

    seed: int = 0
    offset: int = Field(1_000_000, ge=0, le=2**53)


class ClusterOrder(Params):
    """Base rows grouped by k-means cluster (``clusters`` centroids, seeded), then by row: a
    range of positions is a run of clusters (inserts from clusters absent at the start)."""

    clusters: int = Field(8, ge=2, le=4096)
    seed: int = 0
    sample: int = Field(20_000, ge=100, description="rows the centroids are trained on")


class RunbookSpec(Params):
    """A runbook: ``steps`` (see the module docstring), the id map and the row order."""

    steps: list[RunbookStep] = Field(min_length=1)
    ids: IdMap = Field(default_factory=IdMap)
    order: Literal["dataset"] | ClusterOrder = "dataset"


def load_runbook(ref: str | Path | Mapping[str, Any], *, where: str,
                 base_dir: Path | None = None, field: str = "runbook") -> RunbookSpec:
    """A runbook from a mapping (``{steps: [...]}``, errors named ``<field>.steps[i]...`` in
    ``where``) or a YAML file holding one (a relative path is tried from the working
    directory, then from ``base_dir``)."""
    from retrieval.specfile import load_model, validate_model

    if isinstance(ref, Mapping):
        return validate_model(RunbookSpec, ref, source=where, prefix=f"{field}.")
    path = Path(ref)
    if not path.is_file() and base_dir is not None and (base_dir / path).is_file():
        path = base_dir / path
    if not path.is_file():
        raise ConfigError(f"{where}: field 'runbook' must be a runbook mapping or a YAML file; "
                          f"no file '{ref}'")
    return load_model(path, RunbookSpec, what="a runbook")


def row_ids(n: int, ids: IdMap) -> np.ndarray:
    """The caller id of each base row (int64, distinct, never the row number for n > 1)."""
    perm = np.random.default_rng(ids.seed).permutation(n).astype(np.int64)
    return perm + np.int64(ids.offset)


def cluster_order(base: np.ndarray, spec: ClusterOrder) -> np.ndarray:
    """Base rows sorted by (k-means cluster, row): Lloyd's iterations on a seeded sample."""
    x = np.asarray(base, dtype=np.float32)
    n = x.shape[0]
    rng = np.random.default_rng(spec.seed)
    sample = x[rng.choice(n, size=min(n, spec.sample), replace=False)]
    c = sample[rng.choice(sample.shape[0], size=min(spec.clusters, sample.shape[0]),
                          replace=False)].copy()

    def assign(v: np.ndarray) -> np.ndarray:
        out = np.empty(v.shape[0], dtype=np.int64)
        cc = (c * c).sum(1)
        for lo in range(0, v.shape[0], 8192):
            b = v[lo:lo + 8192]
            out[lo:lo + 8192] = np.argmin(cc[None, :] - 2.0 * (b @ c.T), axis=1)
        return out

    for _ in range(15):
        a = assign(sample)
        for j in range(c.shape[0]):
            members = sample[a == j]
            if members.shape[0]:
                c[j] = members.mean(0)
    labels = assign(x)
    return np.lexsort((np.arange(n), labels)).astype(np.int64)


@dataclass(frozen=True, eq=False)
class ResolvedRunbook:
    """A runbook made explicit: ``steps`` over caller ids, ``order`` (position -> base row),
    ``ids`` (base row -> caller id at first insert), the largest live count ``peak``."""

    steps: tuple[Step, ...]
    order: np.ndarray
    ids: np.ndarray
    peak: int

    def count(self, op: str) -> int:
        return sum(1 for s in self.steps if s.op == op)


class _Live:
    """The live set while resolving: id -> base row, and base row -> id."""

    def __init__(self) -> None:
        self.row_of: dict[int, int] = {}
        self.id_of: dict[int, int] = {}

    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        for i, r in zip(ids.tolist(), rows.tolist(), strict=True):
            self.row_of[i] = r
            self.id_of[r] = i

    def drop(self, ids: np.ndarray) -> None:
        for i in ids.tolist():
            del self.id_of[self.row_of.pop(i)]


def dataset_row_ids(spec: RunbookSpec, base_ids: CallerIds | None, *, where: str,
                    field: str = "runbook") -> np.ndarray | None:
    """The caller ids rows enter under when the dataset has its own integer ids (None: the
    runbook's ``ids`` map applies, as for a dataset without ids or with string ids, which the
    engines cannot store as vector ids). ConfigError when the runbook also sets ``ids`` or an
    id exceeds :data:`~retrieval.ids.MAX_RUNBOOK_ID`."""
    if base_ids is None or not base_ids.is_int:
        return None
    if "ids" in spec.model_fields_set:
        raise ConfigError(f"{where}: field '{field}.ids' must be left out for a dataset with "
                          f"its own integer ids (rows enter under the dataset's ids); "
                          f"received {spec.ids.model_dump()}")
    top = int(base_ids.ids.max()) if base_ids.n else 0
    if top > MAX_RUNBOOK_ID:
        raise ConfigError(f"{where}: the dataset's ids must be <= 2**53 for a runbook (write "
                          f"ids stay exact in JSON records); received {top}")
    return base_ids.ids


def resolve_runbook(spec: RunbookSpec, base: np.ndarray, *, where: str,
                    field: str = "runbook", ids: np.ndarray | None = None) -> ResolvedRunbook:
    """Every step as explicit caller ids and rows (see the module docstring); ConfigError (one
    line naming ``field.steps[i]``) for a range past the base, a row not live (delete) or live
    already (insert), a search or maintain on an empty index. ``ids``: the caller id of each
    base row (int64, the dataset's own: :func:`dataset_row_ids`); default the runbook's
    ``ids`` map."""
    n = int(base.shape[0])
    order = (np.arange(n, dtype=np.int64) if spec.order == "dataset"
             else cluster_order(base, spec.order))
    ids0 = row_ids(n, spec.ids) if ids is None else np.asarray(ids, dtype=np.int64)
    live = _Live()
    out: list[Step] = []
    peak = 0
    for i, st in enumerate(spec.steps):
        op = st.op
        f = f"{where}: field '{field}.steps[{i}].{op}"

        def positions(start: int, end: int, name: str = "end", f: str = f) -> np.ndarray:
            if end > n:
                raise ConfigError(f"{f}.{name}' must be <= {n} (the dataset's base rows); "
                                  f"received {end}")
            return order[start:end]

        def live_ids(rows: np.ndarray, f: str = f) -> np.ndarray:
            gone = [r for r in rows.tolist() if r not in live.id_of]
            if gone:
                raise ConfigError(f"{f}': base row {gone[0]} is not live ({len(gone)} of the "
                                  f"{len(rows)} rows are not: never inserted, deleted, or "
                                  f"replaced)")
            return np.array([live.id_of[r] for r in rows.tolist()], dtype=np.int64)

        def fresh(rows: np.ndarray, f: str = f) -> None:
            dup = [r for r in rows.tolist() if r in live.id_of]
            if dup:
                raise ConfigError(f"{f}': base row {dup[0]} is already live ({len(dup)} of "
                                  f"the {len(rows)} rows are)")

        def pick(count: int, seed: int, f: str = f) -> np.ndarray:
            pool = np.fromiter(live.row_of.keys(), dtype=np.int64, count=len(live.row_of))
            if count > pool.shape[0]:
                raise ConfigError(f"{f}': needs {count} live ids; {pool.shape[0]} are live")
            return np.sort(np.random.default_rng(seed).choice(pool, size=count, replace=False))

        if op != "insert" and not live.row_of and op != "delete":
            raise ConfigError(f"{f}': the index is empty here (the first write must be an "
                              f"insert: an index cannot be built on zero rows)")
        if op == "insert":
            s = st.insert
            assert s is not None
            rows = positions(s.start, s.end)
            fresh(rows)
            ids = ids0[rows]
            clash = [v for v in ids.tolist() if v in live.row_of]
            if clash:
                raise ConfigError(f"{f}': the id of a row in it ({clash[0]}) is live (another "
                                  f"row holds it after a replace)")
            live.add(ids, rows)
            out.append(Step("insert", ids, rows, i, f"{i} insert {s.start}:{s.end}"))
        elif op == "delete":
            d = st.delete
            assert d is not None
            if not live.row_of:
                raise ConfigError(f"{f}': the index is empty here (nothing to delete)")
            if d.fraction is not None:
                count = round(d.fraction * len(live.row_of))
                if count < 1:
                    raise ConfigError(f"{f}.fraction' deletes no id of the {len(live.row_of)} "
                                      f"live; received {d.fraction}")
                ids = pick(count, d.seed)
                label = f"{i} delete {d.fraction:g} of live"
            else:
                assert d.start is not None and d.end is not None
                ids = live_ids(positions(d.start, d.end))
                label = f"{i} delete {d.start}:{d.end}"
            rows = np.array([live.row_of[v] for v in ids.tolist()], dtype=np.int64)
            live.drop(ids)
            if not live.row_of:
                raise ConfigError(f"{f}': deletes every live id (the index would be empty)")
            out.append(Step("delete", ids, rows, i, label))
        elif op == "replace":
            r = st.replace
            assert r is not None
            rows = positions(r.start, r.end)
            fresh(rows)
            if r.old_start is not None and r.old_end is not None:
                ids = live_ids(positions(r.old_start, r.old_end, "old_end"))
            else:
                ids = pick(r.end - r.start, r.seed)
            live.drop(ids)
            live.add(ids, rows)
            out.append(Step("replace", ids, rows, i, f"{i} replace {r.start}:{r.end}"))
        elif op == "search":
            assert st.search is not None
            out.append(Step("search", index=i, label=f"{i} search", control=st.search.control))
        else:
            out.append(Step("maintain", index=i, label=f"{i} maintain"))
        peak = max(peak, len(live.row_of))
    if not any(s.op == "search" for s in out):
        raise ConfigError(f"{where}: field '{field}.steps' has no search step (nothing would be "
                          f"measured)")
    return ResolvedRunbook(tuple(out), order, ids0, peak)


def truth_at_searches(book: ResolvedRunbook, base: np.ndarray, queries: np.ndarray,
                      metric: Metric, k: int) -> dict[int, GroundTruth]:
    """The exact top-k of ``queries`` over the live set at each search step (keyed by the
    step's index), kept incrementally (:class:`retrieval.groundtruth.live.LiveGroundTruth`)."""
    from retrieval.groundtruth.live import LiveGroundTruth

    gt = LiveGroundTruth(queries, metric, k)
    out: dict[int, GroundTruth] = {}
    for st in book.steps:
        if st.op in ("delete", "replace"):
            gt.delete(st.ids)
        if st.op in ("insert", "replace"):
            gt.insert(np.asarray(base[st.rows]), st.ids)
        if st.op == "search":
            out[st.index] = gt.top(k)
    return out


__all__ = [
    "STEP_NAMES", "ClusterOrder", "DeleteStep", "IdMap", "InsertStep", "MaintainStep",
    "ReplaceStep", "ResolvedRunbook", "RunbookSpec", "RunbookStep", "SearchStep",
    "cluster_order", "dataset_row_ids", "load_runbook", "resolve_runbook", "row_ids",
    "truth_at_searches",
]
