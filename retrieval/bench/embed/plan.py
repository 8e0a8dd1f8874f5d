"""Batching plans and what is computed from measured runs (pure: numpy on arrays).

A :class:`Plan` is a batching strategy (lists of text positions); a :class:`PlanRun` is one
setting measured (:mod:`retrieval.bench.embed.engines`). Here: the plans of a config, slices of
them for interleaving, merging the slices back, a row per setting, and the agreement (batched vs
single) and bf16 drift checks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from retrieval.bench.embed.spec import EmbedBenchConfig
from retrieval.errors import DataError
from retrieval.stats.metrics import latency_summary, recall_by_id


@dataclass(frozen=True)
class Plan:
    """A batching strategy: ``batches`` are lists of text positions."""

    setting: str
    mode: Literal["single", "batch", "sorted", "tokens", "library"]
    batches: tuple[tuple[int, ...], ...]
    batch_size: int | None = None
    token_budget: int | None = None


def fixed_batches(n: int, size: int, order: np.ndarray | None = None) -> list[tuple[int, ...]]:
    idx = np.arange(n) if order is None else order
    return [tuple(int(i) for i in idx[s:s + size]) for s in range(0, n, size)]


def token_budget_batches(lengths: np.ndarray, budget: int) -> list[tuple[int, ...]]:
    """Length-sorted batches whose padded size (longest x count) stays <= ``budget`` tokens
    (a text longer than the budget travels alone)."""
    order = np.argsort(lengths, kind="stable")
    out: list[tuple[int, ...]] = []
    cur: list[int] = []
    longest = 0
    for i in order.tolist():
        length = int(lengths[i])
        if cur and max(longest, length) * (len(cur) + 1) > budget:
            out.append(tuple(cur))
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, length)
    if cur:
        out.append(tuple(cur))
    return out


def padding_waste(lengths: np.ndarray, batches: Sequence[Sequence[int]]) -> float:
    """Share of pad tokens (0..1) when every batch is padded to its longest text."""
    real = padded = 0
    for b in batches:
        ls = lengths[list(b)]
        real += int(ls.sum())
        padded += int(ls.max()) * len(b)
    return 1.0 - real / padded if padded else 0.0


def make_plans(cfg: EmbedBenchConfig, n: int, lengths: np.ndarray) -> list[Plan]:
    plans = []
    n_single = n if cfg.single_limit is None else min(n, cfg.single_limit)
    plans.append(Plan("single", "single", tuple(fixed_batches(n_single, 1)), batch_size=1))
    sorted_idx = np.argsort(lengths, kind="stable")
    for b in cfg.batch_sizes:
        if b == 1:
            continue
        plans.append(Plan(f"batch-{b}", "batch", tuple(fixed_batches(n, b)), batch_size=b))
        if cfg.length_sorted:
            plans.append(Plan(f"sorted-{b}", "sorted", tuple(fixed_batches(n, b, sorted_idx)),
                              batch_size=b))
    for t in cfg.token_budgets:
        plans.append(Plan(f"tokens-{t}", "tokens", tuple(token_budget_batches(lengths, t)),
                          token_budget=t))
    return plans


@dataclass(frozen=True)
class PlanRun:
    """One setting measured. Times: ``wall_s`` seconds, ``call_ms`` milliseconds per call."""

    plan: Plan
    dtype: str
    embeddings: np.ndarray
    call_ms: np.ndarray
    wall_s: float
    real_tokens: int
    padded_tokens: int
    cpu_s: float


def merge_runs(runs: Sequence[PlanRun]) -> PlanRun:
    """The runs of one setting on disjoint slices as one run (times and tokens summed)."""
    first = runs[0]
    if len(runs) == 1:
        return first
    plan = Plan(first.plan.setting, first.plan.mode,
                tuple(b for r in runs for b in r.plan.batches),
                batch_size=first.plan.batch_size, token_budget=first.plan.token_budget)
    emb = np.zeros_like(first.embeddings)
    for r in runs:
        emb += r.embeddings  # disjoint rows: each run fills only its own
    return PlanRun(plan, first.dtype, emb, np.concatenate([r.call_ms for r in runs]),
                   sum(r.wall_s for r in runs), sum(r.real_tokens for r in runs),
                   sum(r.padded_tokens for r in runs), sum(r.cpu_s for r in runs))


def slice_plans(cfg: EmbedBenchConfig, lengths: np.ndarray,
                rows: np.ndarray) -> list[Plan]:
    """:func:`make_plans` for the texts at ``rows`` (batches hold global positions)."""
    limit = None if cfg.single_limit is None else -(-cfg.single_limit // cfg.interleave)
    local = make_plans(cfg.model_copy(update={"single_limit": limit}), len(rows),
                       lengths[rows])
    return [Plan(p.setting, p.mode, tuple(tuple(int(rows[i]) for i in b) for b in p.batches),
                 batch_size=p.batch_size, token_budget=p.token_budget) for p in local]


def plan_row(run: PlanRun, single_rate: float | None,
             runtime: str | None = None) -> dict[str, Any]:
    """One tidy row of results for a measured setting (``speedup_vs_single`` against
    ``single_rate`` texts/s). ``runtime`` other than torch names the setting ``<setting>@<rt>``;
    without it a non-fp32 dtype does (``<setting>@bf16``)."""
    n = sum(len(b) for b in run.plan.batches)
    lat = latency_summary(run.call_ms)
    texts_per_s = n / run.wall_s if run.wall_s > 0 else math.inf
    if runtime is not None and runtime != "torch":
        setting = f"{run.plan.setting}@{runtime}"
    else:
        setting = run.plan.setting if run.dtype == "fp32" else f"{run.plan.setting}@{run.dtype}"
    return {
        "setting": setting,
        "runtime": runtime or ("torch" if run.dtype == "fp32" else f"torch-{run.dtype}"),
        "mode": run.plan.mode,
        "dtype": run.dtype,
        "batch_size": run.plan.batch_size,
        "token_budget": run.plan.token_budget,
        "n_texts": n,
        "n_calls": len(run.plan.batches),
        "mean_batch": n / max(len(run.plan.batches), 1),
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "texts_per_s": texts_per_s,
        "tokens_per_s": run.real_tokens / run.wall_s if run.wall_s > 0 else math.inf,
        "call_p50_ms": lat["p50_ms"],
        "call_p95_ms": lat["p95_ms"],
        "padding_waste": 1.0 - run.real_tokens / run.padded_tokens if run.padded_tokens else 0.0,
        "speedup_vs_single": texts_per_s / single_rate if single_rate else None,
        "latency_measured": run.plan.mode != "library",
    }


# --------------------------------------------------------------------------- checks


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference of any component (float)."""
    if a.shape != b.shape:
        raise DataError(f"embeddings to compare have shapes {a.shape} and {b.shape}")
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


