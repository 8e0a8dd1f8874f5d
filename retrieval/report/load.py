"""Open any rwb run directory and say what it holds.

Kinds (from ``manifest.json``/``summary.json`` ``kind``, else recognised by their keys):

- ``eval``: ``rwb eval`` (summary rows, measurements.parquet, per_query.parquet);
- ``sweep``: ``rwb sweep`` of an index spec (rows, builds, backends with ``chosen``, pareto);
- ``bench-embed``, ``bench-fanout``: ``rwb bench embed|fanout``;
- ``rerank-sweep``, ``cache-tune``: ``rwb tune rerank|cache``;
- ``rag-study``: ``rwb sweep sweeps/rag-end-to-end.yaml`` (:mod:`retrieval.study`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.errors import DataError

log = logging.getLogger(__name__)

KINDS: tuple[str, ...] = (
    "eval", "sweep", "bench-embed", "bench-fanout", "rerank-sweep", "cache-tune", "rag-study",
)
#: summary keys that identify a kind when neither file names it
_SIGNATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rag-study", ("pareto_set", "objectives")),
    ("rerank-sweep", ("chosen_depth", "curve")),
    ("cache-tune", ("threshold", "curve", "max_false_hit")),
    ("bench-embed", ("best_setting", "max_abs_diff")),
    ("bench-fanout", ("modes", "speedup")),
    ("sweep", ("builds", "backends", "pareto")),
    ("eval", ("rows", "dataset")),
)


@dataclass(frozen=True)
class Run:
    """A run directory read once: its summary, manifest and kind."""

    path: Path
    kind: str
    summary: dict[str, Any]
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.summary.get("run_id") or self.manifest.get("run_id") or self.path.name)

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def table(self, name: str) -> Any:
        """A parquet table of the run as a DataFrame, or None when the run has none."""
        import pandas as pd

        p = self.path / name
        return pd.read_parquet(p) if p.is_file() else None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise DataError(f"run file '{path}' cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DataError(f"run file '{path}' must hold a JSON object; received "
                        f"{type(data).__name__}")
    return data


def detect_kind(summary: Mapping[str, Any], manifest: Mapping[str, Any]) -> str | None:
    for source in (manifest.get("kind"), summary.get("kind")):
        if isinstance(source, str) and source in KINDS:
            return source
    for kind, keys in _SIGNATURES:
        if all(k in summary for k in keys):
            return kind
    return None


def load_run(path: str | Path) -> Run:
    """Read a run directory; DataError if it is not one, or holds a kind rwb cannot render."""
    p = Path(path)
    if not p.is_dir():
        raise DataError(f"run directory '{p}' does not exist")
    summary = _read_json(p / "summary.json")
    manifest = _read_json(p / "manifest.json")
    if not summary:
        raise DataError(f"'{p}' is not an rwb run directory: no summary.json (a run still in "
                        f"progress, or the wrong folder)")
    kind = detect_kind(summary, manifest)
    if kind is None:
        raise DataError(
            f"run '{p}': cannot tell what kind of run it is (manifest kind "
            f"{manifest.get('kind')!r}); known kinds: {', '.join(KINDS)}"
        )
    return Run(p, kind, summary, manifest)


__all__ = ["KINDS", "Run", "detect_kind", "load_run"]
