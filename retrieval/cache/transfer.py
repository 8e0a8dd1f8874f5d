"""Does a tuned cache threshold hold on other traffic? The transfer check.

A threshold is tuned on one labelled traffic (its tuning split); false hits at a fixed threshold
differ widely across traffic kinds, so a cap met on one need not hold on another. The check
fills a cache of its own (``<cache name>-transfer``) with every text of the other pairs file,
probes it with each distinct ``probe_side`` text (its own entry excluded, as in tuning), and
measures at the given threshold the hit and false-hit rates per probe and the same one-sided
upper bound (Wilson or Clopper-Pearson, same confidence) on the false-hit rate. The cap holds
there when that bound is <= the cap; the verdict says so in words either way.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from retrieval.cache.data import labels_of, source_record
from retrieval.cache.spec import CacheTuneSpec, PairsSource, PairsSpec
from retrieval.cache.thresholds import Threshold
from retrieval.cache.tune import design_probes, exclude_self, metrics_table

log = logging.getLogger(__name__)


def verdict(path: str, rate: float, ub: float, cap: float, probes: int, bound: str,
            confidence: float) -> str:
    """One sentence: whether the cap holds on the other traffic."""
    if ub <= cap:
        return (f"the cap holds on {path}: false-hit rate {rate:.4f}, {bound} {confidence:g} "
                f"upper bound {ub:.4f} <= cap {cap:g} ({probes} probes)")
    if rate <= cap:
        return (f"the cap is NOT shown to hold on {path}: false-hit rate {rate:.4f} is under "
                f"the cap {cap:g} but its {bound} {confidence:g} upper bound {ub:.4f} is above "
                f"it ({probes} probes: too few to tell)")
    return (f"the cap does NOT hold on {path}: false-hit rate {rate:.4f}, {bound} "
            f"{confidence:g} upper bound {ub:.4f} > cap {cap:g} ({probes} probes); tune the "
            f"threshold on this traffic")


def transfer_check(url: str, threshold: Threshold, spec: CacheTuneSpec, src: PairsSource, *,
                   field: str = "transfer", embedder: Any = None) -> dict[str, Any]:
    """Measure ``threshold`` (cosine distance) on the pairs of ``src`` against the Redis at
    ``url``; rates per probe, the upper bound at the spec's confidence, the verdict."""
    from retrieval.cache.fill import embed_questions, fill_cache
    from retrieval.cache.live import SemanticCache

    labels = labels_of(src, field, f"pairs:{src.path}")
    sub = spec.model_copy(update={
        "pairs": PairsSpec(path=src.path, format=src.format, text_a=src.text_a,
                           text_b=src.text_b, label=src.label),
        "dataset": "pairs", "heldout": None, "distractors": 0, "distractors_file": None,
        "transfer": []})
    design = design_probes(labels, sub)
    vecs = embed_questions(labels, design.stored, sub, embedder)
    cache = SemanticCache(url, threshold, dim=vecs.dim, name=f"{spec.cache.name}-transfer",
                          index=spec.cache.index, exclusive=True)
    try:
        fill_cache(cache, labels, design, vecs, sub, time_sizes=False)
        keys, dists = cache.nearest(vecs[design.probes], k=2, batch_size=spec.cache.knn_batch)
    finally:
        cache.drop()
        cache.close()
    nn, nd = exclude_self(design.probes, keys, dists)
    correct = design.is_duplicate(design.probes, nn)
    t = spec.tuning
    table = metrics_table(nd, correct, design.positive, np.array([threshold.cosine_distance]),
                          t.confidence, t.bound)
    m = {k: (float(v[0]) if np.isfinite(v[0]) else None) for k, v in table.items()}
    n = len(design.probes)
    rate, ub = float(m["false_hit_rate"] or 0.0), float(m["false_hit_upper_bound"] or 0.0)
    log.info("transfer check on %s: false-hit rate %.4f, upper bound %.4f", src.path, rate, ub)
    return {
        "pairs": source_record(src, f"{field}.format"), "fingerprint": labels.fingerprint,
        "threshold": threshold.cosine_distance, "threshold_unit": "cosine_distance",
        "probes": n, "positive_probes": int(design.positive.sum()),
        "stored": len(design.stored), "hits": int(table["hits"][0]),
        "false_hits": int(table["false_hits"][0]), "hit_rate": m["hit_rate"],
        "correct_hit_rate": m["correct_hit_rate"], "false_hit_rate": rate,
        "false_hit_upper_bound": ub, "precision": m["precision"],
        "max_false_hit": t.max_false_hit, "confidence": t.confidence, "bound": t.bound,
        "cap_holds": ub <= t.max_false_hit,
        "verdict": verdict(src.path, rate, ub, t.max_false_hit, n, t.bound, t.confidence),
        "design": "every text of the file stored; each distinct probe-side text probed, its own "
                  "entry excluded; rates per probe at the given threshold",
    }


__all__ = ["transfer_check", "verdict"]
