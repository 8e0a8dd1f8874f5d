"""Embedding runtimes as a measured axis of ``rwb bench embed`` (``runtimes: [torch, onnx,
onnx-int8, openvino, torch-bf16]``).

Every runtime runs the same batching plans on the same slices as torch fp32, interleaved
(:mod:`.run`), so the ratios compare like with like. Per runtime: its best batched setting
(texts/s, per-call p50/p95 ms), one-at-a-time texts/s, its own ``encode(batch_size)`` and the
quality drift that decides whether it is usable, always against torch fp32:

- ``drift``: cosine distance ``1 - cos`` per text (mean, max) and recall@k of exact search over
  the sample (the first ``drift_queries`` texts as queries, the rest as corpus) with the
  runtime's vectors against the same search with torch fp32's (id overlap of the top k);
- ``quality`` (``quality: scifact``): nDCG@10 and recall@10 against SciFact's judgments, and
  their ratio to torch fp32's on the same queries and documents.

A runtime is *within tolerance* when its drift recall@k >= ``quality_tolerance`` (and, when
SciFact was measured, its recall@10 is >= ``quality_tolerance`` times fp32's). The summary names
the fastest runtime/setting within tolerance. With SciFact measured it also gives the looser
reading, ``within_quality_tolerance``: recall@10 against the judgments >= ``quality_tolerance``
x fp32's, whatever the overlap with fp32's top k (int8 can keep the judged quality while
reordering neighbours), and the fastest runtime under it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from retrieval.bench.embed.engines import EmbedEngine
from retrieval.bench.embed.plan import PlanRun, drift, max_abs_diff, plan_row
from retrieval.bench.embed.spec import EmbedBenchConfig
from retrieval.embed.runtimes import parse_runtime
from retrieval.stats.metrics import recall_by_id


def runtime_rows(name: str, runs: Mapping[str, PlanRun], library: str
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows of one runtime's settings and its best batched row (speedups vs its own single)."""
    single = runs["single"]
    n_single = sum(len(b) for b in single.plan.batches)
    rate = n_single / single.wall_s if single.wall_s > 0 else float("inf")
    rows = [plan_row(r, rate, runtime=name) for s, r in runs.items() if s != library]
    rows.append(plan_row(runs[library], rate, runtime=name))
    batched = [r for r in rows if r["mode"] in ("batch", "sorted", "tokens")]
    best = max(batched, key=lambda r: r["texts_per_s"]) if batched else rows[0]
    return rows, best


def _single_agreement(runs: Mapping[str, PlanRun], best_setting: str) -> float:
    single = runs["single"]
    idx = np.array([i for b in single.plan.batches for i in b], dtype=np.int64)
    return max_abs_diff(single.embeddings[idx], runs[best_setting].embeddings[idx])


