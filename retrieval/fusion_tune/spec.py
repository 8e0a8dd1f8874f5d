"""The fusion tuning spec (``rwb tune fusion SPEC``), shaped like the rerank spec.

```yaml
name: scifact-fusion
dataset: scifact            # or beir:FOLDER, a text manifest name, cranfield
split: test
tuning_fraction: 0.5        # share of the judged queries in the dev split (seeded)
dense: {backend: faiss-flat, metric: cosine}
bm25: {implementation: bm25s, method: lucene, k1: 1.2, b: 0.75}
metric: ndcg@10
fusion:
  methods: [rrf, convex]
  normalisations: [min-max, z-score, dbsf]
  weights: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]   # the dense leg's weight w
  rrf_k: [10, 20, 40, 60, 100]
  depths: [10, 20, 50, 100]                                  # candidates per leg
sparse: {engine: qdrant}    # optional third leg: the BM25 weights in an engine's sparse index
```

Units: ``weights`` are the dense leg's share w in [0, 1] (BM25 gets 1 - w; for ``convex`` w is
``alpha``); with a ``sparse`` leg, every triple of ``weights`` (one per leg) normalised to sum 1
(duplicates dropped); ``rrf_k`` is RRF's rank offset (``w / (k + rank)``, rank from 1);
``depths`` are candidates taken from each leg (each leg's depth tuned separately); latency is
milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from retrieval.errors import param_error
from retrieval.fusion_tune.fuse import Candidate, grid
from retrieval.indexes.engine import sparse_engines
from retrieval.indexes.entry import CheckedEntry, check_entry
from retrieval.params import Params, RunName
from retrieval.rerank.bm25 import BM25Params
from retrieval.rerank.dataset import check_dataset
from retrieval.rerank.spec import DenseSpec, EmbedderSpec
from retrieval.specfile import load_model

Method = Literal["rrf", "convex"]
Normalisation = Literal["min-max", "z-score", "dbsf"]
METHODS: tuple[str, ...] = ("rrf", "convex")
NORMALISATIONS: tuple[str, ...] = ("min-max", "z-score", "dbsf")
_METHODS: tuple[Method, ...] = ("rrf", "convex")
_NORMALISATIONS: tuple[Normalisation, ...] = ("min-max", "z-score", "dbsf")


def _distinct(v: list[Any], what: str) -> list[Any]:
    if len(set(v)) != len(v):
        raise ValueError(f"{what} must be distinct")
    return v


class FusionGrid(Params):
    """The candidates tried on the dev split (every combination)."""

    #: rrf (``w / (k + rank)``) and/or convex (``w * normalised score``)
    methods: list[Method] = Field(default_factory=lambda: list(_METHODS), min_length=1)
    #: of the convex candidates: min-max, z-score, dbsf (Qdrant's distribution-based)
    normalisations: list[Normalisation] = Field(
        default_factory=lambda: list(_NORMALISATIONS), min_length=1)
    #: the dense leg's share w in [0, 1] (BM25: 1 - w; convex: alpha = w)
    weights: list[float] = Field(
        default_factory=lambda: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], min_length=1)
    #: RRF's rank offset k (rank from 1)
    rrf_k: list[int] = Field(default_factory=lambda: [10, 20, 40, 60, 100], min_length=1)
    #: candidates taken from each leg, each leg's depth tuned separately (>= 10)
    depths: list[int] = Field(default_factory=lambda: [10, 20, 50, 100], min_length=1)

    @field_validator("methods", "normalisations")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return _distinct(v, "entries")

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: list[float]) -> list[float]:
        if any(not 0.0 <= w <= 1.0 for w in v):
            raise ValueError("each weight (the dense leg's share) must be in [0, 1]")
        return _distinct(v, "weights")

    @field_validator("rrf_k")
    @classmethod
    def _rrf_k(cls, v: list[int]) -> list[int]:
        if any(k < 0 or k > 10_000 for k in v):
            raise ValueError("each rrf_k must be in [0, 10000]")
        return _distinct(v, "rrf_k values")

    @field_validator("depths")
    @classmethod
    def _depths(cls, v: list[int]) -> list[int]:
        if any(d < 10 or d > 1000 for d in v):
            raise ValueError("each depth must be in [10, 1000] (nDCG@10 needs 10 candidates)")
        return _distinct(v, "depths")


class SparseLegSpec(Params):
    """The third leg: the BM25 weights (the ``bm25`` leg's convention, bm25s) in ``engine``'s
    own sparse vector index (an engine whose descriptor has a ``sparse`` hook)."""

    engine: str = Field(min_length=1)


#: a grid larger than this is refused (the three-leg grid grows with the cube of each list)
MAX_CANDIDATES = 20_000
#: the grid of a three-leg spec without a ``fusion`` block (the two-leg defaults would make
#: 326,144 candidates): 19 weight triples x 27 depth triples x 5 = 2,565 candidates
THREE_LEG_GRID = {"weights": [0.25, 0.5, 1.0], "depths": [20, 50, 100], "rrf_k": [20, 60]}


class FusionLatencySpec(Params):
    """Single-query calls of each leg on ``sample_queries`` seeded test-split queries (ms)."""

    sample_queries: int = Field(100, ge=1, le=100_000)


class FusionTuneSpec(Params):
    """One fusion experiment on one collection (``dataset``: see
    :mod:`retrieval.rerank.dataset`)."""

    name: RunName = "fusion"  # the run directory runs/<name>-<time>
    #: scifact, cranfield, a text manifest name, or beir:FOLDER (qrels needed)
    dataset: str = Field(min_length=1)
    split: str = Field("test", min_length=1)  # the qrels split read (scifact: test or train)
    max_queries: int | None = Field(None, ge=4, description="seeded subset, for quick runs")
    seed: int = 0  # seeds the dev / test split, the latency sample and the test
    #: share of the judged queries in the dev split (the rest is the test split)
    tuning_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    embedder: EmbedderSpec = EmbedderSpec()  # the dense leg's model
    dense: DenseSpec = DenseSpec()  # the dense leg's index (any backend)
    #: the BM25 leg; default bm25s lucene (k1 1.2, b 0.75), the pinned tokenisation
    bm25: BM25Params = BM25Params(implementation="bm25s", method="lucene", k1=1.2, b=0.75)
    metric: Literal["ndcg@10"] = "ndcg@10"  # chosen on dev, judged on test
    fusion: FusionGrid = FusionGrid()  # the candidates tried (every combination)
    sparse: SparseLegSpec | None = None  # optional third leg (an engine's sparse index)
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance level (two-sided)")
    resamples: int = Field(10_000, ge=100, le=1_000_000,
                           description="sign flips of the paired randomisation test")
    run_depth: int = Field(100, ge=10, le=1000, description="docs per query in the TREC runs")
    latency: FusionLatencySpec = FusionLatencySpec()

    @property
    def fetch_k(self) -> int:
        """Candidates fetched from each leg (the largest depth, and the run files' depth)."""
        return max(max(self.fusion.depths), self.run_depth)


def dense_index(spec: FusionTuneSpec, source: str = "<memory>") -> CheckedEntry:
    """The dense leg validated for the ``fetch_k`` candidates it is searched for."""
    return check_entry(spec.dense, spec.fetch_k, where=source, field="dense")


def _check(spec: FusionTuneSpec, source: str) -> FusionTuneSpec:
    dataset = check_dataset(spec.dataset, spec.split, source)
    if dataset != spec.dataset:
        spec = spec.model_copy(update={"dataset": dataset})
    if "convex" not in spec.fusion.methods and "rrf" not in spec.fusion.methods:
        raise param_error("fusion.methods", "rrf and/or convex", spec.fusion.methods,
                          where=source)
    dense_index(spec, source)
    sparse = spec.sparse
    if sparse is not None:
        if "fusion" not in spec.model_fields_set:
            spec = spec.model_copy(update={"fusion": FusionGrid(**THREE_LEG_GRID)})
        engines = sparse_engines()
        if sparse.engine not in engines:
            raise param_error("sparse.engine", f"one of {', '.join(engines) or 'none here'}",
                              sparse.engine, where=source)
        if spec.bm25.implementation != "bm25s":
            raise param_error("bm25.implementation", "bm25s (the sparse leg holds bm25s' "
                              "weights)", spec.bm25.implementation, where=source)
    n = len(grid_of(spec))
    if n > MAX_CANDIDATES:
        raise param_error("fusion", f"a grid of at most {MAX_CANDIDATES} candidates (shorten "
                          "weights / depths / rrf_k)", f"{n} candidates", where=source)
    return spec


def legs_of(spec: FusionTuneSpec) -> tuple[str, ...]:
    """The legs fused: dense, bm25, and sparse when the spec names one."""
    return ("dense", "bm25", "sparse") if spec.sparse is not None else ("dense", "bm25")


def grid_of(spec: FusionTuneSpec) -> list[Candidate]:
    """Every candidate of the spec's grid (:func:`retrieval.fusion_tune.fuse.grid`)."""
    g = spec.fusion
    return grid(g.methods, g.normalisations, g.weights, g.rrf_k, g.depths, legs_of(spec))


def parse_fusion_spec(data: Mapping[str, Any] | Any, source: str = "<memory>") -> FusionTuneSpec:
    return load_model(data, FusionTuneSpec, source=source,
                      check=lambda spec: _check(spec, source))


def load_fusion_spec(path: str | Path) -> FusionTuneSpec:
    """Read and validate a spec file; errors name the file."""
    return load_model(path, FusionTuneSpec, check=lambda spec: _check(spec, str(path)))


__all__ = [
    "MAX_CANDIDATES",
    "METHODS",
    "NORMALISATIONS",
    "THREE_LEG_GRID",
    "FusionGrid",
    "FusionLatencySpec",
    "FusionTuneSpec",
    "SparseLegSpec",
    "dense_index",
    "grid_of",
    "legs_of",
    "load_fusion_spec",
    "parse_fusion_spec",
]