@dataclass(frozen=True)
class AgreementCheck:
    """Batched vs one-at-a-time embeddings of the same texts (max abs component difference)."""

    max_abs_diff: float
    tolerance: float
    worst_setting: str
    n_texts: int

    @property
    def ok(self) -> bool:
        return math.isfinite(self.max_abs_diff) and self.max_abs_diff <= self.tolerance

    def message(self) -> str:
        verdict = "agree" if self.ok else "DISAGREE"
        return (
            f"batched and single embeddings {verdict}: max abs diff {self.max_abs_diff:.3g} "
            f"({self.worst_setting}, {self.n_texts} texts; tolerance {self.tolerance:g})"
        )


def check_agreement(single: np.ndarray, batched: dict[str, np.ndarray],
                    tolerance: float) -> AgreementCheck:
    """Compare each setting's embeddings (first ``len(single)`` rows) with ``single``."""
    worst, worst_name = 0.0, "-"
    for name, emb in batched.items():
        d = max_abs_diff(single, emb[: len(single)])
        if not math.isfinite(d) or d > worst or worst_name == "-":
            worst, worst_name = (d if math.isfinite(d) else math.inf), name
    return AgreementCheck(worst, tolerance, worst_name, len(single))


def drift(fp32: np.ndarray, other: np.ndarray, n_queries: int, k: int) -> dict[str, float]:
    """Cosine distance (1 - cos, 0..2) per text between two embeddings of the same texts, and
    recall@k of exact search with ``other`` vectors against exact search with ``fp32``."""
    a = fp32 / np.linalg.norm(fp32, axis=1, keepdims=True)
    b = other / np.linalg.norm(other, axis=1, keepdims=True)
    cos_dist = 1.0 - np.sum(a * b, axis=1)
    out = {
        "cos_dist_mean": float(cos_dist.mean()),
        "cos_dist_max": float(cos_dist.max()),
        "max_abs_diff": max_abs_diff(fp32, other),
    }
    nq = min(n_queries, len(a) // 2)
    k = min(k, len(a) - nq)
    if nq >= 1 and k >= 1:
        def top(x: np.ndarray) -> np.ndarray:
            sims = x[:nq] @ x[nq:].T
            part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1)
            return np.take_along_axis(part, order, axis=1).astype(np.int64)

        rec = recall_by_id(top(b), top(a), k)
        out.update({"recall_at_k": float(rec.mean()), "recall_min": float(rec.min()),
                    "k": k, "n_queries": nq, "n_corpus": len(a) - nq})
    return out


__all__ = [
    "AgreementCheck",
    "Plan",
    "PlanRun",
    "check_agreement",
    "drift",
    "fixed_batches",
    "make_plans",
    "max_abs_diff",
    "merge_runs",
    "padding_waste",
    "plan_row",
    "slice_plans",
    "token_budget_batches",
]
