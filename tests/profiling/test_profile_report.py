"""A profile run directory (written by rwb profile's writer from synthetic request records, no
model) is a run kind: `retrieval.open_run` types it, `rwb report` renders its stacked stage
bars, remedy waterfall and slow-trace timeline, and tables of stages, tail and remedies."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.cli import main
from retrieval.profiling.run import ProfileResult, write_profile_run
from retrieval.profiling.spec import parse_profile_spec
from retrieval.profiling.stats import (
    RequestRecord,
    SpanRecord,
    exemplars,
    percentiles,
    stage_rows,
    tail_attribution,
    waterfall,
)

pytest.importorskip("matplotlib", reason="the report extra is not installed")

MS = 1_000_000


def _records(slow_at: int, rerank_ms: int) -> list[RequestRecord]:
    out = []
    for i in range(20):
        t = i * 100 * MS
        emb = 2 * MS
        ret = (30 if i == slow_at else 5) * MS  # one request slow in retrieval
        spans = (SpanRecord("embed", "embeddings m", t, t + emb),
                 SpanRecord("retrieve", "retrieval", t + emb, t + emb + ret),
                 SpanRecord("retrieve/a", "retrieval a", t + emb, t + emb + ret, "retrieve"),
                 SpanRecord("rerank", "rwb.rerank", t + emb + ret,
                            t + emb + ret + rerank_ms * MS))
        out.append(RequestRecord(i, f"q{i}", t, spans[-1].end_ns + MS // 10, spans,
                                 trace_id=f"{i:032x}"))
    return out


def test_profile_run_opens_and_renders(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    import retrieval

    spec = parse_profile_spec({"name": "synthetic",
                               "retrieval": {"collections": [{"name": "a", "source": "scifact"}]}})
    base, smaller = _records(7, 20), _records(7, 8)
    steps = [{"step": "baseline", "what": "as specified", "applied": True,
              **percentiles([r.ms for r in base])},
             {"step": "smaller rerank depth", "what": "top-30 -> top-10", "applied": True,
              **percentiles([r.ms for r in smaller])},
             {"step": "parallel collections", "what": "one collection", "applied": False,
              "p50_ms": None, "p95_ms": None, "p99_ms": None}]
    summary = {"kind": "profile", "name": "synthetic", "mode": "serial", "k": 10,
               "stages": stage_rows(base), "end_to_end": percentiles([r.ms for r in base]),
               "tail": tail_attribution(base), "exemplars": exemplars(base),
               "remedies": waterfall(steps, None)}
    run = write_profile_run(spec, ProfileResult(summary, {"baseline": base,
                                                          "smaller rerank depth": smaller}),
                            tmp_path / "run")
    opened = retrieval.open_run(run.path)
    assert opened.kind == "profile"
    assert opened.to_dict()["remedies"]["best"] == "smaller rerank depth"
    assert set(opened.to_frame()["stage"]) >= {"embed", "retrieve/a", "rerank", "request"}
    assert main(["report", str(run.path)]) == 0
    capsys.readouterr()
    pngs = sorted(p.name for p in run.path.glob("*.png"))
    assert pngs == ["report_profile_slow_trace.png", "report_profile_stages.png",
                    "report_profile_waterfall.png"]
    html = (run.path / "report.html").read_text()
    for text in ("Tail attribution", "Remedies", "retrieve/a", "smaller rerank depth",
                 "Slowest request"):
        assert text in html, text
