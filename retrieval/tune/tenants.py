"""Tenants as a workload (``tenants:`` in a sweep spec): who owns each base row and query, the
exact top-k inside each tenant, and how tenants are judged against the recall target.

- ``tenants: {count: N, sizes: {zipf: S}}``: synthetic labels. Tenant ``r`` (rank 1..N) gets
  ``1 + floor((n - N) * r^-S / sum_j j^-S)`` base rows (every tenant at least one; the
  remainder to the largest), rows dealt by a seeded permutation; the queries are dealt evenly
  over the tenants in a seeded order (each gets ``nq // N`` or one more), so a small tenant is
  judged as often as a large one.
- ``tenants: {labels: FILE, query_labels: FILE}``: one label per base row and per query (.npy,
  integers or strings, in the dataset's row / query order; relative paths from the spec file).

Recall of a query of tenant ``t`` is ``|found ∩ exact top-k of t| / min(k, size of t)`` (a tenant
with 3 rows has 3 true neighbours). A tenant with at least ``min_queries`` queries is judged by
the lower confidence bound of its own queries (the sweep's ``tune.confidence``); one with fewer
is judged by the pooled bound of all such small tenants of its size class (sizes in powers of
two: [1, 2), [2, 4), ...), since 2 or 3 queries bound nothing. A tenant without queries is not
judged. ``tenants_meeting``: the share of judged tenants whose bound meets the target.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from retrieval.errors import ConfigError, DataError
from retrieval.filtering.exact import prepared, subset_knn
from retrieval.params import Params

#: the layouts compared, in this order
LAYOUTS = ("shared", "per_tenant", "flat_index")
Layout = Literal["shared", "per_tenant", "flat_index"]

JUDGE_RULE = (
    "a tenant with >= min_queries tuning queries is judged by the lower confidence bound of its "
    "own tuning queries' recall; tenants with fewer are pooled per size class (powers of two) "
    "and each judged by its class's pooled bound; tenants without queries are not judged; the "
    "held-out queries (tune.heldout_fraction of each tenant's) are judged the same way after the "
    "knob is chosen; tenant recall (mean, P5, worst 1%) is over all of a tenant's queries; "
    "recall of a query is hits / min(k, tenant size)"
)


class ZipfSizes(Params):
    """Tenant sizes ~ rank^-zipf (1.1: a few large tenants, a long tail of small ones)."""

    #: the Zipf exponent s: tenant of rank r holds ~ r^-s of the rows
    zipf: float = Field(gt=0.0, le=10.0)


class TenantsSpec(Params):
    """The ``tenants:`` block of a sweep spec (see the module doc)."""

    #: .npy of one tenant label per base row (the dataset's row order)
    labels: str | None = None
    #: .npy of one tenant label per query (the dataset's query order)
    query_labels: str | None = None
    #: synthetic: the number of tenants
    count: int | None = Field(None, ge=1, le=1_000_000)
    #: synthetic: the size distribution (default zipf 1.1)
    sizes: ZipfSizes | None = None
    #: the layouts compared (default all three)
    layouts: list[Layout] = Field(
        default_factory=lambda: list(LAYOUTS), min_length=1)  # type: ignore[arg-type]
    #: tenants with fewer queries are judged pooled per size class
    min_queries: int = Field(10, ge=1)
    #: share of judged tenants that must meet the target for a layout to qualify
    meeting: float = Field(0.99, gt=0.0, le=1.0)
    #: how the shared layout filters: ``engine`` (the backend's own filtered search; a backend
    #: without one post-filters) or ``postfilter`` (an unfiltered search, foreign ids dropped)
    shared_filter: Literal["engine", "postfilter"] = "engine"
    #: post-filter depth = overfetch * k (shared layout, when it post-filters)
    overfetch: int = Field(20, ge=1, le=10_000)

    @model_validator(mode="after")
    def _one_source(self) -> TenantsSpec:
        files = self.labels is not None or self.query_labels is not None
        synth = self.count is not None or self.sizes is not None
        if files == synth:
            raise ValueError("give either labels and query_labels (files) or count (with "
                             "sizes); received " + ("both" if files else "neither"))
        if files and (self.labels is None or self.query_labels is None):
            raise ValueError("labels and query_labels go together (one .npy each)")
        if synth and self.count is None:
            raise ValueError("sizes needs count (the number of tenants)")
        return self


@dataclass(frozen=True)
class Tenancy:
    """Tenant codes (0..T-1) of every base row and query; ``names[c]`` is code c's label."""

    base: np.ndarray  # int64 (n_base,)
    queries: np.ndarray  # int64 (n_queries,)
    names: tuple[str, ...]
    source: str

    @property
    def count(self) -> int:
        return len(self.names)

    def sizes(self) -> np.ndarray:
        return np.bincount(self.base, minlength=self.count).astype(np.int64)

    def rows(self) -> list[np.ndarray]:
        """Base rows of each tenant (ascending)."""
        order = np.argsort(self.base, kind="stable")
        return np.split(order.astype(np.int64), np.cumsum(self.sizes())[:-1])

    def query_rows(self) -> list[np.ndarray]:
        order = np.argsort(self.queries, kind="stable")
        counts = np.bincount(self.queries, minlength=self.count)
        return np.split(order.astype(np.int64), np.cumsum(counts)[:-1])


