"""The report of ``rwb tune fusion`` (``fusion-tune``): dev vs test of every candidate, the
baselines and the chosen fusion (:mod:`retrieval.reporting.fusion`)."""

from __future__ import annotations

from retrieval.fusion_tune.summary import FusionTuneSummary
from retrieval.reporting.common import scalar_table
from retrieval.reporting.fusion import dev_vs_test, fusion_tables
from retrieval.reporting.load import Run
from retrieval.reporting.registry import Figures, Tables, renders_figures, renders_tables


@renders_figures(FusionTuneSummary.KIND)
def fusion_figures(run: Run, remeasure: bool) -> Figures:
    return [("fusion_candidates", "Fusion candidates", dev_vs_test(run.summary),
             "Chosen on the dev split, judged on the test split with a paired "
             "randomisation test; dashed: the baselines' test values.")]


@renders_tables(FusionTuneSummary.KIND)
def fusion_table_list(run: Run) -> Tables:
    s = run.summary
    return [*fusion_tables(s), ("Summary", scalar_table(
        {k: v for k, v in s.items() if k not in ("candidates", "baselines", "chosen")}))]
