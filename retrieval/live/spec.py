"""The spec of a live sweep: a sweep spec with NO ``dataset:`` and a ``live:`` section.

```yaml
live: {engine: pgvector, dsn: ${RWB_PG_URL}, table: items, vector_column: emb, id_column: item_id}
queries: {log: prod.jsonl}        # or {log: q.npy} / {log: q.parquet} / {otlp: DIR} / {sample: 500}
k: 10
target_recall: 0.95
```

``live:`` is passed whole to the engine's attach hook (its own pydantic model validates the
keys); ``${NAME}`` in a string is expanded from the environment there. ``queries`` (and
``lab_queries``) are :class:`QueriesSpec`; ``budget`` paces every search on the live collection
(:class:`BudgetSpec`); ``ground_truth`` picks how the exact top-k is computed (the engine's exact
path or a snapshot, :class:`GroundTruthSpec`); ``search`` lists explicit knob values to measure
(a grid) instead of the target search.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from retrieval.errors import ConfigError
from retrieval.live.watch import WatchSection
from retrieval.params import RunName
from retrieval.specfile import load_model
from retrieval.tune.config import ConfidenceSpec

#: OTLP span attributes that carry a retrieval query's text, tried in order: the OpenTelemetry
#: GenAI retrieval span (``gen_ai.retrieval.query.text``) and OpenInference's RETRIEVER span
#: (``input.value``)
OTLP_ATTRIBUTES = ("gen_ai.retrieval.query.text", "input.value")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class QueriesSpec(_Model):
    """Where the queries come from: exactly one of

    - ``log``: a file of the user's queries: ``.npy`` (float32 (n, dim) vectors), ``.jsonl``
      (one object a line with ``vector`` (a list of floats) or ``text``, optional ``id`` and
      ``ts``) or ``.parquet`` (the same columns); texts are embedded with ``model``;
    - ``otlp``: a folder (or one file) of OTLP JSON trace exports (``.json`` / ``.jsonl``: one
      export object a line or a whole file); the query text of every span that has one of
      ``attributes`` (default: :data:`OTLP_ATTRIBUTES`), embedded with ``model``;
    - ``sample``: N vectors sampled from the collection itself (seeded): NOT production traffic,
      and every output says so.

    ``limit``: use at most this many queries (the first ones of the log; None: all).
    """

    log: str | None = None
    otlp: str | None = None
    sample: int | None = Field(None, ge=1, le=1_000_000)
    model: str | None = Field(None, description="embedding model of texts (None: the packaged "
                                                "MiniLM)")
    attributes: list[str] | None = Field(None, min_length=1)
    limit: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _one_source(self) -> QueriesSpec:
        given = [k for k in ("log", "otlp", "sample") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"exactly one of log, otlp, sample; received {given or 'none'}")
        if self.attributes is not None and self.otlp is None:
            raise ValueError("'attributes' applies to 'otlp' only")
        return self

    @property
    def not_production(self) -> bool:
        return self.sample is not None


class BudgetSpec(_Model):
    """What the sweep may ask of the live collection: ``max_qps`` (searches a second, the pace
    of every search, exact ones included), ``concurrency`` (searches at once, each on its own
    handle), ``time_limit_s`` (wall seconds; a sweep past it stops with what it measured, said
    in the summary)."""

    max_qps: float = Field(20.0, gt=0.0, le=100_000.0)
    concurrency: int = Field(1, ge=1, le=64)
    time_limit_s: float = Field(600.0, gt=0.0)


class GroundTruthSpec(_Model):
    """How the exact top-k of the queries is computed: ``exact`` (the engine's own exact path,
    paced by the budget) or ``snapshot`` (the vectors streamed out into rwb's out-of-core store,
    ``batch`` rows a chunk, then rwb's exact search; ``dir`` keeps the snapshot and makes it
    resumable, default: the run's folder)."""

    method: Literal["exact", "snapshot"] = "exact"
    batch: int = Field(10_000, ge=100, le=1_000_000)
    dir: str | None = None


class LiveSweepSpec(_Model):
    """A sweep of a live collection's search-time knobs (no build). Recall is recall@k by id."""

    name: RunName = "live"
    live: dict[str, Any]
    queries: QueriesSpec
    lab_queries: QueriesSpec | None = None
    k: int = Field(10, ge=1, le=1000)
    target_recall: float = Field(0.95, gt=0.0, le=1.0)
    seed: int = 0
    #: share of the queries held out from tuning, used only to report the chosen point
    heldout_fraction: float = Field(0.5, ge=0.0, le=0.9)
    confidence: ConfidenceSpec = Field(default_factory=ConfidenceSpec)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    ground_truth: GroundTruthSpec = Field(default_factory=GroundTruthSpec)
    #: the knob to tune (default: the collection's first knob) and its range
    knob: str | None = None
    search_range: tuple[int, int] | None = None
    #: other search params held fixed during the sweep (engine's rwb names: iterative_scan)
    fixed: dict[str, Any] = Field(default_factory=dict)
    #: a topology run folder of the lab (``rwb sweep`` with ``topology:``): the collection's
    #: own segment count is compared with the lab's (a warning when they differ) and the lab's
    #: knob for that count reported (relative paths: from the spec file's folder)
    lab_topology: str | None = None
    #: `rwb watch`'s section (window, sample, alarm); ``rwb sweep`` ignores it
    watch: WatchSection | None = None

    source: str = Field("<memory>", exclude=True)

    @model_validator(mode="after")
    def _engine_named(self) -> LiveSweepSpec:
        if not isinstance(self.live.get("engine"), str):
            raise ValueError("live.engine must name the engine of the collection (an engine "
                             "rwb can attach to)")
        return self


def is_live_spec(data: Any) -> bool:
    """A spec mapping with a ``live:`` section (and so no ``dataset:``)."""
    return isinstance(data, Mapping) and "live" in data


def parse_live_spec(data: Mapping[str, Any] | Any, source: str = "<memory>") -> LiveSweepSpec:
    if isinstance(data, Mapping) and "dataset" in data:
        raise ConfigError(f"{source}: a live spec has no 'dataset' (the collection named in "
                          f"'live' is the data); remove one of them")
    return load_model(data, LiveSweepSpec, source=source, extra={"source": source})


def load_live_spec(path: str | Path) -> LiveSweepSpec:
    from retrieval.specfile import read_yaml

    return parse_live_spec(read_yaml(path), str(path))


__all__ = ["OTLP_ATTRIBUTES", "BudgetSpec", "GroundTruthSpec", "LiveSweepSpec", "QueriesSpec",
           "is_live_spec", "load_live_spec", "parse_live_spec"]
