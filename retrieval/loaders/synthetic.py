"""A seeded synthetic dataset that is hard enough to index.

Points are drawn from a mixture of anisotropic Gaussian clusters whose per-dimension scale decays
(a power-law spectrum, like real embeddings), with cluster sizes that vary; queries come from the
same distribution (not copies of base points). Uniform noise would make every ANN index look bad
and every parameter look the same; this does not.

With ``attributes=True`` every base vector also gets (from a separate seeded stream, so the
vectors are the same as without):

- ``uniform``: int in [0, 1_000_000), independent of the vectors (uncorrelated filters);
- ``clustered``: int in [0, 1_000_000); with probability ``correlation`` it lies in its
  cluster's slot of the range (slot ``c`` = [c, c+1) * 1e6 / n_clusters), else uniform: a range
  filter then matches whole clusters (correlation 1) or scattered points (0);
- ``tag``: one label of ``t0..t19`` with Zipf-like frequencies, independent of the vectors;
- ``cluster``: the label ``c<cluster>`` (perfectly correlated).
"""

from __future__ import annotations

import numpy as np

from retrieval.data import Metric, VectorDataset, check_metric
from retrieval.errors import param_error
from retrieval.filtering.attrs import Attributes, LabelColumn


def make_synthetic(
    n: int = 20_000,
    dim: int = 96,
    n_queries: int = 500,
    *,
    n_clusters: int = 64,
    decay: float = 0.3,
    cluster_spread: float = 1.5,
    metric: Metric = "l2",
    seed: int = 0,
    name: str | None = None,
    attributes: bool = False,
    correlation: float = 1.0,
) -> VectorDataset:
    """Clustered vectors with a decaying spectrum (float32, deterministic for a seed)."""
    for field, value, low in (
        ("n", n, 1),
        ("dim", dim, 2),
        ("n_queries", n_queries, 1),
        ("n_clusters", n_clusters, 1),
    ):
        if int(value) < low:
            raise param_error(field, f"an integer >= {low}", value, where="synthetic dataset")
    if not 0.0 <= decay <= 3.0:
        raise param_error("decay", "in [0, 3]", decay, where="synthetic dataset")
    if not 0.0 <= correlation <= 1.0:
        raise param_error("correlation", "in [0, 1]", correlation, where="synthetic dataset")
    check_metric(metric, where="synthetic dataset")
    rng = np.random.default_rng(seed)
    scales = (np.arange(1, dim + 1, dtype=np.float64) ** -decay).astype(np.float32)
    centers = rng.standard_normal((n_clusters, dim)).astype(np.float32) * scales * 3.0
    weights = rng.dirichlet(np.full(n_clusters, 2.0))
    # a random rotation so that the spectrum is not axis-aligned
    q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    rot = q.astype(np.float32)

    drawn: list[np.ndarray] = []

    def draw(m: int) -> np.ndarray:
        labels = rng.choice(n_clusters, size=m, p=weights)
        drawn.append(labels)
        noise = rng.standard_normal((m, dim)).astype(np.float32) * scales * cluster_spread
        return np.ascontiguousarray((centers[labels] + noise) @ rot, dtype=np.float32)

    base = draw(n)
    queries = draw(n_queries)
    attrs = _attributes(drawn[0], n_clusters, correlation, seed) if attributes else None
    return VectorDataset(
        name=name or f"synthetic-{n}x{dim}",
        base=base,
        queries=queries,
        metric=metric,
        source=f"synthetic(n={n}, dim={dim}, n_queries={n_queries}, n_clusters={n_clusters}, "
        f"decay={decay}, seed={seed})",
        info={"generator": "make_synthetic", "seed": seed,
              **({"attribute_correlation": correlation} if attributes else {})},
        attributes=attrs,
    )


def _attributes(cluster: np.ndarray, n_clusters: int, correlation: float,
                seed: int) -> Attributes:
    rng = np.random.default_rng([seed, 1])
    n = cluster.shape[0]
    span = 1_000_000
    uniform = np.asarray(rng.integers(0, span, size=n), dtype=np.int64)
    slot = span // n_clusters
    in_slot = cluster * slot + rng.integers(0, max(slot, 1), size=n)
    clustered = np.where(rng.random(n) < correlation, in_slot, rng.integers(0, span, size=n))
    zipf = 1.0 / np.arange(1, 21)
    tags = np.asarray(rng.choice(20, size=n, p=zipf / zipf.sum()))
    return Attributes(n, {"uniform": uniform,
                          "clustered": clustered.astype(np.int64)},
                      {"tag": LabelColumn.from_rows(f"t{t}" for t in tags),
                       "cluster": LabelColumn.from_rows(f"c{c}" for c in cluster)})
