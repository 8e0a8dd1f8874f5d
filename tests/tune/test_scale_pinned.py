"""Issue 34 pin 1 and new user 5: the scale study's decisions on a backend with a KNOWN ef(N)
curve (the fake index with ``half_ef_per_1k``: ``half_ef = N / 100``; with quality 2 a query
keeps 10 of 10 true neighbours (9 or 10 with spread 1) from ``ef >= half_ef`` and 9 (8 or 10)
just below, so the knob judged on the LOWER BOUND is exactly ``N / 100`` while the mean alone
would accept a smaller one). Asserted: the knob at each sample, the predicted and exact knob at
the full N, the band, a build that stops at the middle sample (its ceiling) and is never built
later, one figure per predicted size (the exported rule's) with its trust line, and the
repeated builds of an engine that cannot be seeded."""

from __future__ import annotations

import numpy as np
import pytest

import retrieval.testing.fake as fake
from retrieval.data import VectorDataset
from retrieval.tune import scale as sc
from retrieval.tune import scale_trust as st
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import lower_bound, split_queries
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep

TARGET, K, SEED, FULL = 0.9, 10, 0, 3200
SLOW, FAST = 100.0, 10.0  # half_ef per 1,000 vectors: build "steep" and build "gentle"


def data() -> VectorDataset:
    rng = np.random.default_rng(7)
    base = rng.normal(size=(FULL, 8)).astype(np.float32)
    queries = rng.normal(size=(120, 8)).astype(np.float32)
    return VectorDataset.from_arrays(base, queries, "l2", name="pinned")


def spec() -> object:
    common = {"quality": 2.0, "spread": 1, "us_per_ef": 0.0}
    return parse_spec({
        "name": "pinned", "dataset": "synthetic-small", "k": K, "target_recall": TARGET,
        "seed": SEED, "warmup": 0, "batch_repeats": 1, "modes": ["batch"],
        "index_build": {"threads": 1, "cache": False},
        "indexes": [
            {"backend": "fake", "label": "gentle", "build": {**common, "half_ef_per_1k": FAST},
             "search": {"ef_search": 1}},
            {"backend": "fake", "label": "steep", "build": {**common, "half_ef_per_1k": SLOW},
             "search": {"ef_search": 1}},
        ],
        "scale": {"fractions": ["1/8", "1/4", "1/2"], "bootstrap": 30, "predict_at": [2, 20]},
        "tune": {"strategy": "target", "objective": "qps",
                 "search_range": {"ef_search": [1, 64]}},
    }, source="pinned.yaml")


def expected_knob(ds: VectorDataset, n: int, per_1k: float) -> int:
    """The smallest ef whose lower bound (the spec's default confidence) meets the target on
    the tuning queries, from the fake's known per-query recall."""
    tune = split_queries(ds.n_queries, 0.2, SEED).tune
    h = fake.fake_half_ef(16, per_1k, n)
    for ef in range(1, 65):
        per_query = fake.fake_query_recall(ds.queries[tune], ef, 2.0, K, h, 1, 0)
        if lower_bound(per_query, K, ConfidenceSpec(), SEED) >= TARGET:
            return ef
    return -1


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return run_sweep(spec(), tmp_path_factory.mktemp("pinned") / "run", dataset=data()).summary


def test_the_knob_follows_the_known_curve_judged_on_the_lower_bound(study) -> None:
    ds = data()
    gentle = next(b for b in study["builds"] if b["label"] == "gentle")
    assert [r["n"] for r in gentle["samples"]] == [400, 800, 1600]
    assert [r["knob"] for r in gentle["samples"]] == [4, 8, 16]  # N / 100
    assert [expected_knob(ds, n, FAST) for n in (400, 800, 1600, FULL)] == [4, 8, 16, 32]
    # the mean alone would accept less at some size (the lower bound is what decides)
    tune = split_queries(ds.n_queries, 0.2, SEED).tune
    means = [fake.fake_query_recall(ds.queries[tune], ef - 1, 2.0, K, ef, 1, 0).mean()
             for ef in (4, 8, 16)]
    assert means[1] >= TARGET and means[2] >= TARGET  # judged on the mean: 7 and 15
    assert gentle["fit"]["model"] == "power" and gentle["fit"]["b"] == pytest.approx(1.0)
    assert gentle["predicted"] == 32 and gentle["exact"] == 32
    assert gentle["transfer_error"] == 0.0
    assert gentle["band"] == [32, 32]  # every resample keeps 9 or 10 hits per query at N/100


def test_a_build_stops_at_the_middle_sample_and_is_never_built_later(study) -> None:
    steep = next(b for b in study["builds"] if b["label"] == "steep")
    assert [r["n"] for r in steep["samples"]] == [400, 800]  # 1,600 never built
    assert steep["samples"][0]["knob"] == 40 and steep["samples"][1]["knob"] is None
    assert steep["stopped"] and steep["ceiling_n"] == 800
    assert steep["exact"] is None and steep["full_build_s"] is None


