"""A tuned config in library-neutral terms: what a backend's build/search params mean.

Every exportable backend maps its full build/search params to one of :class:`Hnsw`, :class:`Ivf`,
:class:`Flat` or :class:`Auto` (its ``portable`` classmethod, the
:class:`~retrieval.indexes.base.SupportsPortable` capability); the exporters
(each engine folder's ``export`` module, registered in its
:class:`~retrieval.indexes.engine.EngineDescriptor`) translate these into each engine's own
names, and each engine's inverse (:class:`Inverse`) reads its own config back.
HNSW ``M`` means the same everywhere rwb exports (hnswlib, Faiss, Milvus/knowhere, Qdrant ``m``,
Weaviate ``maxConnections``): links per node on the upper layers, ``2 * M`` on layer 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval.errors import ConfigError, param_error


@dataclass(frozen=True)
class Hnsw:
    """``quantization``: None, "SQ8" (Milvus HNSW_SQ, Qdrant scalar int8), "BQ" or "PQ" (Qdrant
    binary / product); ``native``: the source engine's own params that have no neutral form
    (Qdrant's thresholds, rescore, oversampling; Redis's EPSILON) as (name, value) pairs, used
    only when exporting to ``native_engine`` itself."""

    M: int
    ef_construction: int
    ef_search: int
    quantization: str | None = None
    native_engine: str = ""
    native: tuple[tuple[str, Any], ...] = ()

    def native_for(self, engine: str) -> dict[str, Any]:
        return dict(self.native) if engine == self.native_engine else {}


@dataclass(frozen=True)
class Ivf:
    nlist: int
    nprobe: int
    encoding: str = "flat"  # flat | sq8 | sq4 | pq | rabitq (Faiss names, lower case)
    pq_m: int | None = None
    pq_nbits: int = 8
    refine: bool = False
    k_factor: int = 1


@dataclass(frozen=True)
class Flat:
    pass


@dataclass(frozen=True)
class Auto:
    """Milvus AUTOINDEX: the engine chooses; only Milvus can take it."""


Portable = Hnsw | Ivf | Flat | Auto


@dataclass(frozen=True)
class Rebuilt:
    """What an engine config means for rwb: ``backend`` with ``build`` and ``search`` params."""

    backend: str
    build: dict[str, Any]
    search: dict[str, Any]
    notes: list[str] = field(default_factory=list)


#: (portable config, metric, dim, k) -> the engine's own config (ConfigError when it cannot)
Translator = Callable[[Portable, str, int, int], dict[str, Any]]
#: (engine config, metric, dim, k, where) -> the rwb backend and params that run it
Inverse = Callable[[Mapping[str, Any], str, int, int, str], Rebuilt]
#: (engine config, metric, where) -> its neutral form (engines rwb cannot run)
PortableReader = Callable[[Mapping[str, Any], str, str], Portable]


def cannot_express(engine: str, p: Portable, why: str) -> ConfigError:
    """The one error of a translator that has no form for ``p``."""
    return ConfigError(f"engine '{engine}' cannot express this config ({type(p).__name__}): {why}")


def hnsw_only(engine: str, p: Portable) -> Hnsw:
    """``p`` when it is a plain HNSW config, else :func:`cannot_express`."""
    if not isinstance(p, Hnsw) or p.quantization:
        raise cannot_express(engine, p, f"{engine} export takes HNSW results (without "
                             f"quantization)")
    return p


def metric_is(got: str, metric: str, name: str, allowed: Mapping[str, str], where: str) -> None:
    """An inverse's check that the config's metric spelling is the data's metric."""
    if allowed.get(metric) != got:
        raise param_error(f"config.{name}", f"'{allowed.get(metric)}' (the data's metric is "
                          f"{metric})", got, where=where)


def ef_at_least_k(got: int, k: int, name: str, where: str) -> None:
    """An inverse's check that a search knob is not below the evidence's k."""
    if got < k:
        raise param_error(f"config.{name}", f">= k ({k}, the evidence's k)", got, where=where)


def dim_is(got: Any, dim: int, name: str, where: str) -> None:
    """An inverse's check that the config's dimension is the data's."""
    if got != dim:
        raise param_error(f"config.{name}", f"{dim} (the data's dimension)", got, where=where)


__all__ = [
    "Auto",
    "Flat",
    "Hnsw",
    "Inverse",
    "Ivf",
    "Portable",
    "PortableReader",
    "Rebuilt",
    "Translator",
    "cannot_express",
    "dim_is",
    "ef_at_least_k",
    "hnsw_only",
    "metric_is",
]
