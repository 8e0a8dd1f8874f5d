"""``rwb verify FILE --dataset OTHER`` for an export that carries a scale rule
(``evidence.scale_rule``, written from a scale study): the collection has another size, so the
knob is not the file's value but the rule's value at that N.

What is measured: the source backend and build params (build params named in the rule's
``build_rules`` follow their rule of N, e.g. ``nlist: 4*sqrt(N)``), with the rule's knob at the
collection's N, on the recorded query split, k and confidence bound. It holds when the lower
bound on mean recall@k over the tuning queries is >= the recorded target. The evidence checks of
a same-data verify (recorded recall reproduced) do not apply: the data differ by design. The
engine-native config at that N is reported (``config_at_n``) so it can be deployed as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.evaluation import Evaluator
from retrieval.exporting.engines import translate
from retrieval.exporting.portable import portable
from retrieval.indexes.registry import get_backend
from retrieval.params import validate_params
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import split_queries
from retrieval.tune.measure import EPS, Measurer
from retrieval.tune.scale import rule_knob, rule_value


def scaled_source(src: Mapping[str, Any], rule: Mapping[str, Any], n: int, k: int,
                  where: str) -> tuple[str, dict[str, Any], dict[str, Any], str, int]:
    """(backend, build params at ``n``, search params with the rule's knob, knob, value)."""
    backend = str(src.get("backend"))
    cls = get_backend(backend)
    build = dict(src.get("build_params") or {})
    for name, text in (rule.get("build_rules") or {}).items():
        if name in cls.BuildParams.model_fields:
            build[name] = rule_value(str(text), n)
    bp = validate_params(cls.BuildParams, build, where=f"{where}: source.build_params at N={n}")
    knob = str(rule.get("knob"))
    if knob not in cls.monotone_knobs_for(bp):
        raise ConfigError(f"{where}: field 'evidence.scale_rule.knob': '{knob}' is not a "
                          f"monotone knob of backend '{backend}'")
    low, high = cls.knob_range(knob, bp, k)
    most = cls.most_accurate_search(bp).get(knob)
    if isinstance(most, int) and low <= most < high:
        high = most
    value = rule_knob(rule, n, low, high)
    search = {**(src.get("search") or {}), knob: value}
    return backend, bp.model_dump(mode="json"), search, knob, value


def verify_at_n(doc: Mapping[str, Any], where: str, ds: VectorDataset, engine: str,
                target: float, k: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Measure the rule's config at ``ds.n_base``; the named check and what was measured."""
    ev = doc.get("evidence") or {}
    rule = ev.get("scale_rule") or {}
    src = doc.get("source") or {}
    n = ds.n_base
    backend, build, search, knob, value = scaled_source(src, rule, n, k, where)
    conf = validate_params(ConfidenceSpec, ev.get("confidence") or {}, where=where,
                           prefix="evidence.confidence.")
    split = split_queries(ds.n_queries, settings["heldout_fraction"], settings["split_seed"])
    with Evaluator(ds, k, threads=settings["threads"], seed=settings["seed"],
                   warmup=settings["warmup"], batch_repeats=settings["repeats"],
                   build_threads=settings["build_threads"]) as e:
        m = Measurer(e, split, settings["modes"], target, conf, settings["seed"])
        built = e.build(backend, build)
        res = m.full(built, search)
        held = m.heldout(built, search)
    try:
        native: Any = translate(engine, portable(backend, build, search), str(ds.metric),
                                ds.dim, k)
    except ConfigError as exc:
        native = f"not expressible in {engine}: {exc}"
    n0 = rule.get("n")
    lo, hi = (rule.get("valid_n") or [None, None])[0], rule.get("extrapolate_up_to")
    inside = isinstance(lo, int | float) and isinstance(hi, int | float) and lo <= n <= hi
    check = {
        "check": f"scale rule at N = {n:,}", "passed": bool(res.recall_lb >= target - EPS),
        "measured": round(float(res.recall_lb), 6),
        "expected": f">= {target} with {knob} = {value} (the rule's value at N = {n:,}; "
                    f"{rule.get('value')} at N = {n0:,})" if isinstance(n0, int)
                    else f">= {target}",
        "fields": [],
        "within_validity": inside,
    }
    return {"backend": backend, "build": build, "search": search, "measured": res,
            "heldout": held, "check": check, "config_at_n": native, "n": n}


__all__ = ["scaled_source", "verify_at_n"]
