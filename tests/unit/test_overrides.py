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
], ids=["study-n-trials", "study-threads", "study-strategy", "rerank-max-queries"])
def test_cli_and_api_refuse_a_bad_override_with_the_same_line(argv, call, capsys):
    with pytest.raises(ConfigError) as err:
        call()
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"rwb: error: {err.value}"
