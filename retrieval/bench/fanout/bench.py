"""`rwb bench fanout SPEC`: several real text collections, each in its own index, queried
serially, with a thread pool and with asyncio; per-query latency per mode, speedup over serial,
CPU accounting (is a backend CPU-bound in this process, in a server process, or waiting?), and
the quality of the fused list against each single collection where qrels exist (ranx).

The spec (YAML, ``extra="forbid"``) is :class:`FanoutSpec`; see ``sweeps/fanout-3-collections
.yaml``. Every collection is embedded with the same model through the on-disk embedding cache,
so a second run only builds indexes. Latencies are milliseconds, wall/CPU times seconds.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationError, field_validator, model_validator

from retrieval.bench.fanout.retriever import MODES, FanOut, FanoutRun, Member, Mode
from retrieval.data import TextCollection, normalize_rows
from retrieval.errors import ConfigError, param_error
from retrieval.fusion import DEFAULT_RRF_K, rrf, rrf_ranx, score_merge
from retrieval.metrics import latency_summary
from retrieval.params import Params, format_validation_error, validate_params
from retrieval.specfile import read_yaml_file

log = logging.getLogger(__name__)

ALIASES = {"qqp": "qqp-questions"}
#: reasonable defaults when a benchmark swaps the backend of every collection
DEFAULT_PARAMS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "hnswlib": ({"M": 16, "ef_construction": 200}, {"ef_search": 64}),
    "faiss-hnsw": ({"M": 16, "ef_construction": 200}, {"ef_search": 64}),
    "faiss-flat": ({}, {}),
    "faiss-ivf": ({"nlist": 128}, {"nprobe": 16}),
    "milvus": ({"index_type": "HNSW", "M": 16, "efConstruction": 200}, {"ef": 64}),
}
QUALITY_METRICS = ("ndcg@10", "recall@10", "mrr@10")
Progress = Callable[[int, int, str], None]


class FanoutCollection(Params):
    """One collection: a text corpus (seeded sample) in its own index."""

    name: str
    source: str = Field(description="text collection: qqp, reuters, scifact, cranfield, ...")
    sample: int | None = Field(None, ge=1, description="corpus texts (None: all)")
    backend: str = "hnswlib"
    build: dict[str, Any] = Field(default_factory=dict)
    search: dict[str, Any] = Field(default_factory=dict)
    server: bool = Field(False, description="milvus only: a Milvus Lite server process by URI")
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

    name: str = "fanout"
    model: str | None = Field(None, description="local embedding model (None: packaged MiniLM)")
    k: int = Field(10, ge=1, le=1000)
    seed: int = 0
    threads: int = Field(1, ge=1, le=512, description="threads inside each index")
    modes: list[Mode] = Field(default_factory=lambda: list(MODES), min_length=1)  # type: ignore[arg-type]
    warmup: int = Field(20, ge=0, description="untimed queries before each mode")
    rounds: int = Field(1, ge=1, le=100, description="repeat all modes, interleaved")
    timeout_s: float = Field(5.0, gt=0.0, description="default per-collection deadline, s")
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
    from retrieval.indexes.registry import get_backend

    where = spec.source
    for i, c in enumerate(spec.collections):
        field = f"collections[{i}]"
        cls = get_backend(c.backend, where=f"{where}: field '{field}.backend'")
        if c.server and c.backend != "milvus":
            raise param_error(f"{field}.server", "false unless backend is 'milvus'", c.server,
                              where=where)
        b = validate_params(cls.BuildParams, c.build, where=where, prefix=f"{field}.build.")
        s = validate_params(cls.SearchParams, c.search, where=where, prefix=f"{field}.search.")
        try:
            cls.check_combination(b, s, spec.k)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {field}: {exc}") from None
    return spec


def parse_fanout_spec(data: Any, source: str = "<memory>") -> FanoutSpec:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: a fan-out spec must be a YAML mapping; received "
                          f"{type(data).__name__}")
    try:
        spec = FanoutSpec.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise format_validation_error(exc, FanoutSpec, where=source) from None
    return validate_fanout_spec(spec)


def load_fanout_spec(path: str | Path) -> FanoutSpec:
    """Read and validate a fan-out spec file; errors name the file and the field."""
    p = Path(path)
    data = read_yaml_file(p)
    return parse_fanout_spec(data, source=str(p))


def with_backend(spec: FanoutSpec, backend: str, *, server: bool = False,
                 build: dict[str, Any] | None = None,
                 search: dict[str, Any] | None = None) -> FanoutSpec:
    """The same spec with every collection on ``backend`` (default params unless given)."""
    b, s = DEFAULT_PARAMS.get(backend, ({}, {}))
    cols = [c.model_copy(update={"backend": backend, "server": server,
                                 "build": dict(build if build is not None else b),
                                 "search": dict(search if search is not None else s)})
            for c in spec.collections]
    new = spec.model_copy(update={"collections": cols, "name": f"{spec.name}-{backend}"
                                  + ("-server" if server else "")})
    return validate_fanout_spec(new)


# --------------------------------------------------------------------------- data


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
        t0 = time.perf_counter()
        vecs = normalize_rows(emb.embed([items[i][1] for i in pick],
                                        batch_size=spec.embed_batch_size))
        log.info("fan-out: %s: %d texts embedded/loaded in %.1f s", c.name, len(ids),
                 time.perf_counter() - t0)
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
    """Build one index per collection (a Milvus Lite server process is started for collections
    with ``server: true``); yield the members and their build facts; close everything after."""
    from retrieval.indexes.registry import create_index, get_backend

    members: list[Member] = []
    facts: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        uri = None
        if any(p.spec.server for p in prepared):
            from retrieval.services.milvus_server import milvus_lite_server

            uri = stack.enter_context(milvus_lite_server(workdir / "milvus-server",
                                                         threads=spec.threads))
        for p in prepared:
            c = p.spec
            dim = int(p.vectors.shape[1])
            if c.server:
                cls = get_backend("milvus")
                params = validate_params(cls.BuildParams, c.build, where=f"collection {c.name}")
                index: Any = cls(dim, "cosine", params, seed=spec.seed,  # type: ignore[call-arg]
                                 threads=spec.threads, workdir=workdir, uri=uri)
            else:
                index = create_index(c.backend, dim, "cosine", c.build, seed=spec.seed,
                                     threads=spec.threads, workdir=workdir)
            stack.callback(_close_quietly, index, c.name)
            info = index.build(p.vectors)
            if c.search:
                index.set_search_params(**c.search)
            members.append(Member(c.name, index, dim, "cosine", p.doc_ids, backend=c.backend,
                                  weight=c.weight, timeout_s=c.timeout_s,
                                  namespace=c.namespace))
            facts.append({
                "name": c.name, "source": c.source, "n": len(p.doc_ids), "dim": dim,
                "backend": c.backend + (" (server)" if c.server else ""),
                "build": c.build, "search": c.search, "build_s": info.build_s,
                "model_id": p.model_id, "fingerprint": p.fingerprint,
            })
        yield members, facts


def _close_quietly(index: Any, name: str) -> None:
    try:
        index.close()
    except Exception as exc:
        log.warning("fan-out: closing index of '%s' failed: %s", name, exc)


# --------------------------------------------------------------------------- analysis


def _per_s(x: float, wall_s: float) -> float:
    """Seconds of CPU (or wait) per second of wall time = cores busy (or waiting)."""
    return x / wall_s if wall_s > 0 and math.isfinite(x) else math.nan


def _nz(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def mode_summary(run: FanoutRun, serial: FanoutRun | None) -> dict[str, Any]:
    """Latency percentiles (ms), QPS, speedup over serial (p50 and mean), CPU accounting."""
    lat = latency_summary(run.latency_ms)
    n = len(run.latency_ms)
    out: dict[str, Any] = {
        **lat,
        "n_queries": n,
        "qps": n / run.wall_s if run.wall_s > 0 else math.inf,
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "child_cpu_s": run.child_cpu_s,
        "cpu_cores": _per_s(run.cpu_s, run.wall_s),
        "runq_wait_cores": _per_s(run.wait_s, run.wall_s),
        "child_cpu_cores": _per_s(run.child_cpu_s, run.wall_s),
        "child_runq_wait_cores": _per_s(run.child_wait_s, run.wall_s),
        "member_p50_ms": {k: float(np.percentile(v, 50)) for k, v in run.member_ms.items()},
        "failures": run.failures(),
    }
    if serial is not None:
        base = latency_summary(serial.latency_ms)
        out["speedup_p50"] = base["p50_ms"] / lat["p50_ms"] if lat["p50_ms"] > 0 else None
        out["speedup_mean"] = base["mean_ms"] / lat["mean_ms"] if lat["mean_ms"] > 0 else None
    return out


def classify(modes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Where the time goes, from the CPU accounting (thresholds are rules of thumb).

    *Demand* is CPU time plus run-queue wait (time a thread was ready but had no core), per
    second of wall time, so a CPU-bound loop on a shared machine still reads as CPU-bound.

    - serial mode: this process demands >= 0.75 cores -> CPU-bound in this process; a child
      process (server) >= 0.5 -> CPU-bound in the server; otherwise waiting (I/O, RPC, sleeps);
    - threads/asyncio: speedup >= 1.3 -> parallel; no gain while the mode demanded >= 1.5
      cores (and 1.4x the serial demand) but was granted far fewer -> parallel-capable but
      starved by other processes; no gain while the process stayed near one core although
      serial was CPU-bound here -> serialised (GIL-bound, or one server thread); otherwise
      overheads (thread hand-offs cost about as much as the work) or contention.
    """
    serial = modes.get("serial")
    if serial is None:
        return {"serial": "not measured"}
    cores = _nz(serial["cpu_cores"])
    demand = cores + _nz(serial["runq_wait_cores"])
    child = _nz(serial["child_cpu_cores"]) + _nz(serial["child_runq_wait_cores"])
    if demand >= 0.75:
        where = (f"CPU-bound in this process ({cores:.2f} cores busy, {demand:.2f} demanded "
                 f"serially)")
    elif child >= 0.5:
        where = (f"CPU-bound in the server process ({child:.2f} server cores demanded, "
                 f"{cores:.2f} client cores busy): the client waits")
    else:
        where = (f"waiting ({demand:.2f} client cores, {child:.2f} server cores demanded): "
                 f"I/O, RPC or sleeps dominate")
    out = {"serial": where}
    for mode in ("threads", "asyncio"):
        m = modes.get(mode)
        if m is None:
            continue
        sp = m.get("speedup_p50") or 0.0
        used = _nz(m["cpu_cores"]) + _nz(m["child_cpu_cores"])
        wanted = _nz(m["cpu_cores"]) + _nz(m["runq_wait_cores"])
        if sp >= 1.3:
            why = f"parallel: {sp:.2f}x over serial with {used:.2f} cores busy"
        elif wanted >= 1.5 and wanted >= 1.4 * demand and _nz(m["cpu_cores"]) < 0.8 * wanted:
            why = (f"parallel-capable but starved ({sp:.2f}x): {wanted:.2f} cores demanded "
                   f"(the backend releases the GIL) and only {_nz(m['cpu_cores']):.2f} granted - "
                   f"other processes hold the cores; measure on a quiet machine")
        elif demand >= 0.75 and wanted < 1.3:
            why = (f"no gain ({sp:.2f}x): the work stays serialised (~1 core demanded) - "
                   f"GIL-bound, or one server thread")
        else:
            why = (f"no gain ({sp:.2f}x) with {used:.2f} cores busy: thread hand-offs cost "
                   f"about as much as the searches, or the cores are taken by others")
        out[mode] = why
    return out


