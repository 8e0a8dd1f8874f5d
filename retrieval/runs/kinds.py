"""Run kinds and the typed summaries of runs (``kind`` and summary.json): the run-kind registry.

A run kind is declared by its summary model, a :class:`RunSummary` subclass with ``KIND`` (its
name) and ``SIGNATURE`` (the summary keys that identify it when neither file names it), decorated
with :func:`run_summary` next to the code that writes it. Discovery imports every
``retrieval/<package>/summary.py`` (found by name, so this module imports none of them) and then
every ``rwb.run_kinds`` entry point; nothing lists the kinds by hand. The report's renderers
(:mod:`retrieval.reporting.registry`), the CLI's printers (``retrieval.cli.printers``) and the
exporters (:mod:`retrieval.exporting.registry`) are keyed by (kind, workload shape) in their own
layers' registries.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, field_serializer
from pydantic_core import PydanticCustomError, core_schema

log = logging.getLogger(__name__)

#: the entry-point group of third-party run kinds (a module defining a decorated summary model)
ENTRY_POINT_GROUP = "rwb.run_kinds"


class RunKind(str):
    """What a run directory holds (``kind`` in manifest.json / summary.json; the JSON keeps these
    strings): the name of a registered summary model (:func:`run_summary`). In a pydantic model
    a field of this type takes a registered kind only."""

    __slots__ = ()

    @classmethod
    def parse(cls, value: Any) -> RunKind | None:
        """The registered kind named by ``value``, or None when it names none."""
        if not isinstance(value, str):
            return None
        _discover()
        model = _MODELS.get(str(value))
        return model.KIND if model is not None else None

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        def check(value: str) -> RunKind:
            kind = cls.parse(value)
            if kind is None:
                raise PydanticCustomError(
                    "enum", "Input should be {expected}",
                    {"expected": ", ".join(f"'{k}'" for k in run_kinds())})
            return kind

        return core_schema.no_info_after_validator_function(
            check, core_schema.str_schema(),
            serialization=core_schema.plain_serializer_function_ser_schema(str))


class SummaryPart(BaseModel):
    """A typed part of a run summary. Keys the model does not declare are kept (``extra``), so a
    summary written by an older or newer rwb reads back and writes out unchanged; every declared
    field has a default so that partial summaries (a run stopped early, a hand-made one) still
    load. Dumps leave out what was never set: the JSON has exactly the keys the writer gave."""

    model_config = ConfigDict(
        extra="allow", frozen=True, populate_by_name=True, protected_namespaces=()
    )

    def to_json_dict(self) -> dict[str, Any]:
        """The plain data written to summary.json (keys as written; unset fields left out)."""
        return self.model_dump(by_alias=True, exclude_unset=True)


#: the ``workload`` a run summary declares: its shape (absent: plain, unfiltered queries)
WORKLOAD_PLAIN = "plain"
WORKLOAD_FILTERED = "filtered"
WORKLOAD_SCALE = "scale"  # a scale study: the knob as a rule of the collection size
#: this turn's workload shapes (declared here so that writers and readers share the names)
WORKLOAD_TOPOLOGY = "topology"
WORKLOAD_TENANTS = "tenants"
WORKLOAD_COLD = "cold"
WORKLOAD_LIVE = "live"
WORKLOADS = (WORKLOAD_PLAIN, WORKLOAD_FILTERED, WORKLOAD_SCALE, WORKLOAD_TOPOLOGY,
             WORKLOAD_TENANTS, WORKLOAD_COLD, WORKLOAD_LIVE)


def workload_kind(summary: Mapping[str, Any]) -> str:
    """The workload shape a run measured, as its summary declares it (``workload``: one of
    :data:`WORKLOADS`). A summary written before the field existed declares nothing: a scale study
    of then is known by its ``scale`` block, a filtered run by its ``filters`` block (read here,
    and only here)."""
    declared = summary.get("workload")
    if isinstance(declared, str):
        return declared
    if "scale" in summary:
        return WORKLOAD_SCALE
    return WORKLOAD_FILTERED if "filters" in summary else WORKLOAD_PLAIN


class RunSummary(SummaryPart):
    """The summary.json of one run kind (each kind's model sits next to the code writing it and
    is registered with :func:`run_summary`). ``KIND``: its name; ``SIGNATURE``: the summary keys
    that identify it when neither summary.json nor manifest.json names a kind (the longest
    matching signature wins); ``RANK``: its place when messages list the kinds (lower first,
    then by name); ``RETARGETS``: ``rwb report --target-recall`` may pick its chosen points
    afresh (an eval run keeps no target of its own)."""

    KIND: ClassVar[RunKind]
    SIGNATURE: ClassVar[tuple[str, ...]] = ()
    RANK: ClassVar[int] = 100
    RETARGETS: ClassVar[bool] = False

    @field_serializer("kind", check_fields=False)
    def _plain_kind(self, kind: Any) -> Any:
        """A kind is written as its plain string (JSON and YAML alike)."""
        return str(kind) if isinstance(kind, StrEnum | RunKind) else kind


S = TypeVar("S", bound=RunSummary)

_MODELS: dict[str, type[RunSummary]] = {}
_DISCOVERED = False
_DISCOVERING = False


def run_summary(cls: type[S]) -> type[S]:
    """Class decorator: register ``cls`` as the summary model of run kind ``cls.KIND`` (declared
    in its body with its ``SIGNATURE``, and ``RANK`` / ``RETARGETS`` where they differ). Twice
    with another class is an error."""
    kind = str(cls.KIND)
    old = _MODELS.get(kind)
    if old is not None and old.__qualname__ != cls.__qualname__:
        raise ValueError(f"run kind '{kind}' registered twice ({old.__name__}, {cls.__name__})")
    _MODELS[kind] = cls
    return cls


def _discover() -> None:
    """Import every ``retrieval/<package>/summary.py`` and every ``rwb.run_kinds`` entry point
    (once)."""
    global _DISCOVERED, _DISCOVERING
    if _DISCOVERED or _DISCOVERING:
        return
    _DISCOVERING = True
    try:
        root = Path(__file__).resolve().parents[1]
        for path in sorted(root.glob("*/summary.py")):
            importlib.import_module(f"retrieval.{path.parent.name}.summary")
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()
            except Exception as exc:  # a broken plugin must not break rwb
                log.warning("run kind plugin '%s' failed to load: %s", ep.name, exc)
        _DISCOVERED = True
    finally:
        _DISCOVERING = False


def summary_models() -> dict[RunKind, type[RunSummary]]:
    """Every registered kind's summary model, in the order messages list them."""
    _discover()
    ordered = sorted(_MODELS.values(), key=lambda m: (m.RANK, m.KIND))
    return {m.KIND: m for m in ordered}


def run_kinds() -> tuple[RunKind, ...]:
    """Every registered run kind, in the order messages list them."""
    return tuple(summary_models())


def summary_model(kind: str) -> type[RunSummary]:
    """The summary model of registered ``kind`` (KeyError when none is)."""
    _discover()
    return _MODELS[str(kind)]


def detect_kind(summary: Mapping[str, Any], manifest: Mapping[str, Any]) -> RunKind | None:
    """The kind named by the manifest, else by the summary, else the kind whose ``SIGNATURE``
    keys the summary holds (the longest such signature); None when nothing fits."""
    for source in (manifest.get("kind"), summary.get("kind")):
        kind = RunKind.parse(source)
        if kind is not None:
            return kind
    models = sorted(summary_models().values(), key=lambda m: -len(m.SIGNATURE))
    for m in models:
        if m.SIGNATURE and all(k in summary for k in m.SIGNATURE):
            return m.KIND
    return None


def declares_kind(doc: Mapping[str, Any], kind: str, *, default: str | None = None) -> bool:
    """Whether ``doc`` (a manifest or summary) names run kind ``kind`` (``default`` when it
    names none)."""
    return doc.get("kind", default) == kind
