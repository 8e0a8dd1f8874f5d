"""`rwb bench load --trace` and `rwb sweep --trace`: one OpenTelemetry span per measured point /
completed trial, written as OTLP JSON lines (--otlp-dir) and sent over OTLP/HTTP to a local
receiver (the real exporter and protobuf, decoded with opentelemetry-proto); tracing off makes
no span; --trace with nowhere to send is one line, exit 2. Small: the fault backend's short
points and the seeded FakeIndex on synthetic-small (seconds)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.cli import main

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

pytest.importorskip("opentelemetry.sdk.trace", reason="the trace extra is not installed")

LOAD = """\
name: load-trace
dataset: {kind: synthetic, n: 200, n_queries: 20, dim: 8, metric: l2, seed: 1}
k: 5
warmup_s: 0.1
duration_s: 0.4
max_lag_us: 50000
slo: {p99_ms: 30, target_recall: 0.9}
closed: {clients: [1, 2]}
open: {arrival: fixed, clients: 2, rates: [50], search: null}
configs:
  - backend: fault
    label: fault-1ms
    build: {service_ms: 1, workers: 2}
"""


def _spans_of(path: Path) -> list[dict]:
    return [sp for line in path.read_text().splitlines() if line.strip()
            for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
            for sp in ss["spans"]]


def _attrs(sp: dict) -> dict:
    out = {}
    for a in sp.get("attributes", []):
        v = a["value"]
        out[a["key"]] = next(iter(v.values())) if v else None
    return out


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


@pytest.fixture()
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    _Receiver.bodies = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{srv.server_port}")
    try:
        yield _Receiver.bodies
    finally:
        srv.shutdown()
        srv.server_close()


def _decoded(bodies: list[bytes]) -> list:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans = []
    for body in bodies:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                spans.extend(ss.spans)
    return spans


def test_bench_load_trace_one_span_per_point(tmp_path: Path, receiver: list[bytes],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "load.yaml"
    spec.write_text(LOAD)
    otlp = tmp_path / "otlp"
    assert main(["bench", "load", str(spec), "--json", "--out", str(tmp_path / "run"),
                 "--otlp-dir", str(otlp)]) == 0
    s = json.loads(capsys.readouterr().out)
    points = s["configs"][0]["points"]
    assert [p["mode"] for p in points] == ["closed", "closed", "open"]
    spans = _spans_of(otlp / "traces.jsonl")
    assert len(spans) == 3  # one per measured point, each its own trace
    assert {sp["traceId"] for sp in spans} == {p["trace_id"] for p in points}
    for sp, p in zip(sorted(spans, key=lambda x: int(x["startTimeUnixNano"])), points,
                     strict=True):
        a = _attrs(sp)
        assert sp["name"] == "retrieval fault-1ms"
        assert a["gen_ai.operation.name"] == "retrieval"
        assert a["gen_ai.data_source.id"] == "fault-1ms" and a["rwb.backend"] == "fault"
        assert a["rwb.mode"] == p["mode"]
        assert float(a["rwb.p99_ms"]) == pytest.approx(p["p99_ms"])
        # the span covers the point's measurement: at least its measured part (0.3 s; an
        # open loop's last request is sent at 19/50 s)
        assert int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"]) >= 0.3e9
    # the same spans over OTLP/HTTP
    got = _decoded(receiver)
    assert sorted(x.trace_id.hex() for x in got) == sorted(p["trace_id"] for p in points)


def test_bench_load_untraced_makes_no_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from retrieval import otel

    def boom(*a: object, **kw: object) -> None:
        raise AssertionError("a span was made with tracing off")

    monkeypatch.setattr(otel.Tracing, "span", boom)
    monkeypatch.setattr(otel, "start_tracing", boom)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    spec = tmp_path / "load.yaml"
    spec.write_text(LOAD.replace("clients: [1, 2]", "clients: [1]").replace("rates: [50]",
                                                                            "rates: []"))
    assert main(["bench", "load", str(spec), "--json", "--out", str(tmp_path / "run")]) == 0
    s = json.loads(capsys.readouterr().out)
    assert all("trace_id" not in p for p in s["configs"][0]["points"])


def test_trace_with_nowhere_to_send_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    spec = tmp_path / "load.yaml"
    spec.write_text(LOAD)
    assert main(["bench", "load", str(spec), "--trace", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "--otlp-dir" in err and "OTEL_EXPORTER_OTLP_ENDPOINT" in err
    assert "Traceback" not in err


def _sweep_spec() -> dict[str, object]:
    return {"name": "trace-sweep", "dataset": "synthetic-small", "k": 10, "warmup": 1,
            "batch_repeats": 1,
            "indexes": [{"backend": "fake", "build": {"quality": 1.0, "half_ef": 4,
                                                      "us_per_ef": 0.0},
                         "search": {"ef_search": [8, 16, 32]}}],
            "tune": {"strategy": "grid"}}


def test_sweep_trace_one_span_per_trial(tmp_path: Path, receiver: list[bytes],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump(_sweep_spec()))
    otlp = tmp_path / "otlp"
    assert main(["sweep", str(spec), "--json", "--out", str(tmp_path / "run"),
                 "--otlp-dir", str(otlp)]) == 0
    s = json.loads(capsys.readouterr().out)
    trials = {r["trial"]: r for r in s["rows"]}
    spans = _spans_of(otlp / "traces.jsonl")
    assert len(spans) == len(trials) == 3
    by_trial = {int(_attrs(sp)["rwb.trial"]): sp for sp in spans}
    assert set(by_trial) == set(trials)
    for n, sp in by_trial.items():
        a = _attrs(sp)
        assert sp["name"].startswith("retrieval ") and a["rwb.backend"] == "fake"
        assert int(a["rwb.knob.ef_search"]) == trials[n]["search"]["ef_search"]
        assert float(a["rwb.recall"]) == pytest.approx(trials[n]["recall"])
        assert int(sp["endTimeUnixNano"]) >= int(sp["startTimeUnixNano"])
    assert len(_decoded(receiver)) == 3