def _qrels_for(spec: FanoutSpec, queries: PreparedQueries) -> dict[str, dict[str, int]]:
    """The query collection's qrels, doc ids prefixed with every member that holds that
    collection (judged docs absent from a sample are kept: they count as misses)."""
    holders = [c.namespace or c.name for c in spec.collections
               if ALIASES.get(c.source, c.source) == ALIASES.get(spec.queries.source,
                                                                spec.queries.source)]
    out: dict[str, dict[str, int]] = {}
    for qid in queries.ids:
        docs = queries.collection.qrels.get(qid, {})
        out[qid] = {f"{h}/{d}": g for h in dict.fromkeys(holders) for d, g in docs.items()}
    return out


def quality(spec: FanoutSpec, run: FanoutRun, queries: PreparedQueries,
            members: list[Member]) -> dict[str, Any]:
    """nDCG@10 / recall@10 / MRR@10 (ranx, via :mod:`retrieval.irmetrics`) of each single
    collection's list and of the fused lists (RRF and score merge) against the query
    collection's qrels; plus whether RRF here agrees with ``ranx.fuse``."""
    from retrieval.irmetrics import evaluate_rankings

    qrels = _qrels_for(spec, queries)
    if not any(qrels.values()):
        return {"available": False, "reason": f"'{spec.queries.source}' queries have no qrels "
                f"for any collection in this fan-out"}
    per_member: dict[str, dict[str, list[tuple[str, float]]]] = {m.name: {} for m in members}
    for qid, ans in zip(queries.ids, run.answers):
        for name, a in ans.answers.items():
            per_member[name][qid] = a.ranked
    weights = {m.name: m.weight for m in members}
    fused_rrf = {q: rrf({n: per_member[n][q] for n in per_member}, spec.k, rrf_k=spec.rrf_k,
                        weights=weights) for q in queries.ids}
    fused_score = {q: score_merge({n: per_member[n][q] for n in per_member}, spec.k)
                   for q in queries.ids}
    rankings: dict[str, dict[str, list[str]]] = {
        f"only {n}": {q: [d for d, _ in lst] for q, lst in per_member[n].items()}
        for n in per_member
    }
    rankings["fused rrf"] = {q: [d for d, _ in v] for q, v in fused_rrf.items()}
    rankings["fused score"] = {q: [d for d, _ in v] for q, v in fused_score.items()}
    rows = []
    for label, ranking in rankings.items():
        scores = evaluate_rankings(qrels, ranking, QUALITY_METRICS)
        spaces = list(dict.fromkeys(m.key_prefix[:-1] for m in members))
        share = _shares(ranking, spaces) if label.startswith("fused") else {}
        rows.append({"ranking": label, **scores.means, "n_queries": scores.n_queries,
                     "share": share})
    ranx_check = _ranx_agreement(per_member, fused_rrf, spec, weights)
    return {"available": True, "metrics": list(QUALITY_METRICS), "rows": rows,
            "qrels": f"{queries.collection.name} ({sum(map(len, qrels.values()))} judgments)",
            "ranx_rrf": ranx_check}


