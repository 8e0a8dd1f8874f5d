"""Spec overrides, applied in ONE place: the command line's options and the API verbs' keyword
options (``rwb sweep --target-recall 0.9`` = ``retrieval.sweep(spec, target_recall=0.9)``) go
through :func:`apply_overrides`, which validates each value like the spec's own field (one line
naming the option, the allowed values and what was received). An option left None keeps the
spec's value. Messages name the command-line option, the name a user of either door looks up.
"""

from __future__ import annotations

from typing import Any

from retrieval.errors import ConfigError, param_error


def apply_overrides(spec: Any, *, source: str | None = None, **options: Any) -> Any:
    """``spec`` (an index sweep, rag-study, rerank or cache spec object) with ``options`` applied.

    Index sweeps: ``strategy``, ``target_recall``, ``n_trials``, ``threads``, ``build_threads``.
    Rag-studies: ``strategy`` (only ``optuna``), ``target_recall``, ``n_trials`` (checked here,
    applied by the study runner), ``threads`` (refused), ``build_threads`` (ignored). Rerank:
    ``max_queries``, ``sample_queries``. Cache: ``max_false_hit``, ``confidence``, ``bound``.
    Fan-out bench: ``backend``, ``server``, ``servers``, ``queries``, ``rounds``. Load bench:
    ``p99_ms``, ``target_recall``, ``duration`` (s), ``client``. Churn bench:
    ``target_recall``, ``queries``. Embed bench config: any of its fields.
    ``source`` names the spec in messages (default: the spec's own ``source``, else
    ``<memory>``)."""
    from retrieval.bench.embed.spec import EmbedBenchConfig
    from retrieval.bench.fanout.spec import FanoutSpec
    from retrieval.bench.load.spec import LoadSpec
    from retrieval.cache.spec import CacheTuneSpec
    from retrieval.churn.spec import ChurnSpec
    from retrieval.rerank.spec import RerankSweepSpec
    from retrieval.study.spec import StudySpec
    from retrieval.tune.spec import SweepSpec

    rules: dict[type, Any] = {SweepSpec: _index, StudySpec: _study, RerankSweepSpec: _rerank,
                              CacheTuneSpec: _cache, FanoutSpec: _fanout, LoadSpec: _load,
                              ChurnSpec: _churn, EmbedBenchConfig: _embed}
    for model, rule in rules.items():
        if isinstance(spec, model):
            where = source or str(getattr(spec, "source", "<memory>"))
            return rule(spec, where, **options)
    raise ConfigError(f"no overrides for a {type(spec).__name__}")


def _index(spec: Any, where: str, *, strategy: str | None = None,
           target_recall: float | None = None, n_trials: int | None = None,
           threads: int | None = None,
           build_threads: int | None = None) -> Any:
    from retrieval.tune.sweep import apply_overrides as sweep_overrides

    return sweep_overrides(spec, strategy=strategy, target=target_recall, n_trials=n_trials,
                           threads=threads, build_threads=build_threads)


def _study(spec: Any, where: str, *, strategy: str | None = None,
           target_recall: float | None = None, n_trials: int | None = None,
           threads: int | None = None,
           build_threads: int | None = None) -> Any:
    from retrieval.specfile import with_overrides
    from retrieval.study.spec import check_study_spec
    from retrieval.tune.sweep import check_target_recall, is_count

    if strategy not in (None, "optuna"):
        raise ConfigError(f"{where}: a rag-study always runs Optuna (multi-objective); "
                          f"--strategy must be omitted or 'optuna'; received {strategy!r}")
    if threads is not None:  # build_threads: ignored by a rag-study, as it always was
        raise ConfigError(f"{where}: --threads applies to index sweeps, not to a "
                          f"rag-study; received {threads}")
    if n_trials is not None and not is_count(n_trials):
        raise param_error("--n-trials", "an integer >= 1", n_trials)
    if target_recall is not None:
        check_target_recall(target_recall, "--target-recall")
        constraints = {**spec.constraints.model_dump(), "target_recall": target_recall}
        spec = with_overrides(spec, constraints=constraints, check=check_study_spec)
    return spec


def _rerank(spec: Any, where: str, *, max_queries: int | None = None,
            sample_queries: int | None = None) -> Any:
    from retrieval.rerank.spec import parse_rerank_spec

    if max_queries is None and sample_queries is None:
        return spec
    data = spec.model_dump(mode="json", exclude_unset=True)
    if max_queries is not None:
        data["max_queries"] = max_queries
    if sample_queries is not None:
        data["latency"] = {**data.get("latency", {}), "sample_queries": sample_queries}
    return parse_rerank_spec(data, source=f"{where} (command-line override)")


def _cache(spec: Any, where: str, *, max_false_hit: float | None = None,
           confidence: float | None = None, bound: str | None = None) -> Any:
    from retrieval.cache.spec import parse_cache_spec

    given = {k: v for k, v in (("max_false_hit", max_false_hit), ("confidence", confidence),
                               ("bound", bound)) if v is not None}
    if not given:
        return spec
    data = spec.model_dump(mode="json")
    data["tuning"].update(given)
    return parse_cache_spec(data, source=f"{where} (command-line override)")


def _fanout(spec: Any, where: str, *, backend: str | None = None, server: bool = False,
            servers: str | None = None, queries: int | None = None,
            rounds: int | None = None) -> Any:
    from retrieval.bench.fanout.spec import parse_fanout_spec, validate_fanout_spec, with_backend
    from retrieval.indexes.engine import server_backends
    from retrieval.specfile import with_overrides

    if server and backend not in server_backends():
        raise ConfigError(f"bench fanout: --server needs --backend one of "
                          f"{', '.join(server_backends())}; received {backend!r}")
    if backend:
        spec = with_backend(spec, backend, server=server, servers=servers)
    elif servers:
        spec = with_overrides(spec, servers=servers, check=validate_fanout_spec)
    if queries is not None or rounds is not None:
        data = spec.model_dump(mode="json")
        if queries is not None:
            data["queries"]["n"] = queries
        if rounds is not None:
            data["rounds"] = rounds
        spec = parse_fanout_spec(data, source=f"{spec.source} (with command-line overrides)")
    return spec


def _load(spec: Any, where: str, *, p99_ms: float | None = None,
          target_recall: float | None = None, duration: float | None = None,
          client: str | None = None) -> Any:
    from retrieval.bench.load.spec import validate_load_spec
    from retrieval.specfile import with_overrides

    if p99_ms is not None or target_recall is not None:
        slo = with_overrides(spec.slo, source=spec.source, p99_ms=p99_ms,
                             target_recall=target_recall)
        spec = with_overrides(spec, slo=slo, check=validate_load_spec)
    return with_overrides(spec, duration_s=duration, client=client, check=validate_load_spec)


def _churn(spec: Any, where: str, *, target_recall: float | None = None,
           queries: int | None = None) -> Any:
    from retrieval.churn.spec import validate_churn_spec
    from retrieval.specfile import with_overrides

    return with_overrides(spec, target_recall=target_recall, queries=queries,
                          check=validate_churn_spec)


def _embed(spec: Any, where: str, **fields: Any) -> Any:
    from retrieval.bench.embed.spec import EmbedBenchConfig
    from retrieval.specfile import load_model

    given = {k: v for k, v in fields.items() if v is not None}
    if not given:
        return spec
    return load_model({**spec.model_dump(exclude_unset=True), **given}, EmbedBenchConfig,
                      source=where, what="an embed bench config")


__all__ = ["apply_overrides"]
