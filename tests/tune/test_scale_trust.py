"""Issue 34 new user 5: the trust line, the band widened by repeated unseeded builds, and the
one figure (the rule's) with its band moved along (retrieval.tune.scale_trust)."""

from __future__ import annotations

from retrieval.tune import scale_trust as st


def test_trust_needs_every_condition() -> None:
    ok = st.trust(2, 200_000, 80, [70, 95], 0.97, 0.95, high=512)
    assert ok == {"trusted": True, "line": "at 2x (200,000 vectors): knob 80 (band 70-95): "
                                           "can be trusted"}
    assert "beyond 10x" in st.trust(50, 5_000_000, 483, [400, 520], None, 0.95)["line"]
    wide = st.trust(2, 200_000, 199, [30, 483], None, 0.95)  # the new user's two runs
    assert not wide["trusted"] and "spans 228% of the value" in wide["line"]
    assert "misses the target" in st.trust(2, 200_000, 80, [70, 95], 0.93, 0.95)["line"]
    assert "top of its range (80)" in st.trust(2, 200_000, 80, [80, 80], None, 0.95,
                                               high=80)["line"]


def test_repeated_unseeded_builds_widen_the_band_by_their_spread() -> None:
    assert st.repeat_spread([129, 57, 90]) == (129 - 57) / 90
    assert st.median_knob([129, 57, 90]) == 90 and st.repeat_spread([40]) == 0.0
    assert st.widen([30, 39], 0.8, 1, 1000) == [6, 71]
    assert st.widen([30, 39], 0.0, 1, 1000) == [30, 39]
    assert st.widen([30, 39], 2.0, 1, 60) == [1, 60]  # clamped to the knob range


def test_the_rules_figure_replaces_the_bare_models_with_its_band() -> None:
    assert st.anchored(199, [150, 260], 398, 1, 1000) == (398, [300, 520])
    rows = st.finish_predictions(
        [{"multiple": 2.0, "n": 200, "knob": 10, "band": [8, 12], "ceiling": None}],
        {"k": "rule"}, [(1, 100)], 0.9, lambda rule, n, low, high: 20)
    assert rows[0]["knob"] == 20 and rows[0]["model_knob"] == 10 and rows[0]["band"] == [16, 24]
    assert rows[0]["trusted"] is True and rows[0]["trust"].startswith("at 2x (200 vectors)")


def test_seeded_means_deterministic_and_one_build_thread() -> None:
    class Seeded:
        deterministic = True

    class Unseeded:
        deterministic = False

    assert st.seeded(Seeded, 1) and not st.seeded(Seeded, 4) and not st.seeded(Unseeded, 1)