def zipf_sizes(n: int, count: int, s: float) -> np.ndarray:
    """Sizes (int64, largest first, sum n, each >= 1) of ``count`` Zipf(``s``) tenants."""
    if count > n:
        raise ConfigError(f"field 'tenants.count' must be <= the number of base vectors ({n}); "
                          f"received {count}")
    w = np.arange(1, count + 1, dtype=np.float64) ** -s
    sizes = 1 + np.floor((n - count) * w / w.sum()).astype(np.int64)
    sizes[0] += n - int(sizes.sum())
    return sizes


def synthetic(n_base: int, n_queries: int, spec: TenantsSpec, seed: int) -> Tenancy:
    assert spec.count is not None
    s = spec.sizes.zipf if spec.sizes is not None else 1.1
    sizes = zipf_sizes(n_base, spec.count, s)
    rng = np.random.default_rng(seed)
    base = np.empty(n_base, dtype=np.int64)
    base[rng.permutation(n_base)] = np.repeat(np.arange(spec.count), sizes)
    q = np.arange(n_queries) % spec.count
    queries = q[rng.permutation(n_queries)].astype(np.int64)
    names = tuple(f"t{i:0{len(str(spec.count - 1))}d}" for i in range(spec.count))
    return Tenancy(base, queries, names, f"zipf {s:g} over {spec.count} tenants")


def _load_labels(path: Path, n: int, field: str) -> np.ndarray:
    if not path.is_file():
        raise DataError(f"field 'tenants.{field}': no file '{path}'")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise DataError(f"field 'tenants.{field}': '{path}' is not a readable .npy "
                        f"({exc})") from None
    if arr.ndim != 1 or arr.shape[0] != n:
        raise DataError(f"field 'tenants.{field}': '{path}' must hold one label per row "
                        f"({n}); received shape {arr.shape}")
    if arr.dtype.kind not in "iuUS":
        raise DataError(f"field 'tenants.{field}': '{path}' must hold integers or strings; "
                        f"received dtype {arr.dtype}")
    return arr


def from_files(n_base: int, n_queries: int, spec: TenantsSpec, source: str) -> Tenancy:
    assert spec.labels is not None and spec.query_labels is not None
    root = Path(source).parent if source and source != "<memory>" else Path(".")
    paths = [Path(p) if Path(p).is_absolute() else root / p
             for p in (spec.labels, spec.query_labels)]
    base = _load_labels(paths[0], n_base, "labels").astype(str)
    queries = _load_labels(paths[1], n_queries, "query_labels").astype(str)
    names, codes = np.unique(base, return_inverse=True)
    lookup = {str(v): i for i, v in enumerate(names)}
    unknown = sorted(set(queries.tolist()) - set(lookup))
    if unknown:
        raise DataError(f"field 'tenants.query_labels': every query's tenant must own base "
                        f"rows (labels in '{paths[0]}'); received {unknown[0]!r} "
                        f"({len(unknown)} unknown)")
    q = np.array([lookup[v] for v in queries.tolist()], dtype=np.int64)
    return Tenancy(codes.astype(np.int64), q, tuple(str(v) for v in names),
                   f"labels {paths[0].name} / {paths[1].name}")


def tenancy(n_base: int, n_queries: int, spec: TenantsSpec, seed: int, source: str) -> Tenancy:
    if spec.count is not None:
        return synthetic(n_base, n_queries, spec, seed)
    return from_files(n_base, n_queries, spec, source)


def tenant_truth(base: np.ndarray, queries: np.ndarray, metric: str, ten: Tenancy,
                 k: int) -> np.ndarray:
    """Exact top-k base rows (int64 (nq, k), -1 past the tenant's size) of every query among its
    own tenant's rows (``base`` / ``queries`` raw; prepared here)."""
    b, q = prepared(base, metric), prepared(queries, metric)
    out = np.full((queries.shape[0], k), -1, dtype=np.int64)
    for rows, qrows in zip(ten.rows(), ten.query_rows(), strict=True):
        if qrows.size:
            out[qrows] = subset_knn(b, rows, q[qrows], metric, k)[1]
    return out


def tenant_recall(found: np.ndarray, exact: np.ndarray, k: int) -> np.ndarray:
    """Per-query recall (float64): hits among the exact ids / the number of exact ids (min(k,
    tenant size)); ``found`` and ``exact`` (nq, k) of row ids, -1 = none."""
    f, e = found[:, :k], exact[:, :k]
    hits = np.zeros(f.shape[0], dtype=np.float64)
    for j in range(e.shape[1]):
        col = e[:, j:j + 1]
        hits += ((col == f) & (col >= 0)).any(axis=1)
    return hits / np.maximum((e >= 0).sum(axis=1), 1)


