"""The batched query embedding remedy of `rwb profile --remedies` (`remedies.embed_batch`): the
step is measured like the others (its own pass over the same queries), each request of a batch
pays its batch's one embedding call, the later stages run per request, and the waterfall row
gives the measured embedding time per query. Small: 30 SciFact abstracts, 8 logged queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval.paths import data_dir
from retrieval.profiling.run import run_profile
from retrieval.profiling.spec import parse_profile_spec

pytestmark = [
    pytest.mark.model,
    pytest.mark.slow,  # ~35 s at load average 7 on 2 cores (model load + three passes)
    pytest.mark.skipif(not data_dir().is_dir(),
                       reason=f"shared data folder absent ({data_dir()}); set RWB_DATA_DIR"),
]


def test_batched_query_embedding_remedy(tmp_path: Path) -> None:
    q = tmp_path / "queries.jsonl"
    q.write_text("".join(json.dumps({"id": f"q{i}", "text": f"protein {w} in cell signalling"})
                         + "\n" for i, w in enumerate("abcdefgh")))
    spec = parse_profile_spec({
        "name": "embed-batch", "k": 5, "warmup": 1,
        "retrieval": {"collections": [
            {"name": "scifact", "source": "scifact", "sample": 30, "backend": "hnswlib",
             "build": {"M": 8, "ef_construction": 32}, "search": {"ef_search": 16}}]},
        "remedies": {"parallel": False, "embed_batch": 4}})
    res = run_profile(spec, queries_file=q, remedies=True, workdir=tmp_path / "w")
    steps = {r["step"]: r for r in res.summary["remedies"]["steps"]}
    step = steps["batched query embedding"]
    assert step["applied"] and "4 at a time" in step["what"]
    assert step["p95_ms"] is not None and step["embed_ms_per_query"] > 0
    base = res.passes["baseline"]
    batched = res.passes["batched query embedding"]
    assert [r.query_id for r in batched] == [r.query_id for r in base]
    assert [r.ranked for r in batched] == [r.ranked for r in base]  # same answers
    for r in base:
        (emb,) = [s for s in r.spans if s.stage == "embed"]
        assert emb.attrs["rwb.embed.batch"] == 1
    for g in (batched[:4], batched[4:]):
        embeds = [next(s for s in r.spans if s.stage == "embed") for r in g]
        assert {s.attrs["rwb.embed.batch"] for s in embeds} == {4}
        assert len({s.end_ns - s.start_ns for s in embeds}) == 1  # one call, paid by each
    for r in batched:  # the stages still add up within the end to end
        assert r.overhead_ms() >= 0
        assert r.start_ns == r.spans[0].start_ns
