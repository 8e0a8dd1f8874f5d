"""The fan-out benchmark spec (YAML, ``extra="forbid"``): :class:`FanoutSpec`, read and validated
through :func:`retrieval.specfile.load_model`, each collection's backend params checked against
the backend's own models; see ``sweeps/fanout-3-collections.yaml``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from retrieval.bench.fanout.retriever import MODES, Mode
from retrieval.fusion import DEFAULT_RRF_K
from retrieval.indexes.engine import backend_for, check_server_flag
from retrieval.indexes.entry import CheckedEntry, IndexEntry, check_entry
from retrieval.indexes.registry import get_backend
from retrieval.params import Params, RunName
from retrieval.specfile import load_model, with_overrides

ALIASES = {"qqp": "qqp-questions"}


class FanoutCollection(IndexEntry):
    """One collection: a text corpus (seeded sample) in its own index (the shared
    :class:`~retrieval.indexes.entry.IndexEntry`: backend + build + search, no grids)."""

    name: str
    source: str = Field(description="text collection: qqp, reuters, scifact, cranfield, ...")
    sample: int | None = Field(None, ge=1, description="corpus texts (None: all)")
    backend: str = Field(default_factory=lambda: backend_for("hnsw"))
    server: bool = Field(False, description="a private server process of the backend's "
                         "engine, by URI (engines with a local server)")
    weight: float = Field(1.0, ge=0.0, description="RRF weight")
    timeout_s: float | None = Field(None, gt=0.0, description="deadline per query, seconds")
    model: str | None = Field(None, description="embedding model (default: the spec's)")
    namespace: str | None = Field(
        None, description="doc-id namespace (default: name); collections sharing one are "
        "deduplicated by doc id when fused")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", v):
            raise ValueError("must use letters, digits, '_', '.', '-' only")
        return v


class FanoutQueries(Params):
    """Query texts: the queries of a text collection (its qrels are used for quality)."""

    source: str = "scifact"
    split: str = "test"
    n: int | None = Field(None, ge=1, description="queries (seeded sample; None: all)")


class FanoutSpec(Params):
    """A fan-out benchmark. ``k`` results per collection and in the fused list."""

    name: RunName = "fanout"
    model: str | None = Field(None, description="local embedding model (None: packaged MiniLM)")
    k: int = Field(10, ge=1, le=1000)
    seed: int = 0
    threads: int = Field(1, ge=1, le=512, description="threads inside each index")
    modes: list[Mode] = Field(default_factory=lambda: list(MODES), min_length=1)  # type: ignore[arg-type]
    warmup: int = Field(20, ge=0, description="untimed queries before each mode")
    rounds: int = Field(1, ge=1, le=100, description="repeat all modes, interleaved")
    timeout_s: float = Field(5.0, gt=0.0, description="default per-collection deadline, s")
    servers: Literal["shared", "per-collection"] = Field(
        "shared", description="collections with server: true share one Milvus Lite server "
        "process, or each gets its own (then a parallel fan-out waits on 3 processes at once)")
    fusion: Literal["rrf", "score"] = "rrf"
    rrf_k: float = Field(DEFAULT_RRF_K, ge=0.0)
    embed_batch_size: int = Field(64, ge=1)
    queries: FanoutQueries = Field(default_factory=FanoutQueries)
    collections: list[FanoutCollection] = Field(min_length=1)
    source: str = Field("<memory>", exclude=True)

    @model_validator(mode="after")
    def _unique(self) -> FanoutSpec:
        names = [c.name for c in self.collections]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"collection names must be unique; repeated: {', '.join(dup)}")
        return self


# --------------------------------------------------------------------------- spec I/O


def validate_fanout_spec(spec: FanoutSpec) -> FanoutSpec:
    """Check each collection's backend and its build/search params against the backend's own
    models and cross-field rules (e.g. ef >= k)."""
    where = spec.source
    for i, c in enumerate(spec.collections):
        field = f"collections[{i}]"
        check_entry(c, spec.k, where=where, field=field)
        check_server_flag(c.server, c.backend, f"{field}.server", where)
    return spec


def checked(spec: FanoutSpec, i: int) -> CheckedEntry:
    """Collection ``i`` of ``spec`` as validated at load (remembered on the entry)."""
    return check_entry(spec.collections[i], spec.k, where=spec.source, field=f"collections[{i}]")



def parse_fanout_spec(data: Any, source: str = "<memory>") -> FanoutSpec:
    return load_model(data, FanoutSpec, source=source, what="a fan-out spec",
                      extra={"source": source}, check=validate_fanout_spec)


def load_fanout_spec(path: str | Path) -> FanoutSpec:
    """Read and validate a fan-out spec file; errors name the file and the field."""
    p = Path(path)
    return load_model(p, FanoutSpec, what="a fan-out spec", extra={"source": str(p)},
                      check=validate_fanout_spec)


def with_backend(spec: FanoutSpec, backend: str, *, server: bool = False,
                 build: dict[str, Any] | None = None,
                 search: dict[str, Any] | None = None,
                 servers: str | None = None) -> FanoutSpec:
    """The same spec with every collection on ``backend`` (default params unless given);
    ``servers``: "shared" | "per-collection" server processes (default: the spec's)."""
    b, s = get_backend(backend).bench_defaults
    cols = [with_overrides(c, source=spec.source, backend=backend, server=server,
                           build=dict(build if build is not None else b),
                           search=dict(search if search is not None else s))
            for c in spec.collections]
    per = (servers or spec.servers) == "per-collection"
    return with_overrides(spec, collections=cols, servers=servers,
                          name=f"{spec.name}-{backend}" + (
                              ("-servers" if per else "-server") if server else ""),
                          check=validate_fanout_spec)


__all__ = [
    "ALIASES",
    "FanoutCollection",
    "FanoutQueries",
    "FanoutSpec",
    "load_fanout_spec",
    "parse_fanout_spec",
    "validate_fanout_spec",
    "with_backend",
]
