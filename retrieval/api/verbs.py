"""The verbs of the public API: what ``rwb eval``, ``rwb sweep``, ``rwb tune rerank|cache``,
``rwb bench embed|fanout``, ``rwb export``, ``rwb verify`` and ``rwb report`` do, callable from
Python through the same library functions the CLI calls (nothing is printed; errors raise
:class:`retrieval.errors.RwbError` subclasses with the CLI's one-line messages).

A spec is a YAML path, a mapping (the YAML's content) or a spec object. Keyword options are the
command-line overrides, validated like the spec's own fields. Heavy modules are imported when a
verb runs, so ``import retrieval`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from retrieval.api.results import (
    BenchRun,
    CacheRun,
    EvalRun,
    ExportedConfig,
    FusionRun,
    LiveSweepRun,
    Report,
    RerankRun,
    RunResult,
    StudyRun,
    SweepRun,
    Verification,
)
from retrieval.errors import ConfigError

if TYPE_CHECKING:
    from retrieval.data import VectorDataset

PathLike = str | Path
M = TypeVar("M")
#: progress callback of eval / sweep / tune rerank / bench: (done, total, description)
Progress = Callable[[int, int, str], None]


def _spec(spec: Any, model: type[M], parse: Callable[..., M], load: Callable[[Any], M],
          what: str) -> M:
    """``spec`` as a ``model``: a path is read, a mapping validated, a model (the typed spec
    objects exported from ``retrieval``) validated again as the YAML would be (relative paths,
    dataset names and cross-field checks)."""
    if isinstance(spec, model):
        dump = getattr(spec, "model_dump", None)
        if dump is None:
            return spec
        return parse(dump(by_alias=True, exclude_unset=True), source=f"<{what} object>")
    if isinstance(spec, str | Path):
        return load(spec)
    if isinstance(spec, Mapping):
        return parse(dict(spec), source=f"<{what} mapping>")
    raise ConfigError(f"{what}: expected a YAML path, a mapping or a {model.__name__}; "
                      f"received {type(spec).__name__}")


def _index_spec(spec: Any, dataset: VectorDataset | None) -> Any:
    from retrieval.specfile import with_overrides
    from retrieval.tune.spec import SweepSpec, load_spec, parse_spec, validate_spec

    if dataset is not None and isinstance(spec, Mapping) and "dataset" not in spec:
        spec = {**spec, "dataset": dataset.name}
    out = validate_spec(_spec(spec, SweepSpec, parse_spec, load_spec, "sweep spec"))
    if dataset is not None and out.dataset != dataset.name:  # the run records what it measured
        out = with_overrides(out, dataset=dataset.name)
    return out


def evaluate(
    spec: Any,
    *,
    out: PathLike | None = None,
    dataset: VectorDataset | None = None,
    threads: int | None = None,
    build_threads: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> EvalRun:
    """``rwb eval``: measure every build x search config of ``spec``; write the run.

    ``dataset`` (e.g. :meth:`VectorDataset.from_arrays`) replaces the spec's dataset; a mapping
    spec may then leave ``dataset`` out. Ground truth is computed exactly (Faiss flat search,
    cached by the data's fingerprint)."""
    from retrieval.api.overrides import apply_overrides
    from retrieval.tune.runner import run_eval
    from retrieval.tune.summary import EvalSummary

    checked = apply_overrides(_index_spec(spec, dataset), threads=threads,
                              build_threads=build_threads)
    result = run_eval(checked, out, progress=progress, dataset=dataset, force=force)
    return EvalRun(result.run.path, EvalSummary.model_validate(result.summary))


def _is_live(spec: Any) -> bool:
    """A spec with a ``live:`` section (a mapping, a LiveSweepSpec or a YAML file)."""
    from retrieval.live.spec import LiveSweepSpec, is_live_spec
    from retrieval.specfile import read_yaml

    if isinstance(spec, LiveSweepSpec):
        return True
    if isinstance(spec, Mapping):
        return is_live_spec(spec)
    if isinstance(spec, str | Path):
        try:
            return is_live_spec(read_yaml(spec))
        except ConfigError:
            return False
    return False


def _live_sweep(spec: Any, out: PathLike | None, *, target_recall: float | None,
                force: bool) -> Any:
    from retrieval.live.run import run_live_sweep
    from retrieval.live.spec import LiveSweepSpec, load_live_spec, parse_live_spec
    from retrieval.specfile import with_overrides

    if isinstance(spec, LiveSweepSpec):
        checked = spec
    elif isinstance(spec, Mapping):
        checked = parse_live_spec(spec)
    else:
        checked = load_live_spec(spec)
    if target_recall is not None:
        checked = with_overrides(checked, target_recall=target_recall)
    run, summary = run_live_sweep(checked, out, force=force)
    return LiveSweepRun(run.path, summary)


def _is_study(spec: Any) -> bool:
    from retrieval.study.spec import KIND, StudySpec, is_study_spec

    if isinstance(spec, StudySpec):
        return True
    if isinstance(spec, Mapping):
        return spec.get("kind") == KIND
    return isinstance(spec, str | Path) and is_study_spec(spec)


def _study(spec: Any, out: PathLike | None, *, storage: str | None, study: str | None,
           n_trials: int | None, progress: Progress | None, force: bool = False,
           **options: Any) -> StudyRun:
    from retrieval.api.overrides import apply_overrides
    from retrieval.study.run import StudySummary, run_study
    from retrieval.study.spec import StudySpec, load_study_spec, parse_study_spec

    s = _spec(spec, StudySpec, parse_study_spec, load_study_spec, "rag-study spec")
    s = apply_overrides(s, n_trials=n_trials, **options)
    note = None if progress is None else (lambda msg: progress(0, 0, msg))
    result = run_study(s, out, storage=storage, study_name=study, n_trials=n_trials,
                       progress=note, force=force)
    return StudyRun(result.run.path, StudySummary.model_validate(result.summary))


def sweep(
    spec: Any,
    *,
    out: PathLike | None = None,
    strategy: str | None = None,
    target_recall: float | None = None,
    storage: str | None = None,
    study: str | None = None,
    n_trials: int | None = None,
    threads: int | None = None,
    build_threads: int | None = None,
    dataset: VectorDataset | None = None,
    progress: Progress | None = None,
    force: bool = False,
    executor: str = "local",
    ray_address: str | None = None,
    trace: bool = False,
    otlp_dir: PathLike | None = None,
    qrels: Mapping[str, Mapping[str, int]] | None = None,
) -> SweepRun | StudyRun:
    """``rwb sweep``: tune ``spec`` into an Optuna study (resumed when ``out`` or ``storage`` +
    ``study`` name an existing one) and choose the cheapest config meeting the target per
    backend. A ``kind: rag-study`` spec runs the cross-layer study instead (a :class:`StudyRun`).
    ``executor="ray"`` runs each build config as a Ray task (on the cluster at ``ray_address``).
    ``trace`` (or ``otlp_dir``): one OpenTelemetry span per completed trial, written as OTLP
    JSON lines into ``otlp_dir`` and/or sent to ``$OTEL_EXPORTER_OTLP_ENDPOINT`` after the sweep.
    ``qrels`` (query id -> doc id -> grade): the judgments of an in-memory ``dataset`` for a
    spec's quality ``target`` (``{ndcg_non_inferior: M}``, :mod:`retrieval.tune.quality`).
    """
    if _is_live(spec):
        given = {"--strategy": strategy not in (None, "target"), "--storage": storage,
                 "--study": study, "--n-trials": n_trials, "--threads": threads,
                 "--build-threads": build_threads, "dataset": dataset, "qrels": qrels,
                 "--executor": executor != "local", "--ray-address": ray_address,
                 "--trace": trace or otlp_dir}
        wrong = [k for k, v in given.items() if v]
        if wrong:
            raise ConfigError(f"{', '.join(wrong)} do(es) not apply to a live spec (an attached "
                              f"collection is tuned in place by target search; no build, no "
                              f"study storage)")
        return _live_sweep(spec, out, target_recall=target_recall, force=force)
    trace = bool(trace or otlp_dir is not None)
    if trace:
        from retrieval.otel import check_trace_args

        check_trace_args(trace, otlp_dir)
    if _is_study(spec):
        if trace:
            raise ConfigError("--trace applies to index sweeps (one span per trial), not to a "
                              "rag-study")
        if executor != "local" or ray_address is not None:
            raise ConfigError("--executor / --ray-address apply to index sweeps, not to a "
                              "rag-study")
        if dataset is not None:
            raise ConfigError("a rag-study spec names its own datasets; 'dataset' applies to "
                              "index sweeps only")
        return _study(spec, out, storage=storage, study=study, strategy=strategy,
                      target_recall=target_recall, n_trials=n_trials, threads=threads,
                      build_threads=build_threads, progress=progress, force=force)
    from retrieval.api.overrides import apply_overrides
    from retrieval.tune.summary import SweepSummary
    from retrieval.tune.sweep import run_sweep

    checked = apply_overrides(_index_spec(spec, dataset), strategy=strategy,
                              target_recall=target_recall, n_trials=n_trials, threads=threads,
                              build_threads=build_threads)
    studied = ("scale" if checked.scale is not None else
               "tenants" if checked.tenants is not None else
               "topology" if checked.topology is not None else
               "cold" if checked.cold else None)
    if trace and studied is not None:
        raise ConfigError(f"{checked.source}: --trace applies to sweeps with an Optuna study "
                          f"(one span per trial); a spec with '{studied}' has none")
    result = run_sweep(checked, out, storage=storage, study=study, dataset=dataset,
                       progress=progress, force=force, executor=executor,
                       ray_address=ray_address, qrels=qrels)
    if trace:
        _trace_sweep(checked, result.run.path, storage, study, otlp_dir)
    return SweepRun(result.run.path, SweepSummary.model_validate(result.summary))


def _trace_sweep(spec: Any, run_path: Path, storage: str | None, study: str | None,
                 otlp_dir: PathLike | None) -> None:
    from retrieval.otel import start_tracing
    from retrieval.tune.storage import default_url
    from retrieval.tune.trace import trace_trials

    tracing = start_tracing(Path(otlp_dir) if otlp_dir is not None else None,
                            service="rwb-sweep", run_name=spec.name, scope="rwb.sweep")
    if tracing is None:  # pragma: no cover - check_trace_args made sure of an output
        return
    try:
        trace_trials(tracing, storage or default_url(run_path), study or spec.name, spec.k)
    finally:
        tracing.close()


def tune_rerank(
    spec: Any,
    *,
    out: PathLike | None = None,
    max_queries: int | None = None,
    sample_queries: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
    reranker: Any = None,
) -> RerankRun:
    """``rwb tune rerank``: nDCG@10 / recall per rerank depth against whole-stage latency, the
    chosen depth and (if enabled) the BM25 fallback threshold.

    ``reranker``: your own reranker, a callable ``(query, passages) -> scores`` (higher is more
    relevant, one float per passage, pointwise) or an object with ``score(query, passages)``.
    The run records it by import path ``module:function`` (what ``verify`` re-imports); a
    lambda or local function is recorded without one (pass it to ``verify(reranker=)``)."""
    from retrieval.api.overrides import apply_overrides
    from retrieval.rerank.run import RerankSweepSummary, run_rerank_sweep
    from retrieval.rerank.spec import RerankSweepSpec, load_rerank_spec, parse_rerank_spec

    s = _spec(spec, RerankSweepSpec, parse_rerank_spec, load_rerank_spec, "rerank spec")
    source = str(spec) if isinstance(spec, str | Path) else "<memory>"
    s = apply_overrides(s, source=source, max_queries=max_queries, sample_queries=sample_queries)
    if reranker is not None:
        from retrieval.rerank.custom import CallableReranker, callable_path

        CallableReranker(reranker)  # refuses what is neither callable nor a scorer, early
        s = s.model_copy(update={"reranker": s.reranker.model_validate(
            {"kind": "callable", "callable": callable_path(reranker)})})
    result = run_rerank_sweep(s, out, spec_source=source, progress=progress, force=force,
                              reranker=reranker)
    return RerankRun(result.run_dir.path, RerankSweepSummary.model_validate(result.summary))


def tune_fusion(
    spec: Any,
    *,
    out: PathLike | None = None,
    max_queries: int | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> FusionRun:
    """``rwb tune fusion``: dense + BM25 fusion (RRF k / weights, convex alpha with min-max,
    z-score or DBSF normalisation, each leg's depth) tuned on a dev split and judged on the test
    split with a paired randomisation test against RRF(60) and the best single leg
    (:mod:`retrieval.fusion_tune`)."""
    from retrieval.fusion_tune.run import run_fusion_tune
    from retrieval.fusion_tune.spec import FusionTuneSpec, load_fusion_spec, parse_fusion_spec
    from retrieval.fusion_tune.summary import FusionTuneSummary

    s = _spec(spec, FusionTuneSpec, parse_fusion_spec, load_fusion_spec, "fusion spec")
    source = str(spec) if isinstance(spec, str | Path) else "<memory>"
    if max_queries is not None:
        data = s.model_dump(mode="json", exclude_unset=True)
        data["max_queries"] = max_queries
        s = parse_fusion_spec(data, source=f"{source} (command-line override)")
    result = run_fusion_tune(s, out, spec_source=source, progress=progress, force=force)
    return FusionRun(result.run_dir.path, FusionTuneSummary.model_validate(result.summary))


def tune_cache(
    spec: Any,
    *,
    out: PathLike | None = None,
    redis_url: str | None = None,
    max_false_hit: float | None = None,
    confidence: float | None = None,
    bound: str | None = None,
    keep_index: bool = False,
    write: bool = True,
    force: bool = False,
) -> CacheRun:
    """``rwb tune cache``: the largest semantic-cache threshold whose upper confidence bound on
    the false-hit rate meets the cap, on a live Redis (``redis_url``, else ``$REDIS_URL``, else
    a private server). ``write=False`` keeps the run in memory (``path`` is None)."""
    from retrieval.api.overrides import apply_overrides
    from retrieval.cache.run import CacheTuneSummary, run_cache_tuning
    from retrieval.cache.spec import CacheTuneSpec, load_cache_spec, parse_cache_spec

    s = _spec(spec, CacheTuneSpec, parse_cache_spec, load_cache_spec, "cache spec")
    s = apply_overrides(s, max_false_hit=max_false_hit, confidence=confidence, bound=bound)
    result = run_cache_tuning(s, redis_url=redis_url, out=None if out is None else str(out),
                              keep_index=keep_index, write=write, force=force)
    path = getattr(result.run_dir, "path", None)
    return CacheRun(path, CacheTuneSummary.model_validate(result.summary))


def bench_embed(config: Any = None, *, out: PathLike | None = None,
                progress: Progress | None = None, force: bool = False,
                **overrides: Any) -> BenchRun:
    """``rwb bench embed``: embedding throughput one text per call vs batches. ``config`` is a
    YAML path, a mapping, an ``EmbedBenchConfig`` or None (defaults); ``overrides`` are its
    fields (``collection=``, ``sample=``, ``batch_sizes=``, ...)."""
    from retrieval.api.overrides import apply_overrides
    from retrieval.bench.embed.run import run_embed_bench, write_embed_run
    from retrieval.bench.embed.spec import EmbedBenchConfig, load_embed_config
    from retrieval.bench.summary import EmbedBenchSummary
    from retrieval.runs import check_out_dir
    from retrieval.specfile import load_model

    given = any(v is not None for v in overrides.values())
    if config is None or isinstance(config, str | Path):
        cfg = load_embed_config(config)
        where = "bench embed" if config is None else (
            str(config) + (" (with command-line overrides)" if given else ""))
    elif isinstance(config, EmbedBenchConfig | Mapping):
        data = config.model_dump() if isinstance(config, EmbedBenchConfig) else dict(config)
        cfg = load_model(data, EmbedBenchConfig, source="<embed bench config>",
                         what="an embed bench config")
        where = "<embed bench config>"
    else:
        raise ConfigError(f"embed bench config: expected a YAML path, a mapping or an "
                          f"EmbedBenchConfig; received {type(config).__name__}")
    cfg = apply_overrides(cfg, source=where, **overrides)
    check_out_dir(out, force=force)  # before minutes of measuring
    result = run_embed_bench(cfg, progress=progress)
    run = write_embed_run(result, out, force=force)
    return BenchRun(run.path, EmbedBenchSummary.model_validate(result.summary),
                    rows=tuple(result.rows), outcome=result)


def bench_fanout(spec: Any, *, out: PathLike | None = None,
                 progress: Progress | None = None, force: bool = False,
                 backend: str | None = None, server: bool = False,
                 servers: str | None = None, queries: int | None = None,
                 rounds: int | None = None) -> BenchRun:
    """``rwb bench fanout``: several collections queried serially, by threads and by asyncio.
    ``backend`` (with ``server``: over a private server of its engine) replaces every
    collection's backend; ``servers`` (``shared`` | ``per-collection``) the server
    processes; ``queries`` / ``rounds`` the spec's query count and rounds."""
    from retrieval.api.overrides import apply_overrides
    from retrieval.bench.fanout.run import run_fanout_bench, write_fanout_run
    from retrieval.bench.fanout.spec import FanoutSpec, load_fanout_spec, parse_fanout_spec
    from retrieval.bench.summary import FanoutBenchSummary
    from retrieval.runs import check_out_dir

    s = _spec(spec, FanoutSpec, parse_fanout_spec, load_fanout_spec, "fan-out spec")
    s = apply_overrides(s, backend=backend, server=server, servers=servers, queries=queries,
                        rounds=rounds)
    check_out_dir(out, force=force)  # before minutes of measuring
    result = run_fanout_bench(s, progress=progress)
    run = write_fanout_run(s, result, out, force=force)
    return BenchRun(run.path, FanoutBenchSummary.model_validate(result.summary),
                    rows=tuple(result.rows), outcome=result)


def bench_load(spec: Any, *, out: PathLike | None = None, progress: Progress | None = None,
               force: bool = False, p99_ms: float | None = None,
               target_recall: float | None = None, duration: float | None = None,
               client: str | None = None, redis_url: str | None = None,
               trace: bool = False, otlp_dir: PathLike | None = None) -> BenchRun:
    """``rwb bench load``: latency under closed/open-loop load per config and the highest
    offered rate whose corrected p99 (ms) meets the SLO with recall at the target. ``p99_ms``,
    ``target_recall`` override the spec's SLO, ``duration`` (s per point) and ``client`` its
    fields; ``redis_url`` is the Redis of a ``cache`` section (else ``$REDIS_URL``, else a
    private server). ``trace`` / ``otlp_dir``: one OpenTelemetry span per measured point (OTLP
    JSON files in ``otlp_dir``, and/or OTLP/HTTP to ``$OTEL_EXPORTER_OTLP_ENDPOINT``). A run
    ended early is kept with ``partial: true`` in its summary."""
    from retrieval.api.overrides import apply_overrides
    from retrieval.bench.load.run import run_load_bench, write_load_run
    from retrieval.bench.load.spec import LoadSpec, load_load_spec, parse_load_spec
    from retrieval.bench.summary import LoadBenchSummary
    from retrieval.runs import check_out_dir

    s = _spec(spec, LoadSpec, parse_load_spec, load_load_spec, "load spec")
    s = apply_overrides(s, p99_ms=p99_ms, target_recall=target_recall, duration=duration,
                        client=client)
    extra: tuple[Any, ...] = ()
    if s.cache is not None:
        from retrieval.cache.loadtarget import lookup_target, parse_cache_load

        cfg = parse_cache_load(s.cache, s.source)
        extra = (lambda ds: lookup_target(cfg, ds, s.queries, redis_url),)
    check_out_dir(out, force=force)  # before minutes of measuring
    from retrieval.otel import check_trace_args, start_tracing

    trace = bool(trace or otlp_dir)
    check_trace_args(trace, str(otlp_dir) if otlp_dir else None)
    tracing = start_tracing(Path(otlp_dir) if otlp_dir else None, service="rwb-bench-load",
                            run_name=s.name, scope="rwb.bench.load") if trace else None
    try:
        result = run_load_bench(s, progress=progress, extra=extra, tracing=tracing)
    finally:
        if tracing is not None:
            tracing.close()
    run = write_load_run(s, result, out, force=force)
    return BenchRun(run.path, LoadBenchSummary.model_validate(result.summary),
                    rows=tuple(result.rows), outcome=result)


def bench_churn(spec: Any, *, out: PathLike | None = None, progress: Progress | None = None,
                force: bool = False, resume: bool = False, target_recall: float | None = None,
                queries: int | None = None) -> BenchRun:
    """``rwb bench churn``: the spec's runbook (inserts, deletes, replaces, maintenance) on each
    config; per search step recall and its fresh-build control (drift vs damage), latency,
    write throughput, and one line of advice per config. ``resume``: continue a killed run in
    ``out`` from each config's last finished step. ``target_recall`` (the recall the advice
    holds) and ``queries`` (the first N) override the spec's."""
    from retrieval.api.overrides import apply_overrides
    from retrieval.churn.run import run_churn
    from retrieval.churn.spec import ChurnSpec, load_churn_spec, parse_churn_spec
    from retrieval.churn.summary import ChurnBenchSummary

    s = _spec(spec, ChurnSpec, parse_churn_spec, load_churn_spec, "churn spec")
    s = apply_overrides(s, target_recall=target_recall, queries=queries)
    result = run_churn(s, out=out, force=force, resume=resume, progress=progress)
    return BenchRun(result.run.path, ChurnBenchSummary.model_validate(result.summary),
                    rows=tuple(result.steps))


def export(run: PathLike | RunResult, engine: str, out: PathLike, *,
           backend: str | None = None, force: bool = False,
           churn: PathLike | RunResult | None = None) -> ExportedConfig:
    """``rwb export``: the tuned config of a run in ``engine``'s own names, with its evidence.
    Raises :class:`retrieval.exporting.NothingToExport` when nothing meets the target. An existing
    ``out`` that is not an earlier rwb export is refused unless ``force``. ``churn``: a
    ``rwb bench churn`` run of the same config; its figures go into ``evidence.under_churn``
    (runbook, last step's recall / control / damage, target held at every search step)."""
    from retrieval.exporting import export_run
    from retrieval.exporting.files import is_rwb_export
    from retrieval.runs import check_out_file

    check_out_file(out, force=force, ours=is_rwb_export)
    if churn is not None:  # refused before anything is written when it is not a churn run
        from retrieval.exporting.churn import check_churn_data

        check_churn_data(Path(_run_path(churn)), _run_path(run))
    result = export_run(_run_path(run), engine, Path(out), backend=backend)
    info = result.to_dict()
    path = Path(info.get("path") or out)
    if churn is not None:
        from retrieval.exporting.churn import FIELD, add_churn_evidence

        info[FIELD] = add_churn_evidence(path, _run_path(churn))
    return ExportedConfig(path, engine, info)


def verify(file: PathLike | ExportedConfig, *, engine: str | None = None,
           dataset: VectorDataset | PathLike | Mapping[str, Any] | None = None,
           reranker: Any = None, pairs: PathLike | None = None) -> Verification:
    """``rwb verify``: build the exported engine config on its engine and re-measure it;
    ``holds`` says whether it still meets its target (never for an engine rwb cannot run).
    ``engine``: measure the same settings on that engine (does the target transfer?).
    ``dataset``: the data of an ANN export when the recorded one is not reachable (the
    :class:`VectorDataset` of a config tuned from in-memory arrays, or a dataset name /
    manifest / HDF5 path), a rerank export's BEIR folder or a cache export's pairs file;
    DataError unless its fingerprint is the recorded one (a moved folder / file is also looked
    for under $RWB_DATA_DIR and the current folder: docs/ci.md).
    ``reranker``: the callable of a rerank export tuned with one that has no import path.
    ``pairs``: semantic-cache exports, the transfer check: the exported threshold measured on
    this other labelled pairs file. ``exit_code`` of the result is ``rwb verify``'s."""
    from retrieval.exporting import VerifyResult, verify_file

    given = file.path if isinstance(file, ExportedConfig) else file  # as given: in messages
    report: VerifyResult
    if pairs is not None:
        from retrieval.exporting.redisvl import verify_transfer

        report = verify_transfer(given, pairs)
    else:
        report = verify_file(given, engine=engine, dataset=dataset, reranker=reranker)
    return Verification(Path(given), bool(report.holds), report.to_dict(), report=report)


def report(run: PathLike | RunResult, out: PathLike | None = None, *, remeasure: bool = False,
           target_recall: float | None = None, force: bool = False) -> Report:
    """``rwb report``: one self-contained HTML page with the run's plots, and the PNGs. An
    existing ``out`` that is not an rwb report page is refused unless ``force``."""
    from retrieval.reporting import write_report
    from retrieval.runs import check_out_file, written_by_rwb

    if out is not None:
        check_out_file(out, force=force, ours=written_by_rwb("<title>rwb report"))
    result = write_report(_run_path(run), out, remeasure=remeasure, target=target_recall)
    return Report(result.html, tuple(result.pngs), str(result.kind))


def open_run(path: PathLike) -> RunResult:
    """An existing run directory (any kind rwb writes) as its typed result."""
    from retrieval.api.results import result_class
    from retrieval.reporting.load import load_run

    run = load_run(path)
    return result_class(type(run.model))(run.path, run.model)


def _run_path(run: PathLike | RunResult) -> Path:
    if isinstance(run, RunResult):
        if run.path is None:
            raise ConfigError(f"this {run.kind} run was not written to a directory")
        return run.path
    return Path(run)


__all__ = [
    "bench_churn",
    "bench_embed",
    "bench_fanout",
    "bench_load",
    "evaluate",
    "export",
    "open_run",
    "report",
    "sweep",
    "tune_cache",
    "tune_fusion",
    "tune_rerank",
    "verify",
]
