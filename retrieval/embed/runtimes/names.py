"""Runtime names (``torch``, ``torch-bf16``, ``onnx``, ``onnx-int8``, ``openvino``): one parser,
one error line listing the allowed values."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from retrieval.errors import ConfigError

Backend = Literal["torch", "onnxruntime", "openvino"]
Precision = Literal["fp32", "bf16", "int8"]


@dataclass(frozen=True)
class Runtime:
    """One way of running the model: ``backend`` + ``precision`` (``name`` is the CLI name)."""

    name: str
    backend: Backend
    precision: Precision
    package: str  # the PyPI distribution the backend needs

    @property
    def is_torch(self) -> bool:
        return self.backend == "torch"

    @property
    def export_kind(self) -> str | None:
        """The exported file this runtime runs (None: torch runs the model folder itself)."""
        if self.backend == "torch":
            return None
        return "onnx-int8" if self.precision == "int8" else "onnx-fp32"


RUNTIMES: dict[str, Runtime] = {
    r.name: r
    for r in (
        Runtime("torch", "torch", "fp32", "torch"),
        Runtime("torch-bf16", "torch", "bf16", "torch"),
        Runtime("onnx", "onnxruntime", "fp32", "onnxruntime"),
        Runtime("onnx-int8", "onnxruntime", "int8", "onnxruntime"),
        Runtime("openvino", "openvino", "fp32", "openvino"),
    )
}
DEFAULT_RUNTIME = "torch"
ALIASES = {"torch-fp32": "torch", "onnx-fp32": "onnx", "onnxruntime": "onnx",
           "ort": "onnx", "ort-int8": "onnx-int8", "openvino-fp32": "openvino", "ov": "openvino"}


def parse_runtime(name: object, *, where: str = "runtime") -> Runtime:
    """The :class:`Runtime` called ``name`` (case-insensitive; a few aliases); ConfigError
    naming the allowed values otherwise."""
    key = str(name).strip().lower() if isinstance(name, str) else None
    if key is not None:
        key = ALIASES.get(key, key)
    if key is None or key not in RUNTIMES:
        raise ConfigError(
            f"{where}: unknown runtime {name!r}; allowed: {', '.join(RUNTIMES)}"
        )
    return RUNTIMES[key]


def parse_runtimes(names: str | Iterable[str], *, where: str = "runtimes") -> list[Runtime]:
    """``"torch,onnx,onnx-int8"`` (or a list) -> runtimes in that order, duplicates dropped."""
    items = [x for x in names.split(",")] if isinstance(names, str) else list(names)
    items = [x.strip() if isinstance(x, str) else x for x in items]
    items = [x for x in items if x != ""]
    if not items:
        raise ConfigError(f"{where}: no runtime given; allowed: {', '.join(RUNTIMES)}")
    out: list[Runtime] = []
    for x in items:
        r = parse_runtime(x, where=where)
        if r not in out:
            out.append(r)
    return out


__all__ = ["ALIASES", "DEFAULT_RUNTIME", "RUNTIMES", "Runtime", "parse_runtime",
           "parse_runtimes"]