def _shares(ranking: Mapping[str, list[str]], names: list[str]) -> dict[str, float]:
    counts = dict.fromkeys(names, 0)
    total = 0
    for docs in ranking.values():
        for d in docs:
            counts[d.split("/", 1)[0]] += 1
            total += 1
    return {n: c / total for n, c in counts.items()} if total else {}


def _ranx_agreement(per_member: Mapping[str, Mapping[str, list[tuple[str, float]]]],
                    fused: Mapping[str, list[tuple[str, float]]], spec: FanoutSpec,
                    weights: Mapping[str, float]) -> dict[str, Any]:
    """Compare the hand-written RRF with ``ranx.fuse(method="rrf")`` on queries every member
    answered (ranx has no weights: checked only with equal weights)."""
    if len(set(weights.values())) > 1:
        return {"checked": False, "reason": "weighted RRF (ranx has no weights)"}
    qids = [q for q in fused if all(per_member[n].get(q) for n in per_member)]
    if not qids:
        return {"checked": False, "reason": "no query answered by every collection"}
    ref = rrf_ranx({n: {q: per_member[n][q] for q in qids} for n in per_member}, spec.k,
                   rrf_k=int(spec.rrf_k)) if float(spec.rrf_k).is_integer() else None
    if ref is None:
        return {"checked": False, "reason": "non-integer rrf_k"}
    w = next(iter(weights.values()), 1.0)
    same = sum(
        [d for d, _ in fused[q]] == [d for d, _ in ref[q]]
        and np.allclose([s for _, s in fused[q]], [w * s for _, s in ref[q]], rtol=1e-9)
        for q in qids
    )
    return {"checked": True, "queries": len(qids), "identical": same,
            "agrees": same == len(qids)}