def size_class(size: int) -> int:
    """The power-of-two class of a tenant size: c such that 2^c <= size < 2^(c+1)."""
    return max(0, int(size).bit_length() - 1)


@dataclass(frozen=True)
class Judged:
    """Per-tenant recall and how each tenant was judged (arrays over tenant codes)."""

    mean: np.ndarray  # mean recall of the tenant's queries (nan: no queries)
    lower: np.ndarray  # the bound it is judged by (nan: not judged)
    pooled: np.ndarray  # bool: judged by its size class's pooled bound

    def stats(self, target: float) -> dict[str, float | int | None]:
        judged = ~np.isnan(self.lower)
        means = self.mean[judged]
        if not means.size:
            return {"tenants_judged": 0, "tenants_meeting": None, "tenant_recall_mean": None,
                    "tenant_recall_p5": None, "tenant_recall_worst1pct": None}
        worst = np.sort(means)[:max(1, int(np.ceil(0.01 * means.size)))]
        return {
            "tenants_judged": int(judged.sum()),
            "tenants_meeting": float(np.mean(self.lower[judged] >= target - 1e-12)),
            "tenant_recall_mean": float(means.mean()),
            "tenant_recall_p5": float(np.quantile(means, 0.05)),
            "tenant_recall_worst1pct": float(worst.mean()),
            "tenants_pooled": int(self.pooled[judged].sum()),
        }


def judge(per_query: np.ndarray, ten: Tenancy, min_queries: int,
          bound: Callable[[np.ndarray], float], use: np.ndarray | None = None) -> Judged:
    """Each tenant's mean recall (over all its queries) and the lower bound it is judged by
    (module doc's rule) over its queries where ``use`` (bool over queries; None: all);
    ``bound(per_query_recalls) -> lower bound``."""
    sizes = ten.sizes()
    qrows = ten.query_rows()
    judged_rows = qrows if use is None else [q[use[q]] for q in qrows]
    mean = np.full(ten.count, np.nan)
    lower = np.full(ten.count, np.nan)
    pooled = np.zeros(ten.count, dtype=bool)
    small: dict[int, list[int]] = {}
    for t, qr in enumerate(judged_rows):
        if qrows[t].size:
            mean[t] = float(per_query[qrows[t]].mean())
        if not qr.size:
            continue
        if qr.size >= min_queries:
            lower[t] = bound(per_query[qr])
        else:
            small.setdefault(size_class(int(sizes[t])), []).append(t)
    for members in small.values():
        lb = bound(np.concatenate([per_query[judged_rows[t]] for t in members]))
        lower[members] = lb
        pooled[members] = True
    return Judged(mean, lower, pooled)


def tenant_split(ten: Tenancy, fraction: float, seed: int) -> np.ndarray:
    """Held-out queries (bool over queries), split within each tenant: ``round(m * fraction)``
    of a tenant's m queries (at least one when m >= 2 and the fraction is > 0; never all, so
    every tenant with queries keeps one to be judged on), seeded."""
    held = np.zeros(ten.queries.shape[0], dtype=bool)
    if fraction <= 0:
        return held
    rng = np.random.default_rng(seed)
    for qr in ten.query_rows():
        m = int(qr.size)
        n = min(m - 1, max(1, round(m * fraction))) if m >= 2 else 0
        if n > 0:
            held[rng.permutation(qr)[:n]] = True
    return held


def crossover(sizes: np.ndarray, index_ms: Sequence[np.ndarray], flat_ms: Sequence[np.ndarray],
              index_ok: np.ndarray) -> dict[str, Any]:
    """The tenant size from which the per-tenant index beats flat search: per size class, the
    p95 (ms) of the index's and of flat's per-query latencies over the class's tenants; the
    crossover is the lower edge of the smallest class from which every larger class has index
    p95 < flat p95 and meets the target (``index_ok[t]``: tenant t's bound met it). ``size``:
    None when the index never wins (flat everywhere)."""
    classes: dict[int, list[int]] = {}
    for t, s in enumerate(sizes):
        if index_ms[t].size:
            classes.setdefault(size_class(int(s)), []).append(t)
    rows: list[dict[str, Any]] = []
    for c in sorted(classes):
        ts = classes[c]
        ip = float(np.percentile(np.concatenate([index_ms[t] for t in ts]), 95))
        fp = float(np.percentile(np.concatenate([flat_ms[t] for t in ts]), 95))
        rows.append({"class": c, "sizes": [2 ** c, 2 ** (c + 1) - 1], "tenants": len(ts),
                     "index_p95_ms": ip, "flat_p95_ms": fp,
                     "index_meets": bool(np.all(index_ok[ts])),
                     "index_wins": bool(ip < fp and np.all(index_ok[ts]))})
    size: int | None = None
    for row in reversed(rows):
        if not row["index_wins"]:
            break
        size = 2 ** int(row["class"])
    return {"size": size, "classes": rows,
            "rule": "smallest size class (powers of two) from which every larger class has the "
                    "per-tenant index's p95 below flat's and its tenants' bounds meeting the "
                    "target; smaller tenants are searched flat (exact)"}
