"""Run kinds and the typed summaries of runs (``kind`` and summary.json)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, field_serializer


class RunKind(StrEnum):
    """What a run directory holds (``kind`` in manifest.json / summary.json; the JSON keeps these
    strings). In this order in messages that list the kinds."""

    EVAL = "eval"  # rwb eval
    SWEEP = "sweep"  # rwb sweep of an index spec
    BENCH_EMBED = "bench-embed"  # rwb bench embed
    BENCH_FANOUT = "bench-fanout"  # rwb bench fanout
    BENCH_LOAD = "bench-load"  # rwb bench load
    BENCH_CHURN = "bench-churn"  # rwb bench churn
    RERANK_SWEEP = "rerank-sweep"  # rwb tune rerank
    CACHE_TUNE = "cache-tune"  # rwb tune cache
    FUSION_TUNE = "fusion-tune"  # rwb tune fusion
    RAG_STUDY = "rag-study"  # rwb sweep sweeps/rag-end-to-end.yaml
    PROFILE = "profile"  # rwb profile

    @classmethod
    def parse(cls, value: Any) -> RunKind | None:
        """The kind named by ``value``, or None when it names none."""
        try:
            return cls(value) if isinstance(value, str) else None
        except ValueError:
            return None


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


#: the ``workload`` a run summary declares (absent: plain, unfiltered queries)
WORKLOAD_PLAIN = "plain"
WORKLOAD_FILTERED = "filtered"


def workload_kind(summary: Mapping[str, Any]) -> str:
    """The workload a run measured, as its summary declares it (``workload``: ``plain`` or
    ``filtered``). A summary written before the field existed declares nothing: a filtered run
    of then is known by its ``filters`` block (read here, and only here)."""
    declared = summary.get("workload")
    if isinstance(declared, str):
        return declared
    return WORKLOAD_FILTERED if "filters" in summary else WORKLOAD_PLAIN


class RunSummary(SummaryPart):
    """The summary.json of one run kind (each kind's model sits next to the code writing it)."""

    KIND: ClassVar[RunKind]

    @field_serializer("kind", check_fields=False)
    def _plain_kind(self, kind: Any) -> Any:
        """A kind is written as its plain string (JSON and YAML alike)."""
        return str(kind) if isinstance(kind, StrEnum) else kind


S = TypeVar("S", bound=RunSummary)