# --------------------------------------------------------------------------- the bench


@dataclass(frozen=True)
class FanoutBenchResult:
    summary: dict[str, Any]
    rows: list[dict[str, Any]]
    runs: dict[str, FanoutRun]


def run_fanout_bench(spec: FanoutSpec, *, progress: Progress | None = None,
                     workdir: Path | None = None,
                     prepared: list[PreparedCollection] | None = None,
                     queries: PreparedQueries | None = None) -> FanoutBenchResult:
    """Prepare (embed, cached), build, run every mode (``rounds`` times, modes interleaved),
    analyse. See the module docstring."""
    steps = 2 + len(spec.modes) * spec.rounds
    note = progress or (lambda d, t, s: None)
    note(0, steps, "embedding")
    prepared = prepared if prepared is not None else prepare_collections(spec)
    queries = queries if queries is not None else prepare_queries(spec)
    check_dims(spec, prepared, queries)
    note(1, steps, "building indexes")
    with contextlib.ExitStack() as stack:
        base = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rwb-fo-")))
        members, facts = stack.enter_context(build_members(spec, prepared, base))
        fan = FanOut(members, spec.k, timeout_s=spec.timeout_s, fusion=spec.fusion,
                     rrf_k=spec.rrf_k)
        stack.callback(fan.close)
        note(2, steps, "searching")
        per_round: dict[str, list[FanoutRun]] = {m: [] for m in spec.modes}
        done = 2
        for r in range(spec.rounds):
            for mode in spec.modes:
                per_round[mode].append(fan.run(queries.vectors, mode, warmup=spec.warmup))
                done += 1
                note(done, steps, f"{mode} (round {r + 1}/{spec.rounds})")
        runs = {m: _pool_runs(v) for m, v in per_round.items()}
        summary = _summarise(spec, facts, runs, queries, members)
        if spec.rounds > 1:
            _round_speedups(summary, per_round)
    first = {m: v[0] for m, v in per_round.items()}
    rows = [
        {"mode": mode, "round": r, "query_id": qid, "latency_ms": a.ms,
         "member_ms": {n: x.ms for n, x in a.answers.items()},
         "failed": ",".join(sorted(a.failures)) or None, "fused_top1": (a.fused or [("", 0)])[0][0]}
        for mode, rounds in per_round.items() for r, run in enumerate(rounds)
        for qid, a in zip(queries.ids, run.answers)
    ]
    return FanoutBenchResult(summary, rows, first)


