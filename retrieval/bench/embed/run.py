"""``rwb bench embed``: every setting of a config on the same texts, interleaved slice by slice,
and its run directory (manifest.json, results.parquet, summary.json)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.bench.embed.engines import (
    EmbedEngine,
    bf16_support,
    make_engine,
    make_runtime_engine,
    run_library,
    run_plan,
    torch_info,
    torch_module,
    warm_up,
)
from retrieval.bench.embed.plan import (
    AgreementCheck,
    Plan,
    PlanRun,
    check_agreement,
    drift,
    make_plans,
    merge_runs,
    plan_row,
    slice_plans,
)
from retrieval.bench.embed.runtimes import check_runtimes, runtime_summary, scifact_quality
from retrieval.bench.embed.spec import EmbedBenchConfig
from retrieval.bench.embed.texts import load_bench_texts
from retrieval.embed import check_texts, resolve_model
from retrieval.errors import ConfigError

#: progress callback: (done, total, description)
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class EmbedBenchResult:
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    agreement: AgreementCheck
    info: dict[str, Any] = field(default_factory=dict)


def _ticker(tick: Callable[[int, str], None], desc: str) -> Callable[[int], None]:
    return lambda k: tick(k, desc)


def run_embed_bench(cfg: EmbedBenchConfig, texts: Sequence[str] | None = None,
                    progress: Progress | None = None) -> EmbedBenchResult:
    """Run every setting of ``cfg`` on ``texts`` (default: :func:`load_bench_texts`)."""
    if cfg.engine == "flagembedding" and cfg.model is None:
        raise ConfigError(
            "bench embed: engine 'flagembedding' needs a local model folder (--model PATH)"
        )
    check_runtimes(cfg)
    resolve_model(cfg.model)  # an unknown model fails here, before any text is loaded
    data_info: dict[str, Any]
    if texts is None:
        texts, data_info = load_bench_texts(cfg)
    else:
        data_info = {"collection": "given", "sample": len(texts)}
    texts = check_texts(texts, where="bench embed")
    torch = torch_module()
    if cfg.torch_threads is not None:
        torch.set_num_threads(cfg.torch_threads)
    engine = make_engine(cfg, "fp32")
    engines: dict[str, EmbedEngine] = {"torch": engine}
    for name in cfg.runtimes[1:]:  # exports / loads now: a failure comes before any timing
        engines[name] = make_runtime_engine(cfg, name)
    lengths = engine.token_lengths(texts)
    plans = make_plans(cfg, len(texts), lengths)  # for the progress total only
    total = (sum(sum(len(b) for b in p.batches) for p in plans) + len(texts)) * len(engines)
    done = 0

    def tick(k: int, desc: str = "") -> None:
        nonlocal done
        done += k
        if progress is not None:
            progress(done, total, desc)

    for eng in engines.values():
        warm_up(eng, texts, cfg.warmup)
    slices = [r for r in np.array_split(np.arange(len(texts)), min(cfg.interleave, len(texts)))
              if len(r)]
    by_rt = _measure(cfg, engines, texts, lengths, slices, tick)
    runs = dict(by_rt["torch"])
    lib = runs.pop(f"library-{cfg.library_batch_size}")
    single = runs["single"]
    single_rows = np.array([i for b in single.plan.batches for i in b], dtype=np.int64)
    single_rate = len(single_rows) / single.wall_s
    agreement = check_agreement(
        single.embeddings[single_rows],
        {name: r.embeddings[single_rows] for name, r in runs.items() if name != "single"}
        | {lib.plan.setting: lib.embeddings[single_rows]},
        cfg.tolerance,
    )
    rows = [plan_row(r, single_rate) for r in runs.values()] + [
        plan_row(lib, single_rate)
    ]
    batched = [r for r in rows if r["mode"] in ("batch", "sorted", "tokens")]
    best = max(batched, key=lambda r: r["texts_per_s"]) if batched else rows[0]
    lib_row = rows[-1]
    summary: dict[str, Any] = {
        "model_id": engine.model_id,
        "engine": engine.name,
        "dim": engine.dim,
        "max_tokens": engine.max_tokens,
        "n_texts": len(texts),
        "tokens": {
            "mean": float(lengths.mean()),
            "p50": float(np.percentile(lengths, 50)),
            "p95": float(np.percentile(lengths, 95)),
            "max": int(lengths.max()),
            "at_limit_share": float((lengths >= engine.max_tokens).mean()),
        },
        "single_texts_per_s": single_rate,
        "best_setting": best["setting"],
        "best_texts_per_s": best["texts_per_s"],
        "speedup": best["texts_per_s"] / single_rate,
        "library_setting": lib_row["setting"],
        "library_texts_per_s": lib_row["texts_per_s"],
        "speedup_vs_library": best["texts_per_s"] / lib_row["texts_per_s"],
        "max_abs_diff": agreement.max_abs_diff,
        "tolerance": agreement.tolerance,
        "agree": agreement.ok,
        "worst_setting": agreement.worst_setting,
    }
    summary["bf16"] = _bf16(cfg, texts, engine, runs[best["setting"]], slices, rows,
                            single_rate, tick)
    if summary["bf16"].get("speedup_vs_fp32_best"):
        # bf16 vs fp32 best (same pass, interleaved) x fp32 best vs library (first pass)
        summary["speedup_vs_library_bf16"] = (
            summary["bf16"]["speedup_vs_fp32_best"] * summary["speedup_vs_library"]
        )
    if len(engines) > 1 or cfg.quality != "none":
        quality = scifact_quality(cfg, engines) if cfg.quality == "scifact" else None
        summary["runtimes"], extra = runtime_summary(
            cfg, engines, by_rt, ref_single_rate=single_rate,
            ref_library_rate=lib_row["texts_per_s"], quality=quality)
        rows.extend(extra)
    info = {"data": data_info, "torch": torch_info(), "config": cfg.model_dump(mode="json")}
    return EmbedBenchResult(rows=rows, summary=summary, agreement=agreement, info=info)


def _measure(cfg: EmbedBenchConfig, engines: dict[str, EmbedEngine], texts: Sequence[str],
             lengths: np.ndarray, slices: Sequence[np.ndarray], tick: Callable[..., None]
             ) -> dict[str, dict[str, PlanRun]]:
    """Every plan (and the library encode) of every runtime, slice by slice: all runtimes and
    settings run on a slice before the next one starts. Returns runtime -> setting -> run."""
    parts: dict[str, dict[str, list[PlanRun]]] = {name: {} for name in engines}
    for rows_ in slices:
        for name, eng in engines.items():
            tag = "" if name == "torch" else f"@{name}"
            for plan in slice_plans(cfg, lengths, rows_):
                parts[name].setdefault(plan.setting, []).append(
                    run_plan(eng, texts, plan, progress=_ticker(tick, plan.setting + tag)))
            lib_part = run_library(eng, texts, cfg.library_batch_size, lengths, rows_)
            parts[name].setdefault(lib_part.plan.setting, []).append(lib_part)
            tick(len(rows_), lib_part.plan.setting + tag)
    return {name: {s: merge_runs(v) for s, v in p.items()} for name, p in parts.items()}


def _bf16(cfg: EmbedBenchConfig, texts: Sequence[str], fp32: EmbedEngine, best: PlanRun,
          slices: Sequence[np.ndarray], rows: list[dict[str, Any]], single_rate: float,
          tick: Callable[..., None]) -> dict[str, Any]:
    """The best fp32 setting again in bf16, interleaved slice by slice with a fresh fp32 pass
    of the same batches (the ratio compares like with like); drift vs the fp32 embeddings."""
    if "bf16" not in cfg.dtypes:
        return {"measured": False, "reason": "not requested"}
    if "torch-bf16" in cfg.runtimes:
        return {"measured": False, "reason": "measured as runtime torch-bf16 (see runtimes)"}
    ok, reason = bf16_support()
    if not ok:
        return {"measured": False, "reason": reason}
    engine = make_engine(cfg, "bf16")
    warm_up(engine, texts, max(cfg.warmup, 1))
    by_slice = [set(r.tolist()) for r in slices]
    bf_parts, fp_parts = [], []
    for members in by_slice:
        batches = tuple(b for b in best.plan.batches if b and b[0] in members)
        plan = Plan(best.plan.setting, best.plan.mode, batches,
                    batch_size=best.plan.batch_size, token_budget=best.plan.token_budget)
        fp_parts.append(run_plan(fp32, texts, plan))
        bf_parts.append(run_plan(engine, texts, plan))
        tick(0, "bf16")
    run, ref = merge_runs(bf_parts), merge_runs(fp_parts)
    row = plan_row(run, single_rate)
    rows.append(row)
    d = drift(best.embeddings, run.embeddings, cfg.drift_queries, cfg.drift_k)
    fp_rate = len(texts) / ref.wall_s
    return {
        "measured": True,
        "reason": reason,
        "setting": row["setting"],
        "texts_per_s": row["texts_per_s"],
        "fp32_texts_per_s_same_pass": fp_rate,
        "speedup_vs_fp32_best": row["texts_per_s"] / fp_rate,
        "drift": d,
    }


def write_embed_run(result: EmbedBenchResult, out: str | Path | None, *,
                    force: bool = False) -> Any:
    """Run directory: manifest.json (versions, git sha, CPU flags incl. AMX/AVX-512, torch
    threads, seed, config, status), results.parquet (one tidy row per setting), summary.json.
    A non-empty ``out`` is refused unless ``force``."""
    from retrieval.bench.summary import EmbedBenchSummary
    from retrieval.runs import RunDir

    run = RunDir.create(out, EmbedBenchSummary.KIND, force=force)
    with run.recording():
        _write_embed(run, result)
    return run


def _write_embed(run: Any, result: EmbedBenchResult) -> None:
    from retrieval.bench.summary import EmbedBenchSummary

    ok, reason = bf16_support()
    run.write_manifest(
        kind=EmbedBenchSummary.KIND,
        config=result.info.get("config"),
        data=result.info.get("data"),
        torch=result.info.get("torch"),
        seeds={"sample": result.info.get("config", {}).get("seed")},
        bf16={"supported": ok, "why": reason},
    )
    run.write_table("results.parquet", result.rows)
    run.write_summary(EmbedBenchSummary.model_validate({**result.summary, "rows": result.rows}))


__all__ = ["EmbedBenchResult", "Progress", "run_embed_bench", "write_embed_run"]
