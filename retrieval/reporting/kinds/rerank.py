"""The report of ``rwb tune rerank`` (``rerank-sweep``): the rerank-depth curve with bootstrap
bands per split, and the depths table."""

from __future__ import annotations

from retrieval.errors import ConfigError
from retrieval.reporting import rag
from retrieval.reporting.bands import per_query_bands
from retrieval.reporting.common import run_rows, summary_table, typed
from retrieval.reporting.html import Table
from retrieval.reporting.kinds.adaptive import adaptive_section
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables
from retrieval.rerank.summary import RerankSweepSummary


@renders_figures(RerankSweepSummary.KIND)
def rerank_figures(run: Run, remeasure: bool) -> Figures:
    return [("rerank_depth", "Rerank-depth curve",
             rag.rerank_depth_curve(run.summary, bands=rerank_bands(run)),
             "Quality from one scoring pass at the largest depth; latency from actual calls. "
             "Shaded: 95% bootstrap interval of each split's mean over its queries (a few "
             "dozen queries leave a wide one).")]


@renders_tables(RerankSweepSummary.KIND)
def rerank_tables(run: Run) -> Tables:
    r = typed(run, RerankSweepSummary)
    metric = r.selection_metric or "ndcg@10"
    rows, hl = [], []
    for c in r.curve:
        rows.append([c.depth, c.tuning.get(metric), c.heldout.get(metric),
                     c.latency.get("p50_ms"), c.latency.get("p95_ms")])
        hl.append(c.depth == r.chosen_depth)
    return [("Depths", Table(["depth", f"{metric} tuning", f"{metric} held-out", "p50 ms",
                              "p95 ms"], rows, hl, caption="chosen depth highlighted")),
            *quality_section(r), ("Summary", summary_table(
                {k: v for k, v in run.summary.items() if k != "quality"}, "curve")),
            *adaptive_section(run)]


def quality_section(r: RerankSweepSummary) -> Tables:
    """``target:``: every depth's cheapest passing knob (the chosen pair highlighted)."""
    q = r.quality
    if not q:
        return []
    rows, hl = [], []
    for row in q.get("by_depth", []):
        rows.append([row["depth"], row["knob_value"], row.get("value"), row.get("lower_bound"),
                     row.get("dense_p50_ms"), row.get("rerank_p50_ms"), row.get("cost_ms")])
        hl.append(row["depth"] == q.get("depth_quality")
                  and row["knob_value"] == q.get("knob_quality"))
    caption = (f"{q['metric']} non-inferior to {q['reference']} by {q['margin']} (paired "
               f"one-sided t-test, alpha {q['alpha']}); the recall-{q['recall_target']} choice: "
               f"{q['knob']}={q['knob_recall']} at depth {q['depth_recall']}; chosen pair "
               f"highlighted; {q['cost_unit']}")
    return [("Quality target", Table(["depth", q["knob"], q["metric"], "lower bound",
                                      "dense p50 ms", "rerank p50 ms", "cost ms"], rows, hl,
                                     caption=caption))]


def rerank_bands(run: Run) -> dict[str, dict[int, tuple[float, float]]]:
    """Bootstrap intervals of the selection metric per split and depth of a rerank run, from
    its per_query.parquet and the spec's seeded split (empty when either is missing)."""
    from retrieval.rerank.tune import split_queries
    from retrieval.specfile import read_yaml

    r = typed(run, RerankSweepSummary)
    rows = run_rows(run, "per_query.parquet")
    spec_path = run.path / "spec.yaml"
    if not rows or not spec_path.is_file():
        return {}
    spec = read_yaml(spec_path)
    first = min(int(x["depth"]) for x in rows)
    ids = [str(x["query_id"]) for x in rows if int(x["depth"]) == first]  # the run's order
    try:
        tuning, heldout = split_queries(ids, float(spec.get("tuning_fraction", 0.5)),
                                        int(spec.get("seed", 0)))
    except ConfigError:
        return {}
    return per_query_bands(rows, r.selection_metric or "ndcg@10",
                           {"tuning": tuning, "heldout": heldout})