def _pool_runs(runs: list[FanoutRun]) -> FanoutRun:
    """Several rounds of one mode as one run: latencies concatenated, times summed; answers of
    the first round (every round answers the same queries)."""
    if len(runs) == 1:
        return runs[0]
    names = list(runs[0].member_ms)
    return FanoutRun(
        runs[0].mode, runs[0].answers, np.concatenate([r.latency_ms for r in runs]),
        sum(r.wall_s for r in runs), sum(r.cpu_s for r in runs),
        sum(r.child_cpu_s for r in runs),
        {n: np.concatenate([r.member_ms[n] for r in runs]) for n in names},
        wait_s=sum(r.wait_s for r in runs), child_wait_s=sum(r.child_wait_s for r in runs),
    )


def _round_speedups(summary: dict[str, Any], per_round: Mapping[str, list[FanoutRun]]) -> None:
    """With several rounds, the speedup is the median over rounds of serial p50 / mode p50
    within the same round (modes interleaved, so a burst of load elsewhere hits all alike)."""
    serial = per_round.get("serial")
    if not serial:
        return
    for mode, runs in per_round.items():
        if mode == "serial":
            continue
        ratios = [float(np.percentile(s.latency_ms, 50) / np.percentile(r.latency_ms, 50))
                  for s, r in zip(serial, runs)]
        summary["modes"][mode]["speedup_p50_rounds"] = ratios
        summary["modes"][mode]["speedup_p50"] = float(np.median(ratios))
        summary["speedup"][mode] = float(np.median(ratios))
    summary["verdict"] = classify(summary["modes"])


