"""Measured index configs as plain points, whatever run they come from.

A *point* is a dict with ``backend``, ``label`` (the series: index label or backend), ``build``
and ``search`` (param dicts), ``recall`` (recall@k by id, 0..1), ``p95_ms`` (single-query p95
latency, ms; None when not timed), ``qps`` (batch queries/s), ``build_s`` (s),
``memory_bytes``; sweep points also carry ``recall_lb`` and ``meets``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from retrieval.runs import flatten


def series_name(p: Mapping[str, Any]) -> str:
    """The line a point belongs to: its label/backend plus its build params."""
    from retrieval.reporting.style import params_text

    name = str(p.get("label") or p.get("backend") or "?")
    build = p.get("build") or {}
    return f"{name} {params_text(build)}" if build else name


def series_names(points: Iterable[Mapping[str, Any]]) -> Callable[[Mapping[str, Any]], str]:
    """A namer for the lines of one plot: label/backend plus only the build params that vary
    among that label's builds (all of them when there is one build), so legends stay short."""
    import json as _json

    from retrieval.reporting.style import params_text

    values: dict[str, dict[str, set[str]]] = {}
    for p in points:
        label = str(p.get("label") or p.get("backend") or "?")
        for k, v in (p.get("build") or {}).items():
            values.setdefault(label, {}).setdefault(k, set()).add(_json.dumps(v, default=str))
    varying = {label: {k for k, vs in keys.items() if len(vs) > 1}
               for label, keys in values.items()}

    def name(p: Mapping[str, Any]) -> str:
        label = str(p.get("label") or p.get("backend") or "?")
        build = p.get("build") or {}
        keys = [k for k in build if k in varying.get(label, set())] or list(build)
        return f"{label} {params_text(build, keys)}" if build else label

    return name


def config_label(p: Mapping[str, Any]) -> str:
    """One config in words for titles and legends: ``faiss-ivf nlist=64 nprobe=2`` (label or
    backend, build params, search params), never a dict repr."""
    from retrieval.reporting.style import params_text

    name = str(p.get("label") or p.get("backend") or "?")
    parts = [params_text(d) for d in (p.get("build"), p.get("search")) if d]
    return " ".join([name, *parts])


def config_key(p: Mapping[str, Any]) -> str:
    """A stable identity of one config (backend, build, search)."""
    return json.dumps(
        [p.get("label") or p.get("backend"), p.get("build") or {}, p.get("search") or {}],
        sort_keys=True, default=str,
    )


def timed(points: Iterable[Mapping[str, Any]], cost: str = "p95_ms") -> list[dict[str, Any]]:
    """Points that have a value of ``cost`` and of recall (sweep probes lack p95_ms)."""
    return [dict(p) for p in points if p.get(cost) is not None and p.get("recall") is not None]


def points_frame(points: Sequence[Mapping[str, Any]]) -> Any:
    """One row per point, nested params flattened to ``build.M``, ``search.ef_search``, ..."""
    import pandas as pd

    rows = []
    for p in points:
        row = flatten({k: v for k, v in p.items() if k not in ("fronts",)})
        row["series"] = series_name(p)
        rows.append(row)
    return pd.DataFrame(rows)


def cheapest_meeting(
    points: Sequence[Mapping[str, Any]], target: float | None, cost: str = "p95_ms"
) -> list[dict[str, Any]]:
    """Per label, the lowest-``cost`` point whose mean recall >= ``target`` (point estimate; a
    sweep's own choice uses a confidence bound and is preferred where it exists)."""
    if target is None:
        return []
    best: dict[str, dict[str, Any]] = {}
    for p in timed(points, cost):
        if float(p["recall"]) < target:
            continue
        label = str(p.get("label") or p.get("backend"))
        if label not in best or float(p[cost]) < float(best[label][cost]):
            best[label] = dict(p)
    return list(best.values())


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def knob_curves(
    points: Sequence[Mapping[str, Any]], knobs: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Recall against the search knob, one curve per series (label + build), every point with
    a recall and a numeric knob value: ``{"label", "series", "knob", "x", "recall",
    "recall_lb", "meets"}`` (lists in knob order; ``recall_lb`` entries None where not measured).
    ``knobs``: the knob per label (a target sweep's ``builds[].knob``); else the search param
    that varies within the series (the first one when several do). Series without a varying
    numeric knob (an exact index) are left out."""
    namer = series_names(points)
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for p in points:
        if p.get("recall") is not None:
            groups.setdefault(namer(p), []).append(p)
    out = []
    for name, ser in groups.items():
        label = str(ser[0].get("label") or ser[0].get("backend") or "?")
        knob = (knobs or {}).get(label)
        if knob is None:
            values: dict[str, set[str]] = {}
            for p in ser:
                for k, v in (p.get("search") or {}).items():
                    if _number(v) is not None:
                        values.setdefault(k, set()).add(json.dumps(v))
            knob = next((k for k, vs in values.items() if len(vs) > 1), None)
        if knob is None:
            continue
        rows = sorted(((x, p) for p in ser
                       if (x := _number((p.get("search") or {}).get(knob))) is not None),
                      key=lambda t: t[0])
        if not rows:
            continue
        out.append({
            "label": label, "series": name, "knob": knob,
            "x": [x for x, _ in rows],
            "recall": [float(p["recall"]) for _, p in rows],
            "recall_lb": [None if p.get("recall_lb") is None else float(p["recall_lb"])
                          for _, p in rows],
            "meets": [p.get("meets") for _, p in rows],
        })
    return out


__all__ = ["cheapest_meeting", "config_key", "knob_curves", "points_frame", "series_name",
           "series_names", "timed"]
