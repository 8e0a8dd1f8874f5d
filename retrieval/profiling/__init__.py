"""``rwb profile``: the user's retrieval pipeline measured as one request - per-stage P50/P95/P99,
each stage's share of the end-to-end percentiles (critical path), tail attribution, quality -
with one OpenTelemetry trace per request, the remedies measured in order (the waterfall) and
production traces compared stage by stage.

Roles: :mod:`.spec` (the pipeline spec), :mod:`.stats` (pure: percentiles, shares, tail,
waterfall, compare), :mod:`.trace` (OpenTelemetry spans out, OTLP JSON in), :mod:`.pipeline`
(the live stages, one request), :mod:`.run` (passes, remedies, run directory).
"""

from retrieval.profiling.spec import ProfileSpec, load_profile_spec, parse_profile_spec

__all__ = ["ProfileSpec", "load_profile_spec", "parse_profile_spec"]