def _summarise(spec: FanoutSpec, facts: list[dict[str, Any]], runs: Mapping[str, FanoutRun],
               queries: PreparedQueries, members: list[Member]) -> dict[str, Any]:
    serial = runs.get("serial")
    modes = {m: mode_summary(r, serial) for m, r in runs.items()}
    first = next(iter(runs.values()))
    agree = {
        m: sum([d for d, _ in a.fused] == [d for d, _ in b.fused]
               for a, b in zip(first.answers, r.answers)) / len(r.answers)
        for m, r in runs.items()
    }
    return {
        "name": spec.name,
        "k": spec.k,
        "n_queries": len(queries.ids),
        "queries": f"{queries.collection.name} ({spec.queries.split})",
        "fusion": {"method": spec.fusion, "rrf_k": spec.rrf_k,
                   "weights": {m.name: m.weight for m in members}},
        "collections": facts,
        "modes": modes,
        "speedup": {m: s.get("speedup_p50") for m, s in modes.items() if m != "serial"},
        "verdict": classify(modes),
        "fused_identical_across_modes": agree,
        "quality": quality(spec, serial or first, queries, members),
    }


__all__ = [
    "DEFAULT_PARAMS",
    "FanoutBenchResult",
    "FanoutCollection",
    "FanoutQueries",
    "FanoutSpec",
    "classify",
    "load_fanout_spec",
    "parse_fanout_spec",
    "prepare_collections",
    "prepare_queries",
    "run_fanout_bench",
    "with_backend",
]



def write_fanout_run(spec: FanoutSpec, result: FanoutBenchResult, out: str | Path | None) -> Any:
    """Run directory: spec.yaml (resolved), manifest.json (versions, git sha, CPU, threads,
    seeds), results.parquet (one tidy row per mode x query), summary.json."""
    from retrieval.bench.summary import FanoutBenchSummary
    from retrieval.store import RunDir, RunKind

    run = RunDir.create(out, f"{RunKind.BENCH_FANOUT}-{spec.name}")
    run.write_yaml("spec.yaml", spec.model_dump(mode="json"))
    run.write_manifest(
        kind=RunKind.BENCH_FANOUT,
        spec_source=spec.source,
        seeds={"sample": spec.seed, "queries": spec.seed + 1, "index": spec.seed},
        index_threads=spec.threads,
        collections=[{k: c[k] for k in ("name", "source", "n", "backend", "model_id",
                                          "fingerprint")}
                     for c in result.summary["collections"]],
    )
    run.write_table("results.parquet", result.rows)
    run.write_summary(FanoutBenchSummary.model_validate(result.summary))
    return run
