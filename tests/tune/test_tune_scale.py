"""Pure logic of a scale study (retrieval.tune.scale): rules of N, nested samples, model choice,
the bootstrap band, the ceiling trend, the local search and the exported rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.errors import ConfigError
from retrieval.tune import scale as sc
from retrieval.tune.spec import parse_spec


@pytest.mark.parametrize(("text", "n", "value"), [
    ("4*sqrt(N)", 10_000, 400), ("sqrt(N)", 100, 10), ("2*N^0.5", 400, 40),
    ("0.01*N", 5_000, 50), ("N**0.25", 10_000, 10),
])
def test_rule_values(text, n, value):
    assert sc.rule_value(text, n) == value


def test_bad_rule_is_one_line_naming_the_field():
    with pytest.raises(ConfigError, match=r"scale\.build_rules.*4\*sqrt\(N\)"):
        parse_spec({**_spec(), "scale": {"fractions": [0.25, 0.5],
                                         "build_rules": {"nlist": "log(N)"}}}, source="s.yaml")


def _spec():
    return {"name": "s", "dataset": "synthetic-small", "target_recall": 0.9,
            "indexes": [{"backend": "hnswlib", "build": {"M": 8}, "search": {"ef_search": 10}}]}


def test_spec_takes_fractions_as_text_and_needs_exactly_one_of_fractions_or_sizes():
    spec = parse_spec({**_spec(), "scale": {"fractions": ["1/64", "1/16", "1/4"]}})
    assert spec.scale is not None and spec.scale.fractions == [1 / 64, 1 / 16, 1 / 4]
    assert "scale" in spec.model_dump(mode="json")
    assert "scale" not in parse_spec(_spec()).model_dump(mode="json")  # unchanged without
    with pytest.raises(ConfigError, match="exactly one of 'fractions' or 'sizes'"):
        parse_spec({**_spec(), "scale": {"fractions": [0.1, 0.2], "sizes": [10, 20]}})
    with pytest.raises(ConfigError, match=r"fraction must lie in \(0, 1\)"):
        parse_spec({**_spec(), "scale": {"fractions": [0.5, 2]}})


@pytest.mark.parametrize(("scale", "field"), [
    ({"fractions": [None, 0.5]}, "scale.fractions"),
    ({"fractions": [[0.1], 0.5]}, "scale.fractions"),
    ({"fractions": [{"a": 1}, 0.5]}, "scale.fractions"),
    ({"fractions": [0.25, 0.5], "predict_at": [math.inf]}, "scale.predict_at"),
    ({"fractions": [0.25, 0.5], "predict_at": [math.nan]}, "scale.predict_at"),
    ({"fractions": [0.25, 0.5], "build_rules": {"M": "N^400"}}, "scale.build_rules"),
])
def test_malformed_scale_fields_are_one_line_not_a_traceback(scale, field):
    """Issue 34 MEDIUM 7: these were TypeError / OverflowError tracebacks."""
    with pytest.raises(ConfigError) as err:
        parse_spec({**_spec(), "scale": scale}, source="s.yaml")
    assert "\n" not in str(err.value) and field in str(err.value), str(err.value)


def test_a_rule_too_large_for_a_build_param_is_one_line():
    with pytest.raises(ConfigError, match=r"scale\.build_rules: .* above 2,147,483,647"):
        sc.rule_value("99999999*N^2", 2000)


def test_sample_sizes_are_checked_against_the_base():
    spec = sc.ScaleSpec(fractions=[0.25, 0.5, 0.125])
    assert sc.sample_sizes(spec, 1000, 10) == [125, 250, 500]
    with pytest.raises(ValueError, match=r"\[10, 1000\)"):
        sc.sample_sizes(sc.ScaleSpec(sizes=[100, 1000]), 1000, 10)


def test_samples_are_nested_and_seeded():
    rows = sc.nested_rows(1000, [50, 200, 600], seed=3)
    assert [r.size for r in rows] == [50, 200, 600]
    assert set(rows[0]) <= set(rows[1]) <= set(rows[2])
    assert all(np.array_equal(a, b) for a, b in
               zip(rows, sc.nested_rows(1000, [50, 200, 600], seed=3), strict=True))
    assert not np.array_equal(rows[0], sc.nested_rows(1000, [50], seed=4)[0])


def test_model_choice_by_predicting_the_largest_sample():
    ns = [20_000, 40_000, 80_000, 160_000]
    power = [3.0 * n ** 0.6 for n in ns]
    log = [10 + 7 * math.log2(n) for n in ns]
    f, errors = sc.choose_fit(ns, power)
    assert f.model == "power" and errors["power"] == pytest.approx(0, abs=1e-9)
    assert f.predict(320_000) == pytest.approx(3.0 * 320_000 ** 0.6, rel=1e-6)
    assert f.per_doubling(160_000) == pytest.approx(2 ** 0.6, rel=1e-6)
    f, errors = sc.choose_fit(ns, log)
    assert f.model == "log" and errors["log"] == pytest.approx(0, abs=1e-9)
    # two sizes cannot tell the models apart: the default, said so
    f, errors = sc.choose_fit(ns[:2], power[:2])
    assert f.model == "power" and errors == {"power": None, "log": None}


def test_bootstrap_band_holds_the_point_estimate_and_narrows_with_agreeing_queries():
    values = (10, 20, 40)
    rng = np.random.default_rng(0)

    def curve(n, knob_at):
        # per-query recall: 1 at and above the knob the size needs, 0.5 below (some queries 1)
        pq = np.stack([np.where(rng.random(200) < (1.0 if v >= knob_at else 0.5), 1.0, 0.0)
                       for v in values])
        return sc.Curve(n, values, pq, (0.0, 0.0, 0.0), 40)

    curves = [curve(1000, 10), curve(2000, 20), curve(4000, 40)]
    band = sc.bootstrap_band(curves, 0.95, "power", [8000], lambda n, k: k, resamples=50,
                             level=0.9, seed=0)
    (lo, hi), = band
    f = sc.fit([1000, 2000, 4000], [10, 20, 40], "power")
    assert lo <= f.predict(8000) + 1e-6 and hi >= f.predict(8000) - 1e-6
    assert f.predict(8000) == pytest.approx(80, rel=1e-6)


def test_ceiling_trend_predicts_where_a_build_stops_meeting_the_target():
    ns = [1000, 2000, 4000]
    ceilings = [0.96, 0.94, 0.92]  # -0.02 per doubling
    t = sc.ceiling_trend(ns, ceilings, 0.9)
    assert t.n_stop == pytest.approx(8000, rel=1e-6)
    assert t.predict(16_000) == pytest.approx(0.88, abs=1e-9)
    assert sc.ceiling_trend(ns, [0.99, 0.99, 0.995], 0.9).n_stop is None
    # a flat ceiling of 1.0 (fit noise b ~ -4e-16) predicts no stop (it overflowed before)
    assert sc.ceiling_trend([500, 1000], [1.0, 1.0], 0.9).n_stop is None
    line = sc.ceiling_message(10, 0.95, {"M": 16, "ef_construction": 100}, 1_000_000, 0.935,
                              hint=sc.raise_hint({"M": 16, "ef_construction": 100},
                                                 ["M", "ef_construction"]))
    assert line == ("no search setting reaches recall@10 0.95 with M 16, ef_construction 100 "
                    "at N = 1,000,000: ceiling 0.935; try M 32, ef_construction 200")


@pytest.mark.parametrize("answer", [1, 2, 9, 37, 38, 100, 311, 512])
@pytest.mark.parametrize("guess", [1, 30, 40, 300, 512])
def test_local_search_finds_the_exact_cheapest_value(answer, guess):
    calls: list[int] = []

    def meets(v):
        calls.append(v)
        return v >= answer

    out = sc.local_search(1, 512, guess, meets)
    assert out.value == answer
    assert len(calls) == len(set(calls)) == len(out.probes)  # never the same value twice


def test_local_search_reports_a_miss_at_the_top():
    assert sc.local_search(1, 64, 10, lambda v: False).value is None


def test_transfer_error_sign():
    assert sc.transfer_error(115, 100) == pytest.approx(0.15)
    assert sc.transfer_error(80, 100) == pytest.approx(-0.2)
    assert sc.transfer_error(None, 100) is None


def test_exported_rule_scales_the_measured_knob_and_clamps():
    entry = {"knob": "ef_search", "exact": 40, "predicted": 44, "transfer_error": 0.1,
             "fit": {**sc.fit([1000, 2000], [10, 20], "power").to_dict(),
                     "valid_n": [1000, 4000], "per_doubling": 2.0}}
    rule = sc.export_rule(entry, {})
    assert rule is not None and rule["value"] == 40 and rule["n"] == 4000
    assert sc.rule_knob(rule, 4000, 10, 4096) == 40
    assert sc.rule_knob(rule, 8000, 10, 4096) == 80  # one doubling: x2 (the fitted factor)
    assert sc.rule_knob(rule, 1_000_000, 10, 4096) == 4096  # clamped to the knob range
    # a fraction of the range (nprobe of nlist): the share is kept at the new nlist
    frac = sc.export_rule({**entry, "fraction": True, "range_at_full": [1, 100],
                           "fit": {**sc.fit([1000, 2000], [0.1, 0.1], "power").to_dict(),
                                   "valid_n": [1000, 4000]}}, {"nlist": "4*sqrt(N)"})
    assert frac is not None and sc.rule_knob(frac, 16000, 1, 200) == 80
    assert sc.export_rule({**entry, "exact": None}, {}) is None
