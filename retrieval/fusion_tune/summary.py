"""The summary.json of ``rwb tune fusion`` (run kind ``fusion-tune``) and its text report
(lines; the CLI prints them).

Kept in this package (model, printer) so the kind registers in one place. Units: quality values
are nDCG@10 means over queries (0..1); ``p_value`` is two-sided; latency is milliseconds per
single query.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from retrieval.numfmt import format_number
from retrieval.runs import RunKind, RunSummary, SummaryPart, run_summary


class FusionPoint(SummaryPart):
    """One fusion setting: ``method`` (rrf / convex), ``params``, ``dev`` / ``test`` metric."""

    method: str | None = None
    label: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    dev: float | None = None
    test: float | None = None


class ChosenFusion(FusionPoint):
    """The dev split's best setting judged on the test split: ``p_value`` vs ``rrf60``,
    ``significant`` (p < alpha and a gain), the comparison with the best single leg."""

    p_value: float | None = None
    significant: bool | None = None
    vs_rrf60: dict[str, Any] = Field(default_factory=dict)
    vs_best_leg: dict[str, Any] = Field(default_factory=dict)


@run_summary
class FusionTuneSummary(RunSummary):
    """summary.json of ``rwb tune fusion`` (no ``kind`` key on disk: the manifest names it)."""

    KIND: ClassVar[RunKind] = RunKind("fusion-tune")
    SIGNATURE: ClassVar[tuple[str, ...]] = ("candidates", "baselines", "best_single_leg")
    RANK: ClassVar[int] = 10

    name: str | None = None
    run_dir: str | None = None
    dataset: str | None = None
    dataset_info: dict[str, Any] | None = None
    relevance: str | None = None
    n_docs: int | None = None
    n_queries: int | None = None
    n_dev: int | None = None
    n_test: int | None = None
    metric: str | None = None
    alpha: float | None = None
    legs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    bm25: dict[str, Any] | None = None
    dense: dict[str, Any] | None = None
    #: the sparse leg (``engine``), when the spec has one
    sparse: dict[str, Any] | None = None
    candidates: list[FusionPoint] = Field(default_factory=list)
    baselines: dict[str, FusionPoint] = Field(default_factory=dict)
    best_single_leg: str | None = None
    chosen: ChosenFusion | None = None
    verdict: str | None = None
    trec_runs: dict[str, str] = Field(default_factory=dict)
    qrels_file: str | None = None
    fusion_rules: str | None = None
    evaluation_policy: str | None = None
    latency_mode: str | None = None


def _fmt(v: Any) -> str:
    return "-" if v is None else format_number(v) if isinstance(v, float) else str(v)


def summary_lines(s: dict[str, Any], top: int = 8) -> list[str]:
    """The human-readable report of a fusion tuning summary (the CLI prints these lines)."""
    out = [f"{s['dataset']}: {s['n_docs']} docs, {s['n_queries']} judged queries "
           f"({s['n_dev']} dev / {s['n_test']} test); metric {s['metric']}"]
    for leg, info in s["legs"].items():
        out.append(f"  leg {leg:<6} test {_fmt(info['test'])}  p50 {_fmt(info['p50_ms'])} ms  "
                   f"p95 {_fmt(info['p95_ms'])} ms  gain it brings to the chosen fusion "
                   f"{info['gain']:+.4f}")
    b = s["baselines"]
    out.append(f"baselines (test): rrf60 {_fmt(b['rrf60']['test'])}  " + "  ".join(
        f"{leg} {_fmt(b[leg]['test'])}" for leg in s["legs"] if leg in b))
    ranked = sorted(s["candidates"], key=lambda c: -c["dev"])[:top]
    out.append(f"top {len(ranked)} of {len(s['candidates'])} candidates by dev {s['metric']}:")
    out += [f"  {c['label']:<52} dev {_fmt(c['dev'])}  test {_fmt(c['test'])}" for c in ranked]
    c = s["chosen"]
    out.append(f"chosen: {c['label']}  test {_fmt(c['test'])}  vs rrf60 "
               f"{c['vs_rrf60']['mean_diff']:+.4f} (p {_fmt(c['p_value'])})  vs best leg "
               f"{s['best_single_leg']} {c['vs_best_leg']['mean_diff']:+.4f} "
               f"(p {_fmt(c['vs_best_leg']['p_value'])})")
    out.append(f"verdict: {s['verdict']}")
    out.append("TREC runs: " + ", ".join(s["trec_runs"].values())
               + f"; qrels {s['qrels_file']}")
    out.append(f"run directory: {s['run_dir']}")
    return out


__all__ = ["ChosenFusion", "FusionPoint", "FusionTuneSummary", "summary_lines"]
