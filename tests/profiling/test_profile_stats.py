"""rwb profile's pure logic and its OpenTelemetry plumbing on hand-made requests: shares add up,
the tail is attributed to the stage that made it slow, the waterfall's roi, and spans exported by
the real SDK (OTLP JSON file, OTLP/HTTP protobuf to a local receiver) read back as one trace per
request with the stages as children."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from retrieval.profiling.stats import (
    RequestRecord,
    SpanRecord,
    compare,
    shares,
    stage_rows,
    tail_attribution,
    waterfall,
)

pytest.importorskip("opentelemetry.sdk.trace", reason="the trace extra is not installed")


def _req(i: int, embed: float, a: float, b: float, rerank: float, parallel: bool) -> RequestRecord:
    """A request with embed, retrieve (children a, b in ms), rerank; 0.1 ms between stages."""
    ms = 1_000_000
    t = 10 * ms * i
    start = t
    spans = [SpanRecord("embed", "embeddings m", t, t + int(embed * ms))]
    t += int(embed * ms) + ms // 10
    r0 = t
    if parallel:
        kids = [SpanRecord("retrieve/a", "retrieval a", r0, r0 + int(a * ms), "retrieve"),
                SpanRecord("retrieve/b", "retrieval b", r0, r0 + int(b * ms), "retrieve")]
        t = r0 + int(max(a, b) * ms)
    else:
        kids = [SpanRecord("retrieve/a", "retrieval a", r0, r0 + int(a * ms), "retrieve"),
                SpanRecord("retrieve/b", "retrieval b", r0 + int(a * ms),
                           r0 + int((a + b) * ms), "retrieve")]
        t = r0 + int((a + b) * ms)
    spans.append(SpanRecord("retrieve", "retrieval", r0, t))
    spans.extend(kids)
    t += ms // 10
    spans.append(SpanRecord("rerank", "rwb.rerank", t, t + int(rerank * ms)))
    t += int(rerank * ms)
    return RequestRecord(i, f"q{i}", start, t + ms // 10, tuple(spans))


def _records(parallel: bool = False) -> list[RequestRecord]:
    recs = [_req(i, 2.0, 1.0, 1.5, 3.0, parallel) for i in range(97)]
    # collection b made the last three slow (q99 the slowest)
    recs += [_req(i, 2.0, 1.0, 40.0 + i - 97, 3.0, parallel) for i in range(97, 100)]
    return recs


def test_shares_add_up_and_parallel_counts_once() -> None:
    for parallel in (False, True):
        recs = _records(parallel)
        sh = shares(recs, ["embed", "retrieve", "rerank"])
        for q in ("p50", "p95", "p99"):
            assert sum(v[q] for v in sh.values()) == pytest.approx(1.0)
            assert sh["overhead"][q] >= 0.0
        for r in recs:  # stages + overhead = end to end, overhead >= 0 (no double count)
            assert sum(r.top_level().values()) + r.overhead_ms() == pytest.approx(r.ms)
            assert r.overhead_ms() >= 0
    # parallel: retrieve is the slower child, not the sum
    assert _records(True)[0].top_level()["retrieve"] == pytest.approx(1.5)
    assert _records(False)[0].top_level()["retrieve"] == pytest.approx(2.5)


def test_tail_attribution_names_the_slow_collection() -> None:
    tail = tail_attribution(_records(True))
    assert tail["n"] == 1
    assert tail["by_stage"] == {"retrieve/b": 1}
    assert tail["requests"][0]["query_id"] == "q99"
    rows = {r["name"]: r for r in stage_rows(_records(True))}
    assert rows["retrieve/b"]["critical"] == 1.0
    assert rows["retrieve"]["shares"]["p99"] > rows["retrieve"]["shares"]["p50"]


def test_waterfall_roi_and_best() -> None:
    steps = [
        {"step": "baseline", "p50_ms": 10, "p95_ms": 100, "p99_ms": 120, "q": 0.60},
        {"step": "parallel", "p50_ms": 8, "p95_ms": 60, "p99_ms": 80, "q": 0.60},
        {"step": "skipped", "applied": False, "p95_ms": None},
        {"step": "depth", "p50_ms": 5, "p95_ms": 40, "p99_ms": 50, "q": 0.50},
    ]
    wf = waterfall(steps, "q")
    rows = {r["step"]: r for r in wf["steps"]}
    assert rows["parallel"]["p95_saved_ms"] == 40
    assert rows["depth"]["p95_saved_ms"] == 20  # from the last applied step, not the skipped
    assert rows["depth"]["roi"] == pytest.approx(20 / 0.1)
    assert wf["best"] == "parallel"  # saved time at no quality lost


def _emit_all(tracing, recs: list[RequestRecord]) -> list[str]:
    return [tracing.emit("rwb.request", r.start_ns, r.spans, {"rwb.query.id": r.query_id})[0]
            for r in recs]


def test_otlp_json_file_round_trips_through_compare(tmp_path: Path) -> None:
    from retrieval.profiling.trace import read_otlp_spans, start_tracing

    recs = _records(True)
    tracing = start_tracing(tmp_path / "otlp", service="t", run_name="t", endpoint=False)
    assert tracing is not None
    ids = _emit_all(tracing, recs)
    tracing.close()
    spans = read_otlp_spans(tmp_path / "otlp")
    assert len({s["trace_id"] for s in spans}) == len(recs) == len(set(ids))
    cmp = compare(spans, stage_rows(recs), {})
    got = {r["name"]: r for r in cmp["stages"]}
    for st in ("embed", "retrieve", "retrieve/a", "retrieve/b", "rerank"):
        assert got[st]["prod_p95_ms"] == pytest.approx(got[st]["lab_p95_ms"], abs=1e-3)
        assert got[st]["prod_p99_ms"] == pytest.approx(got[st]["lab_p99_ms"], abs=1e-3)
    assert got["request"]["n_prod"] == len(recs)
    assert cmp["unmapped_spans"] == {}


def test_compare_maps_production_span_names(tmp_path: Path) -> None:
    spans = [{"trace_id": "t", "parent": None, "name": "GET /search", "ms": 50.0, "attrs": {}},
             {"trace_id": "t", "parent": "x", "name": "vector_search", "ms": 30.0, "attrs": {}},
             {"trace_id": "t", "parent": "x", "name": "auth", "ms": 1.0, "attrs": {}}]
    lab = [{"name": "retrieve", "p50_ms": 5.0, "p95_ms": 6.0, "p99_ms": 7.0},
           {"name": "request", "p50_ms": 9.0, "p95_ms": 10.0, "p99_ms": 11.0}]
    cmp = compare(spans, lab, {"vector_search": "retrieve"})
    rows = {r["name"]: r for r in cmp["stages"]}
    assert rows["retrieve"]["gap_p95_ms"] == pytest.approx(24.0)
    assert rows["request"]["gap_p99_ms"] == pytest.approx(39.0)
    assert cmp["unmapped_spans"] == {"auth": 1}


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length", 0))
        type(self).bodies.append(self.rfile.read(n))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a: object) -> None:
        pass


def test_spans_arrive_at_an_otlp_http_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from retrieval.profiling.trace import start_tracing

    _Receiver.bodies = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{srv.server_port}")
        recs = _records(False)[:5]
        tracing = start_tracing(None, service="t", run_name="t")
        assert tracing is not None and tracing.endpoint
        ids = _emit_all(tracing, recs)
        tracing.close()
    finally:
        srv.shutdown()
        srv.server_close()
    spans = []
    for body in _Receiver.bodies:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                spans.extend(ss.spans)
    by_trace: dict[str, list] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id.hex(), []).append(s)
    assert sorted(by_trace) == sorted(ids)  # one trace per request
    for ss in by_trace.values():
        roots = [s for s in ss if not s.parent_span_id]
        assert len(roots) == 1 and roots[0].name == "rwb.request"
        ids_of = {s.span_id: s for s in ss}
        stages = {}
        for s in ss:
            attrs = {a.key: a.value.string_value for a in s.attributes}
            if s.parent_span_id:
                stages[attrs["rwb.stage"]] = ids_of[s.parent_span_id]
        assert {k for k, p in stages.items() if p is roots[0]} == {"embed", "retrieve",
                                                                   "rerank"}
        assert stages["retrieve/a"].name == "retrieval" and stages["retrieve/b"].name == "retrieval"
