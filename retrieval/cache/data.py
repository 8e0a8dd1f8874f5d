"""The labelled traffic a cache spec names: GPTCache's QQP pairs or the user's pair files.

:func:`load_labels` returns :class:`retrieval.cache.tune.QQPLabels` (distinct texts as qids, the
pairs as qid arrays, a fingerprint of texts + labels) for either source, with the origin of
every pair (tuning file or explicit held-out file) and the qids of distractor texts read from a
file; :func:`data_record` is what the run records, the cost text and the export say about it.
"""

from __future__ import annotations

import logging
from typing import Any

from retrieval.cache.spec import CacheTuneSpec, PairsSource
from retrieval.cache.tune import QQPLabels, qqp_labels
from retrieval.loaders.pairs import file_fingerprint, infer_format, read_pairs, read_texts

log = logging.getLogger(__name__)


def read_source(src: PairsSource, field: str) -> list[Any]:
    """The pairs of one file (errors name the file, the spec ``field`` and the value)."""
    return read_pairs(src.path, src.format, text_a=src.text_a, text_b=src.text_b,
                      label=src.label, field=field)


def load_labels(spec: CacheTuneSpec) -> QQPLabels:
    """The labels of ``spec``: QQP (``dataset: gptcache_qqp``), else ``pairs.path`` plus the
    explicit ``heldout`` file (its pairs flagged held-out) and the ``distractors_file`` texts."""
    src = spec.pairs.source()
    if src is None:
        return qqp_labels()
    pairs = read_source(src, "pairs")
    held = read_source(spec.heldout, "heldout") if spec.heldout is not None else []
    extra: list[str] = []
    if spec.distractors_file is not None:
        d = spec.distractors_file
        extra = read_texts(d.path, d.format, column=d.column, field="distractors_file")
    origin = [False] * len(pairs) + [True] * len(held)
    return qqp_labels(pairs + held, heldout=origin if held else None, extra_texts=extra,
                      name=spec.data_name)


def labels_of(src: PairsSource, field: str, name: str) -> QQPLabels:
    """The labels of one pairs file alone (the transfer check's other traffic)."""
    return qqp_labels(read_source(src, field), name=name)


def source_record(src: PairsSource | None, field: str) -> dict[str, Any] | None:
    if src is None:
        return None
    return {"path": src.path, "format": infer_format(src.path, src.format, field=field),
            "columns": {"text_a": src.text_a, "text_b": src.text_b, "label": src.label},
            "file_fingerprint": file_fingerprint(src.path)}


def data_record(spec: CacheTuneSpec, labels: QQPLabels) -> dict[str, Any]:
    """Name, files and fingerprint of the labelled data a run measured."""
    out: dict[str, Any] = {"name": labels.name, "fingerprint": labels.fingerprint,
                           "n_pairs": len(labels.label), "n_texts": labels.n_questions}
    if spec.pairs.path is None:
        out["source"] = "GPTCache QQP (../shared/data/gptcache_qqp/similiar_qqp_full.json.gz)"
        return out
    out["pairs"] = source_record(spec.pairs.source(), "pairs.format")
    out["heldout"] = source_record(spec.heldout, "heldout.format")
    d = spec.distractors_file
    out["distractors_file"] = None if d is None else {
        "path": d.path, "column": d.column, "n_texts": len(labels.extra_qids),
        "file_fingerprint": file_fingerprint(d.path)}
    return out


__all__ = ["data_record", "labels_of", "load_labels", "read_source", "source_record"]
