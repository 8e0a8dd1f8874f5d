"""Spec overrides are applied in one place (retrieval.api.overrides): the command line and the
Python API refuse the same bad value with the same line, and apply the same good one."""

from __future__ import annotations

import pytest

from retrieval.api import verbs
from retrieval.api.overrides import apply_overrides
from retrieval.cli import main
from retrieval.errors import ConfigError
from retrieval.paths import REPO_ROOT
from retrieval.tune.spec import parse_spec

SPEC = {
    "name": "over",
    "dataset": {"kind": "synthetic", "n": 200, "dim": 8, "n_queries": 10},
    "k": 5,
    "indexes": [{"backend": "faiss-flat"}],
}
STUDY = str(REPO_ROOT / "sweeps" / "rag-end-to-end.yaml")
RERANK = str(REPO_ROOT / "sweeps" / "scifact-rerank.yaml")
FANOUT = str(REPO_ROOT / "sweeps" / "fanout-3-collections.yaml")
LOAD = str(REPO_ROOT / "sweeps" / "load-quickstart.yaml")
CHURN = str(REPO_ROOT / "sweeps" / "churn-qqp20k.yaml")


def test_index_overrides_reach_the_spec_fields():
    spec = apply_overrides(parse_spec(SPEC, source="over.yaml"), strategy="target",
                           target_recall=0.8, n_trials=3, threads=2, build_threads=1)
    assert (spec.tune.strategy, spec.target_recall, spec.tune.n_trials) == ("target", 0.8, 3)
    assert (spec.threads, spec.index_build.threads) == (2, 1)
    assert apply_overrides(spec) == spec  # nothing given: the spec unchanged


@pytest.mark.parametrize(("argv", "call"), [
    (["sweep", STUDY, "--n-trials", "0"], lambda: verbs.sweep(STUDY, n_trials=0)),
    (["sweep", STUDY, "--threads", "2"], lambda: verbs.sweep(STUDY, threads=2)),
    (["sweep", STUDY, "--strategy", "grid"], lambda: verbs.sweep(STUDY, strategy="grid")),
    (["tune", "rerank", RERANK, "--max-queries", "-3"],
     lambda: verbs.tune_rerank(RERANK, max_queries=-3)),
    (["bench", "fanout", FANOUT, "--queries", "0"],
     lambda: verbs.bench_fanout(FANOUT, queries=0)),
    (["bench", "fanout", FANOUT, "--server"], lambda: verbs.bench_fanout(FANOUT, server=True)),
    (["bench", "load", LOAD, "--p99-ms", "-1"], lambda: verbs.bench_load(LOAD, p99_ms=-1)),
    (["bench", "load", LOAD, "--duration", "0"], lambda: verbs.bench_load(LOAD, duration=0)),
    (["bench", "churn", CHURN, "--target-recall", "2"],
     lambda: verbs.bench_churn(CHURN, target_recall=2.0)),
    (["bench", "embed", "--sample", "0"], lambda: verbs.bench_embed(sample=0)),
], ids=["study-n-trials", "study-threads", "study-strategy", "rerank-max-queries",
        "fanout-queries", "fanout-server", "load-p99", "load-duration", "churn-target",
        "embed-sample"])
def test_cli_and_api_refuse_a_bad_override_with_the_same_line(argv, call, capsys):
    with pytest.raises(ConfigError) as err:
        call()
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"rwb: error: {err.value}"


@pytest.mark.parametrize(("argv", "verb"), [
    (["verify", "no-such-export.yaml"], "verify"),
    (["verify", "no-such-export.yaml", "--pairs", "p.csv"], "verify"),
    (["bench", "load", LOAD, "--duration", "0"], "bench_load"),
    (["bench", "fanout", FANOUT, "--queries", "0"], "bench_fanout"),
    (["bench", "churn", CHURN, "--queries", "0"], "bench_churn"),
    (["bench", "embed", "--sample", "0"], "bench_embed"),
])
def test_the_cli_goes_through_the_public_api(argv, verb, monkeypatch, capsys):
    """One front door: each command calls its verb of retrieval.api (the spy records the call
    and runs the real verb, whose one-line error the CLI prints)."""
    import retrieval.api

    real, called = getattr(retrieval.api, verb), []

    def spy(*args, **kwargs):
        called.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(retrieval.api, verb, spy)
    assert main(argv) == 2
    assert called, f"rwb {' '.join(argv[:2])} did not call retrieval.api.{verb}"
    assert capsys.readouterr().err.startswith("rwb: error: ")
