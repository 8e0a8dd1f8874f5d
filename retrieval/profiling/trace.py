"""OpenTelemetry for ``rwb profile``: one trace per request, one span per stage (children of the
request's span), written as OTLP JSON lines (``--otlp-dir``, the SDK's file exporter) and/or sent
over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (the SDK's exporter reads the standard
variables); and the reader of OTLP JSON traces for ``--compare``.

Names: the GenAI semantic conventions where they exist (``gen_ai.operation.name`` =
``embeddings`` / ``retrieval``, ``gen_ai.request.model``, ``gen_ai.request.top_k``,
``gen_ai.data_source.id``, ``gen_ai.embeddings.dimension.count``; span names
``"{operation} {model or data source}"``); everything else (cache hit/miss and distance, fusion,
rerank - the installed conventions name no rerank operation -, engine, knobs, the stage) under
``rwb.``. Every span carries ``rwb.stage``, so a trace maps back to the pipeline's stages.

Tracing off is a ``None`` tracer: the request loop checks it once per request and creates
nothing. Tracing on, the spans of a request are created when it ends, with the stages' measured
start and end times, and *before* the request's own end is taken: their cost shows up in the
request's ``overhead`` (end to end minus the stages), which is what tracing costs a request.
The optional packages are imported only here, only when tracing is asked for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError, DataError
from retrieval.otel import INSTALL, endpoint_configured
from retrieval.otel import Tracing as _Tracing
from retrieval.otel import start_tracing as _start_tracing
from retrieval.profiling.stats import SpanRecord

SCOPE = "rwb.profile"


class Tracing(_Tracing):
    """:class:`retrieval.otel.Tracing` with :meth:`emit`: one request's measured spans as
    OpenTelemetry spans; returns the trace id (32 hex digits) and the request's end
    (``perf_counter_ns``, taken after its spans were made: the root span's end)."""

    def emit(self, root_name: str, start_ns: int, spans: Sequence[SpanRecord],
             attrs: Mapping[str, Any]) -> tuple[str, int]:
        from opentelemetry import trace

        off = self.offset_ns
        root = self.tracer.start_span(root_name, start_time=start_ns + off,
                                      attributes=dict(attrs))
        ctx = trace.set_span_in_context(root)
        parents: dict[str, Any] = {}
        for s in spans:  # parents come before their children
            pctx = ctx if s.parent is None else trace.set_span_in_context(parents[s.parent])
            sp = self.tracer.start_span(s.name, context=pctx, start_time=s.start_ns + off,
                                        attributes={"rwb.stage": s.stage, **s.attrs})
            sp.end(end_time=s.end_ns + off)
            parents[s.stage] = sp
        end = time.perf_counter_ns()
        root.end(end_time=end + off)
        return f"{root.get_span_context().trace_id:032x}", end


def start_tracing(otlp_dir: Path | None, *, service: str, run_name: str,
                  endpoint: bool | None = None) -> Tracing | None:
    """Tracing to ``otlp_dir`` (one ``traces.jsonl``) and/or the OTLP/HTTP endpoint of the
    environment; None when neither is asked for (tracing off)."""
    return _start_tracing(otlp_dir, service=service, run_name=run_name, scope=SCOPE,
                          endpoint=endpoint, cls=Tracing)


# --------------------------------------------------------------------------- reading OTLP JSON


def _value(v: Mapping[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    return None


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
        if not found:
            raise DataError(f"--compare '{path}': no .json/.jsonl files in that folder")
        return found
    if not path.is_file():
        raise ConfigError(f"--compare '{path}': no such file or folder")
    return [path]


def _docs(p: Path) -> Iterator[Mapping[str, Any]]:
    text = p.read_text(encoding="utf-8")
    try:  # one JSON document (an OTLP export request), or one per line
        yield json.loads(text)
        return
    except json.JSONDecodeError:
        pass
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{p}:{n}: not OTLP JSON ({exc.msg})") from None


def read_otlp_spans(path: Path | str) -> list[dict[str, Any]]:
    """The spans of OTLP JSON trace files (a file or a folder of ``.json``/``.jsonl``; each a
    ``resourceSpans`` document per line or one per file): ``trace_id``, ``span_id``, ``parent``,
    ``name``, ``ms`` (end - start), ``attrs``."""
    out: list[dict[str, Any]] = []
    for p in _files(Path(path)):
        for doc in _docs(p):
            if not isinstance(doc, Mapping) or "resourceSpans" not in doc:
                raise DataError(f"{p}: not an OTLP JSON trace document (no 'resourceSpans')")
            for rs in doc["resourceSpans"] or []:
                for ss in rs.get("scopeSpans") or []:
                    for sp in ss.get("spans") or []:
                        try:
                            ms = (int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])) / 1e6
                        except (KeyError, ValueError, TypeError):
                            raise DataError(f"{p}: span {sp.get('name')!r} has no valid "
                                            f"startTimeUnixNano/endTimeUnixNano") from None
                        attrs = {a["key"]: _value(a.get("value") or {})
                                 for a in sp.get("attributes") or [] if "key" in a}
                        out.append({"trace_id": sp.get("traceId"), "span_id": sp.get("spanId"),
                                    "parent": sp.get("parentSpanId") or None,
                                    "name": sp.get("name"), "ms": ms, "attrs": attrs})
    if not out:
        raise DataError(f"--compare '{path}': no spans found")
    return out


__all__ = ["INSTALL", "Tracing", "endpoint_configured", "read_otlp_spans", "start_tracing"]