def test_one_figure_per_size_and_a_line_saying_whether_to_trust_it(study) -> None:
    gentle = next(b for b in study["builds"] if b["label"] == "gentle")
    at2, at20 = gentle["predicted_at"]
    assert (at2["n"], at2["knob"], at2["model_knob"]) == (6400, 64, 64)  # rule: 32 * 2
    assert at2["trusted"] is False and "top of its range (64)" in at2["trust"]
    assert at20["trusted"] is False and "20x is beyond 10x" in at20["trust"]


def test_builds_that_cannot_be_seeded_are_repeated(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(fake.FakeIndex, "deterministic", False)
    s = run_sweep(spec(), tmp_path / "run", dataset=data()).summary
    gentle = next(b for b in s["builds"] if b["label"] == "gentle")
    assert [r["knob_repeats"] for r in gentle["samples"]] == [[4] * 3, [8] * 3, [16] * 3]
    assert gentle["fit"]["unseeded_spread"] == 0.0 and gentle["band"] == [32, 32]


def test_the_spread_of_unseeded_repeats_widens_the_band(tmp_path, monkeypatch) -> None:
    """Builds that land differently each time (half_ef x 1, 1.5, 0.75 in turn, like an unseeded
    graph): three knobs per sample, the fit on their median, the band widened by their spread."""
    monkeypatch.setattr(fake.FakeIndex, "deterministic", False)
    factors = iter([1.0, 1.5, 0.75] * 100)
    real = fake.fake_half_ef
    monkeypatch.setattr(fake, "fake_half_ef",
                        lambda h, per_1k, n: max(1, round(real(h, per_1k, n) * next(factors))))
    s = run_sweep(spec(), tmp_path / "run", dataset=data()).summary
    gentle = next(b for b in s["builds"] if b["label"] == "gentle")
    first = gentle["samples"][0]
    assert first["knob_repeats"] == [4, 6, 3] and first["knob"] == 4  # the median
    spread = gentle["fit"]["unseeded_spread"]
    assert spread == max(st.repeat_spread(r["knob_repeats"]) for r in gentle["samples"])
    assert spread >= 0.75
    lo, hi = gentle["band"]
    assert lo < gentle["predicted"] < hi  # a band from one build would be a single value


def test_the_band_comes_from_resampling_the_tuning_queries() -> None:
    """A hand-computed band with two distinct values (issue 34 pin 1: a band that ignores the
    resampling passed while every fixture's band was a single value). Two tuning queries; at
    each size the knob is the low probe (N / 100) only when a resample draws query 0 twice
    (its mean at the low probe is 1.0 there, 0.5 otherwise: the target 0.9 is missed), else
    the high probe (N / 50). The same draw at every size, so a resample's knobs are (4, 8, 16)
    or (8, 16, 32), whose power fits predict exactly 32 or 64 at N = 3,200."""
    sizes = (400, 800, 1600)
    curves = [sc.Curve(n, (n // 100, n // 50), np.array([[1.0, 0.0], [1.0, 1.0]]), (0.0, 0.0),
                       64) for n in sizes]
    resamples, level, seed = 40, 0.9, 5
    # by hand: which resamples draw query 0 twice (numpy's generator, as the band draws them)
    rng = np.random.default_rng(seed)
    preds = [32.0 if not rng.integers(0, 2, size=2).any() else 64.0 for _ in range(resamples)]
    assert 3 <= preds.count(32.0) <= resamples - 3  # both values beyond each 5% tail
    want = (float(np.quantile(preds, 0.05)), float(np.quantile(preds, 0.95)))
    assert want == (32.0, 64.0)
    (lo, hi), = sc.bootstrap_band(curves, TARGET, "power", [FULL], lambda n, knob: knob,
                                  resamples=resamples, level=level, seed=seed)
    assert (lo, hi) == pytest.approx(want)  # ignoring the resampling gives (64, 64)


def test_the_ceiling_field_carries_the_measured_ceiling_where_it_stopped(study) -> None:
    """The steep build stops at the middle sample (N = 800, half_ef 80 above the range's 64):
    its ``ceiling`` is the lower bound measured there at the top of the range (the fake keeps
    floor(20 * 64 / 144) = 8 true neighbours, +-1 per query: mean recall about 0.8), with the N
    where it stopped; never the trend's guess at the full N."""
    steep = next(b for b in study["builds"] if b["label"] == "steep")
    stop = steep["samples"][1]
    assert fake.fake_hits(64, 2.0, K, fake.fake_half_ef(16, SLOW, 800)) == 8
    assert stop["n"] == 800 and stop["high"] == 64 and stop["stopped"]
    assert stop["ceiling_recall"] == pytest.approx(0.8, abs=0.02)
    assert stop["ceiling"] < stop["ceiling_recall"] and stop["ceiling"] < TARGET
    assert steep["ceiling"] == stop["ceiling"] and steep["ceiling_n"] == 800
    assert steep["ceiling_measured"] is True
    assert f"ceiling {stop['ceiling']:.3f}" in steep["stopped"]
