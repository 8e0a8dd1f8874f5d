"""The ``adaptive:`` section of a sweep spec (pydantic, extra="forbid").

```yaml
adaptive:
  policies: [ada_ef, early_stop]
  pre_ef: 16             # ef_search of the cheap pre-search (ada_ef) / first round (early_stop)
  ef_values: [16, 24, 32, 48, 64, 96, 128, 192, 256]
  bins: 4                # difficulty bins of ada_ef's table (quantiles of the feature)
  feature: gap           # gap | first | ndis (from the pre-search)
  target_mean: 0.95      # over the tuning queries (default: the spec's target_recall)
  target_p5: 0.8         # optional: the 5th percentile as well
```
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: the policies a sweep runs (the cache's per-entry thresholds live in ``rwb tune cache``)
Policy = Literal["ada_ef", "early_stop"]
#: the pre-search feature ada_ef maps to ef: ``gap`` the relative gap between the 1st and the
#: k-th distance ``(d_k - d_1) / |d_k|``, ``first`` the 1st distance, ``ndis`` the pre-search's
#: distance computations
Feature = Literal["gap", "first", "ndis"]

DEFAULT_EFS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


class AdaptiveSpec(BaseModel):
    """Adaptive per-query policies, judged against the tuned fixed ``ef_search`` on the sweep's
    held-out queries (cost unit: distance computations; entries whose backend cannot count them
    are skipped with a reason)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: ``ada_ef``: per-query ef from a pre-search feature, via a table fitted on the tuning
    #: queries; ``early_stop``: restart-based termination (ef doubled until the top-k is stable)
    policies: list[Policy] = Field(min_length=1)
    #: ef_search of the pre-search (ada_ef) and of the first round (early_stop)
    pre_ef: int = Field(16, ge=1, le=4096)
    #: the ef_search values ada_ef's table picks from (those >= pre_ef; the fixed setting is
    #: searched over every integer from k up to 8 x the largest)
    ef_values: list[int] = Field(default_factory=lambda: list(DEFAULT_EFS), min_length=1)
    #: difficulty bins of ada_ef (quantiles of the feature over the tuning queries)
    bins: int = Field(4, ge=1, le=32)
    #: the pre-search feature mapped to ef: ``gap`` (d_k - d_1) / |d_k|, ``first`` d_1,
    #: ``ndis`` the pre-search's distance computations
    feature: Feature = "gap"
    #: mean recall@k over the tuning queries ada_ef's table aims at (None: the spec's
    #: target_recall, else 0.95)
    target_mean: float | None = Field(None, gt=0.0, le=1.0)
    #: 5th-percentile recall@k over the tuning queries it aims at as well (None: free)
    target_p5: float | None = Field(None, ge=0.0, le=1.0)

    @field_validator("ef_values")
    @classmethod
    def _sorted_positive(cls, v: list[int]) -> list[int]:
        if any(e < 1 for e in v):
            raise ValueError("every ef value must be >= 1")
        return sorted(set(v))


class CacheAdaptiveSpec(BaseModel):
    """The ``adaptive:`` section of an ``rwb tune cache`` spec: per-entry thresholds judged
    against the global threshold under the same false-hit upper bound
    (:mod:`retrieval.adaptive.cache`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: ``per_entry_threshold``: one threshold per bin of the entry's distance to its own
    #: nearest other cached entry (cosine distance)
    policies: list[Literal["per_entry_threshold"]] = Field(min_length=1)
    #: bins of the entry feature (quantiles over the tuning probes' nearest entries)
    bins: int = Field(4, ge=1, le=32)
