"""The fan-out benchmark's live side before any query: load, sample and embed the collections and
the queries (through the on-disk embedding cache, so a second run only builds indexes), check one
dimension fits all, and build one index per collection."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bench.fanout.retriever import Member
from retrieval.bench.fanout.spec import ALIASES, FanoutCollection, FanoutSpec, checked
from retrieval.data import TextCollection, normalize_rows
from retrieval.errors import ConfigError, param_error
from retrieval.indexes.engine import LocalServer, local_server_of
from retrieval.indexes.entry import apply_search
from retrieval.timing import timed

log = logging.getLogger(__name__)

@dataclass(frozen=True, eq=False)
class PreparedCollection:
    spec: FanoutCollection
    doc_ids: tuple[str, ...]
    vectors: np.ndarray
    model_id: str
    fingerprint: str


@dataclass(frozen=True, eq=False)
class PreparedQueries:
    ids: tuple[str, ...]
    vectors: np.ndarray
    collection: TextCollection


def _collection(source: str, split: str = "test") -> TextCollection:
    from retrieval.loaders.catalog import load_text_collection

    return load_text_collection(ALIASES.get(source, source), split=split)


def _sample(rng: np.random.Generator, n: int, k: int | None) -> np.ndarray:
    if k is None or k >= n:
        return np.arange(n)
    return np.sort(rng.choice(n, size=k, replace=False))


def prepare_collections(spec: FanoutSpec) -> list[PreparedCollection]:
    """Load, sample (seeded; collection order kept) and embed every collection (cached)."""
    from retrieval.embed import get_embedder

    out = []
    for c in spec.collections:
        coll = _collection(c.source)
        items = [(d, t) for d, t in coll.corpus.items() if t.strip()]
        if c.sample is not None and c.sample > len(items):
            raise param_error(f"collections.{c.name}.sample", f"<= {len(items)} (texts in "
                              f"'{coll.name}')", c.sample, where=spec.source)
        pick = _sample(np.random.default_rng(spec.seed), len(items), c.sample)
        ids = tuple(items[i][0] for i in pick)
        emb = get_embedder(c.model or spec.model)
        with timed(pause_gc=False) as sw:
            vecs = normalize_rows(emb.embed([items[i][1] for i in pick],
                                            batch_size=spec.embed_batch_size))
        log.info("fan-out: %s: %d texts embedded/loaded in %.1f s", c.name, len(ids), sw.s)
        out.append(PreparedCollection(c, ids, vecs, emb.model_id, coll.fingerprint))
    return out


def prepare_queries(spec: FanoutSpec) -> PreparedQueries:
    from retrieval.embed import get_embedder

    coll = _collection(spec.queries.source, spec.queries.split)
    items = [(q, t) for q, t in coll.queries.items() if t.strip()]
    if not items:
        raise ConfigError(f"{spec.source}: field 'queries.source': collection '{coll.name}' has "
                          f"no queries; pick one with queries (e.g. scifact, cranfield)")
    if spec.queries.n is not None and spec.queries.n > len(items):
        raise param_error("queries.n", f"<= {len(items)} (queries of '{coll.name}')",
                          spec.queries.n, where=spec.source)
    pick = _sample(np.random.default_rng(spec.seed + 1), len(items), spec.queries.n)
    emb = get_embedder(spec.model)
    vecs = normalize_rows(emb.embed([items[i][1] for i in pick],
                                    batch_size=spec.embed_batch_size))
    return PreparedQueries(tuple(items[i][0] for i in pick), vecs, coll)


def check_dims(spec: FanoutSpec, prepared: list[PreparedCollection],
               queries: PreparedQueries) -> None:
    """One embedding dimension for every collection and the queries, before any index is
    built (ConfigError naming each collection's model and dimension)."""
    dims = {p.spec.name: int(p.vectors.shape[1]) for p in prepared}
    qdim = int(queries.vectors.shape[1])
    if set(dims.values()) != {qdim}:
        listed = ", ".join(f"{p.spec.name}={dims[p.spec.name]} ({p.model_id})" for p in prepared)
        raise ConfigError(
            f"{spec.source}: collections have different embedding dimensions ({listed}; "
            f"queries {qdim}); one query vector must fit all: embed every collection with the "
            f"same model"
        )


# --------------------------------------------------------------------------- indexes


@contextlib.contextmanager
def build_members(spec: FanoutSpec, prepared: list[PreparedCollection],
                  workdir: Path) -> Iterator[tuple[list[Member], list[dict[str, Any]]]]:
    """Build one index per collection (collections with ``server: true`` are served by their
    engine's private server process (:data:`retrieval.indexes.engine.LocalServer`): one shared
    per engine, or one each with ``servers: per-collection``); yield the members and their build
    facts; close everything after."""
    from retrieval.indexes.registry import create_index, get_backend

    members: list[Member] = []
    facts: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        per = spec.servers == "per-collection"
        served = [p for p in prepared if p.spec.server]
        shared: dict[str, str] = {}
        if served and not per:
            for backend in dict.fromkeys(p.spec.backend for p in served):
                serve = _serve(backend)
                shared[backend] = stack.enter_context(
                    serve(workdir / f"{backend}-server", threads=spec.threads))
        own = _start_servers(stack, [(p.spec.backend, workdir / f"server-{p.spec.name}")
                                     for p in served if per], spec.threads)
        for p in prepared:
            c = p.spec
            dim = int(p.vectors.shape[1])
            ce = checked(spec, spec.collections.index(c))  # validated at load: remembered
            (bp,) = ce.builds()
            if c.server:
                uri = own.pop(0) if per else shared[c.backend]  # its own, or the shared one
                cls = get_backend(c.backend)
                index: Any = cls(dim, "cosine", bp, seed=spec.seed,  # type: ignore[call-arg]
                                 threads=spec.threads, workdir=workdir, uri=uri)
            else:
                index = create_index(c.backend, dim, "cosine", bp, seed=spec.seed,
                                     threads=spec.threads, workdir=workdir)
            stack.callback(_close_quietly, index, c.name)
            info = index.build(p.vectors)
            if c.search:
                apply_search(index, ce.configs(bp)[0])
            members.append(Member(c.name, index, dim, "cosine", p.doc_ids, backend=c.backend,
                                  weight=c.weight, timeout_s=c.timeout_s,
                                  namespace=c.namespace))
            facts.append({
                "name": c.name, "source": c.source, "n": len(p.doc_ids), "dim": dim,
                "backend": c.backend + ((" (own server)" if per else " (server)")
                                        if c.server else ""),
                "build": c.build, "search": c.search, "build_s": info.build_s,
                "model_id": p.model_id, "fingerprint": p.fingerprint,
            })
        yield members, facts


def _serve(backend: str) -> LocalServer:
    serve = local_server_of(backend)
    if serve is None:  # checked at the spec (check_server_flag)
        raise ConfigError(f"backend '{backend}' has no local server")
    return serve


def _start_servers(stack: contextlib.ExitStack, dirs: list[tuple[str, Path]],
                   threads: int) -> list[str]:
    """One server per (backend, folder), started at the same time (each takes seconds to
    import and answer); their stops are pushed on ``stack``. The URIs, in order."""
    from concurrent.futures import ThreadPoolExecutor

    if not dirs:
        return []
    cms = [_serve(backend)(d, threads=threads) for backend, d in dirs]
    with ThreadPoolExecutor(len(cms)) as pool:
        futures = [pool.submit(cm.__enter__) for cm in cms]
    uris, first = [], None
    for cm, fut in zip(cms, futures):
        exc = fut.exception()
        if exc is None:
            stack.push(cm.__exit__)
            uris.append(fut.result())
        else:
            first = first or exc
    if first is not None:
        raise first
    return uris


def _close_quietly(index: Any, name: str) -> None:
    try:
        index.close()
    except Exception as exc:
        log.warning("fan-out: closing index of '%s' failed: %s", name, exc)


__all__ = [
    "PreparedCollection",
    "PreparedQueries",
    "build_members",
    "check_dims",
    "prepare_collections",
    "prepare_queries",
]