def runtime_summary(cfg: EmbedBenchConfig, engines: Mapping[str, EmbedEngine],
                    runs: Mapping[str, Mapping[str, PlanRun]], *, ref_single_rate: float,
                    ref_library_rate: float, quality: dict[str, Any] | None
                    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``runtimes`` block of summary.json and the rows of the non-torch runtimes."""
    library = f"library-{cfg.library_batch_size}"
    ref_rows, ref_best = runtime_rows("torch", runs["torch"], library)
    ref_emb = runs["torch"][ref_best["setting"]].embeddings
    by_rt: dict[str, Any] = {}
    extra_rows: list[dict[str, Any]] = []
    for name, engine in engines.items():
        rows, best = (ref_rows, ref_best) if name == "torch" else runtime_rows(
            name, runs[name], library)
        if name != "torch":
            extra_rows.extend(rows)
        setting = best["setting"].split("@")[0]
        d = drift(ref_emb, runs[name][setting].embeddings, cfg.drift_queries, cfg.drift_k)
        lib_row = next(r for r in rows if r["mode"] == "library")
        single_row = next(r for r in rows if r["mode"] == "single")
        rt = parse_runtime(name)
        entry: dict[str, Any] = {
            "backend": rt.backend, "precision": rt.precision,
            "best_setting": best["setting"], "texts_per_s": best["texts_per_s"],
            "call_p50_ms": best["call_p50_ms"], "call_p95_ms": best["call_p95_ms"],
            "single_texts_per_s": single_row["texts_per_s"],
            "single_call_p50_ms": single_row["call_p50_ms"],
            "single_call_p95_ms": single_row["call_p95_ms"],
            "speedup_vs_single": best["speedup_vs_single"],
            "speedup_vs_torch_single": best["texts_per_s"] / ref_single_rate,
            "encode_texts_per_s": lib_row["texts_per_s"],
            "speedup_vs_library": best["texts_per_s"] / ref_library_rate,
            "batched_vs_single_max_abs_diff": _single_agreement(runs[name], setting),
            "drift": d,
            "info": getattr(engine, "info", {"library": "torch", "dtype": engine.dtype}),
        }
        if quality and quality.get("measured"):
            entry["quality"] = quality["by_runtime"].get(name)
        entry["within_tolerance"], entry["why"] = _usable(entry, cfg.quality_tolerance)
        q = entry.get("quality") or {}
        if q.get("recall_ratio") is not None:  # the looser reading: judged quality kept only
            entry["within_quality_tolerance"] = bool(q["recall_ratio"] >= cfg.quality_tolerance)
        by_rt[name] = entry
    return {
        "measured": list(engines),
        "reference": "torch (sentence-transformers, fp32)",
        "tolerance": {
            "quality_tolerance": cfg.quality_tolerance,
            "rule": f"drift recall@{cfg.drift_k} vs torch fp32 >= {cfg.quality_tolerance:g}"
            + (f" and SciFact recall@10 >= {cfg.quality_tolerance:g} x fp32's"
               if quality and quality.get("measured") else ""),
        },
        "by_runtime": by_rt,
        "fastest_within_tolerance": _fastest(by_rt),
        "fastest_within_quality_tolerance": _fastest(by_rt, "within_quality_tolerance")
        if quality and quality.get("measured") else None,
        "quality": quality or {"measured": False, "reason": "not requested (quality: none)"},
    }, extra_rows


def _usable(entry: dict[str, Any], tol: float) -> tuple[bool, str]:
    rec = entry["drift"].get("recall_at_k")
    if rec is None:
        return False, "recall not measured (sample too small)"
    if rec < tol:
        return False, f"drift recall@{entry['drift']['k']} {rec:.4f} < {tol:g}"
    q = entry.get("quality")
    if q and q.get("recall_ratio") is not None and q["recall_ratio"] < tol:
        return False, f"SciFact recall@10 ratio {q['recall_ratio']:.4f} < {tol:g}"
    return True, f"drift recall@{entry['drift']['k']} {rec:.4f} >= {tol:g}"


def _fastest(by_rt: Mapping[str, Any], flag: str = "within_tolerance") -> dict[str, Any]:
    ok = {n: e for n, e in by_rt.items() if e.get(flag)}
    if not ok:
        return {"runtime": None, "reason": "no runtime within tolerance"}
    name = max(ok, key=lambda n: ok[n]["texts_per_s"])
    e = ok[name]
    return {"runtime": name, "setting": e["best_setting"], "texts_per_s": e["texts_per_s"],
            "speedup_vs_library": e["speedup_vs_library"],
            "speedup_vs_torch_single": e["speedup_vs_torch_single"],
            "speedup_vs_single": e["speedup_vs_single"]}


# --------------------------------------------------------------------------- SciFact quality


def _top_k(q: np.ndarray, d: np.ndarray, k: int) -> np.ndarray:
    sims = q @ d.T
    part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1).astype(np.int64)


def scifact_quality(cfg: EmbedBenchConfig, engines: Mapping[str, EmbedEngine]
                    ) -> dict[str, Any]:
    """nDCG@10 / recall@10 vs SciFact's judgments per runtime (exact inner-product search over
    every judged document of the chosen queries plus seeded others, ``quality_docs`` in all)."""
    from retrieval.loaders.catalog import load_text_collection
    from retrieval.stats.irmetrics import evaluate_rankings, relevant_qrels

    coll = load_text_collection("scifact")
    rng = np.random.default_rng(cfg.seed)
    judged = relevant_qrels(coll.qrels)
    qids = sorted(q for q in judged if q in coll.queries)
    qids = [qids[i] for i in sorted(rng.permutation(len(qids))[: cfg.quality_queries])]
    need = sorted({d for q in qids for d in judged[q] if d in coll.corpus})
    others = [d for d in coll.corpus if d not in set(need)]
    extra = rng.permutation(len(others))[: max(0, cfg.quality_docs - len(need))]
    doc_ids = need + [others[int(i)] for i in sorted(extra)]
    docs = [coll.corpus[d] for d in doc_ids]
    queries = [coll.queries[q] for q in qids]
    k = 10
    out: dict[str, Any] = {}
    ref_top: np.ndarray | None = None
    for name, engine in engines.items():
        dv = engine.library_encode(docs, cfg.library_batch_size)
        qv = engine.library_encode(queries, cfg.library_batch_size)
        top = _top_k(qv, dv, min(k, len(doc_ids)))
        rankings = {q: [doc_ids[int(j)] for j in row] for q, row in zip(qids, top, strict=True)}
        scores = evaluate_rankings(coll.qrels, rankings, ["ndcg@10", "recall@10"],
                                   query_ids=qids, corpus_ids=doc_ids)
        ref_top = top if ref_top is None else ref_top
        out[name] = {"ndcg@10": scores.means["ndcg@10"], "recall@10": scores.means["recall@10"],
                     "overlap_at_10_vs_fp32": float(recall_by_id(top, ref_top, k).mean())}
    ref = out["torch"]
    for entry in out.values():
        entry["ndcg_ratio"] = entry["ndcg@10"] / ref["ndcg@10"] if ref["ndcg@10"] else None
        entry["recall_ratio"] = (entry["recall@10"] / ref["recall@10"] if ref["recall@10"]
                                 else None)
    return {"measured": True, "collection": "scifact", "split": "test",
            "n_queries": len(qids), "n_docs": len(doc_ids), "n_judged_docs": len(need),
            "docs_rule": "every judged doc of the chosen queries + seeded others",
            "search": "exact inner product (unit vectors)", "by_runtime": out}


def check_runtimes(cfg: EmbedBenchConfig) -> Sequence[str]:
    """The runtimes of ``cfg`` (torch first), refused for the FlagEmbedding engine."""
    from retrieval.errors import ConfigError

    if cfg.engine != "sentence-transformers" and len(cfg.runtimes) > 1:
        raise ConfigError(
            f"bench embed: runtimes {', '.join(cfg.runtimes[1:])} need engine "
            f"'sentence-transformers'; received engine {cfg.engine!r}"
        )
    return cfg.runtimes


__all__ = ["check_runtimes", "runtime_rows", "runtime_summary", "scifact_quality"]
