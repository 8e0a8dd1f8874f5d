"""OpenTelemetry output shared by every traced measurement (``rwb profile``, ``rwb bench load
--trace``, ``rwb sweep --trace``): a tracer provider writing OTLP JSON lines into a folder (the
SDK's file exporter, one ``traces.jsonl``) and/or sending OTLP/HTTP when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) is set (the SDK's exporter reads the
standard variables).

Tracing off is ``None`` (:func:`start_tracing` returns None when neither output is asked for):
callers test it once per measured piece and create nothing. Spans are made *after* the piece
was measured, from its measured start and end (``perf_counter_ns``, mapped to the epoch with one
offset taken at start, or epoch nanoseconds for times recorded elsewhere), so tracing never sits
inside a timed section. The optional packages are imported only here, only when tracing is
asked for. Names: the GenAI semantic conventions where they exist, ``rwb.`` for the rest.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from retrieval.errors import ConfigError

INSTALL = "pip install 'retrieval-workbench[trace]'"
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
#: the GenAI semantic conventions' operation attribute
OP = "gen_ai.operation.name"


def _need_otel() -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        raise ConfigError(f"tracing needs the OpenTelemetry SDK: {INSTALL}") from None


def endpoint_configured() -> bool:
    return any(os.environ.get(v) for v in ENDPOINT_VARS)


def otel_value(v: Any) -> Any:
    """A value OpenTelemetry accepts as an attribute (None dropped by the caller; other
    non-primitive values as their string)."""
    if isinstance(v, bool | int | float | str):
        return v
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    return str(v)


def clean_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: otel_value(v) for k, v in attrs.items() if v is not None}


@dataclass
class Tracing:
    """A tracer provider with its exporters (``files``: the OTLP JSON files it writes;
    ``endpoint``: whether it sends OTLP/HTTP)."""

    provider: Any
    tracer: Any
    files: list[Path]
    endpoint: bool
    offset_ns: int  # epoch ns - perf_counter_ns, taken once

    def span(self, name: str, start_ns: int, end_ns: int, attrs: Mapping[str, Any], *,
             parent: Any = None, epoch: bool = False) -> Any:
        """One finished span from measured times (``perf_counter_ns``, or epoch ns with
        ``epoch``), under ``parent`` (a span) or a new trace; returns it."""
        from opentelemetry import trace

        off = 0 if epoch else self.offset_ns
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        sp = self.tracer.start_span(name, context=ctx, start_time=start_ns + off,
                                    attributes=clean_attrs(attrs))
        sp.end(end_time=end_ns + off)
        return sp

    @staticmethod
    def trace_id(span: Any) -> str:
        return f"{span.get_span_context().trace_id:032x}"

    def close(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()


T = TypeVar("T", bound=Tracing)


def start_tracing(otlp_dir: Path | None, *, service: str, run_name: str, scope: str,
                  endpoint: bool | None = None, cls: type[T] = Tracing) -> T | None:  # type: ignore[assignment]
    """Tracing to ``otlp_dir`` (one ``traces.jsonl``, refused when it exists) and/or the
    OTLP/HTTP endpoint of the environment (``endpoint`` None: when one is set); None when
    neither is asked for (tracing off)."""
    use_endpoint = endpoint_configured() if endpoint is None else endpoint
    if otlp_dir is None and not use_endpoint:
        return None
    _need_otel()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or service,
                                "rwb.run": run_name})
    provider = TracerProvider(resource=resource)
    files: list[Path] = []
    if otlp_dir is not None:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter

        path = otlp_dir / "traces.jsonl"
        if path.exists():
            raise ConfigError(f"--otlp-dir '{otlp_dir}': traces.jsonl exists; rwb never "
                              f"overwrites it: pick an empty folder")
        otlp_dir.mkdir(parents=True, exist_ok=True)
        provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(path)))
        files.append(path)
    if use_endpoint:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError(f"OTLP/HTTP export needs its exporter: {INSTALL}") from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    offset = time.time_ns() - time.perf_counter_ns()
    return cls(provider, provider.get_tracer(scope), files, use_endpoint, offset)


def check_otlp_dir(otlp_dir: str | Path | None) -> None:
    """Before any work: ConfigError (one line) when ``--otlp-dir`` cannot take traces.jsonl: a
    file, a folder under a file or a missing drive, a folder (or its nearest existing parent)
    that is not writable, or a traces.jsonl already there."""
    if otlp_dir is None:
        return
    path = Path(otlp_dir)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--otlp-dir '{path}' exists and is not a folder; name a folder")
    if (path / "traces.jsonl").exists():
        raise ConfigError(f"--otlp-dir '{path}': traces.jsonl exists; rwb never overwrites "
                          f"it: pick an empty folder")
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"--otlp-dir '{path}': '{probe}' is not a folder; name a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"--otlp-dir '{path}': '{probe}' is not writable; name a folder "
                          f"you can write")


def check_trace_args(trace: bool, otlp_dir: str | Path | None) -> None:
    """``--trace`` needs somewhere to send spans: ``--otlp-dir`` or the OTLP endpoint
    variable; ``--otlp-dir`` must be usable (:func:`check_otlp_dir`), checked before the work."""
    if trace and otlp_dir is None and not endpoint_configured():
        raise ConfigError("--trace needs --otlp-dir DIR (OTLP JSON files) or "
                          "OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP) set")
    check_otlp_dir(otlp_dir)


__all__ = ["ENDPOINT_VARS", "INSTALL", "OP", "Tracing", "check_otlp_dir", "check_trace_args",
           "clean_attrs",
           "endpoint_configured", "start_tracing"]
