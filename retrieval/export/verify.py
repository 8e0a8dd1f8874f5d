"""``rwb verify FILE``: rebuild the index an exported config came from, re-measure it on the same
queries, and say whether it still meets its target.

It holds when the dataset is the one the config was tuned on (its fingerprint equals the
recorded ``evidence.dataset.fingerprint``: changed or unrecorded data fails, since the evidence
is about other vectors) and the re-measured lower confidence bound on mean recall@k over the
tuning queries (same split, same bound) is >= the recorded target. The held-out recall is
re-measured and reported too; latency is reported for information only (it depends on the
machine).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError
from retrieval.evaluate import Evaluator
from retrieval.export.ann import FILE_KIND
from retrieval.export.files import field_of
from retrieval.export.registry import register_verifier
from retrieval.params import validate_params
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import split_queries
from retrieval.tune.measure import EPS, Measurer
from retrieval.tune.results import HeldOut, PointResult


@dataclass(frozen=True)
class VerifyReport:
    path: str
    holds: bool
    target: float
    backend: str
    dataset: str
    fingerprint_matches: bool
    measured: PointResult
    heldout: HeldOut | None
    recorded: dict[str, Any] = field(default_factory=dict)
    fingerprint: str | None = None  # of the dataset verified against (now)

    @property
    def bound_holds(self) -> bool:
        """The re-measured lower bound meets the target (whatever the data)."""
        return bool(self.measured.recall_lb >= self.target - EPS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "holds": self.holds,
            "target_recall": self.target,
            "backend": self.backend,
            "dataset": self.dataset,
            "fingerprint_matches": self.fingerprint_matches,
            "fingerprint": self.fingerprint,
            "measured": self.measured.to_dict(),
            "heldout": self.heldout.to_dict() if self.heldout else None,
            "recorded": self.recorded,
        }


def _need(doc: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in doc or doc[key] is None:
        raise ConfigError(f"{where}: field '{key}' is missing; is this a file from rwb export?")
    return doc[key]


@register_verifier(FILE_KIND, default=True)
def verify_ann_file(doc: Mapping[str, Any], path: Path | str) -> VerifyReport:
    """The default verifier: an ANN export (any file no other verifier claims)."""
    if doc.get("kind") != FILE_KIND:
        raise ConfigError(
            f"{path}: not an rwb export (field 'kind' must be '{FILE_KIND}'; received "
            f"{doc.get('kind')!r})"
        )
    return verify_ann(doc, path)


def verify_ann(doc: Mapping[str, Any], path: Path | str) -> VerifyReport:
    """Re-measure the config of an exported ANN file (see module doc)."""
    from retrieval.loaders.catalog import resolve_dataset

    where = str(path)
    src = field_of(doc, "source", where, "mapping")
    ev = field_of(doc, "evidence", where, "mapping")
    target = float(field_of(doc, "evidence.target_recall", where, "number", gt=0.0, le=1.0))
    backend = str(_need(src, "backend", f"{where}: source"))
    k = field_of(doc, "source.k", where, "integer", ge=1)
    seed = field_of(doc, "source.seed", where, "integer", default=0)
    heldout_fraction = float(field_of(doc, "source.query_split.heldout_fraction", where,
                                      "number", default=0.5, gt=0.0, le=1.0))
    split_seed = field_of(doc, "source.query_split.seed", where, "integer", default=seed)
    threads = field_of(doc, "source.threads", where, "integer", default=1, ge=1)
    warmup = field_of(doc, "source.warmup", where, "integer", default=32, ge=0)
    repeats = field_of(doc, "source.batch_repeats", where, "integer", default=3, ge=1)
    conf_doc = field_of(doc, "evidence.confidence", where, "mapping", default={})
    conf = validate_params(ConfidenceSpec, conf_doc, where=where, prefix="evidence.confidence.")
    recorded_fp = field_of(doc, "evidence.dataset", where, "mapping", default={}).get(
        "fingerprint")
    ds = resolve_dataset(_need(src, "dataset", f"{where}: source"),
                         where=f"{where}: field 'source.dataset'")
    split = split_queries(ds.n_queries, heldout_fraction, split_seed)
    with Evaluator(
        ds,
        k,
        threads=threads,
        seed=seed,
        warmup=warmup,
        batch_repeats=repeats,
    ) as e:
        built = e.build(backend, _need(src, "build", f"{where}: source"))
        m = Measurer(e, split, src.get("modes") or ["single", "batch"], target, conf, seed)
        search = _need(src, "search", f"{where}: source")
        res = m.full(built, search)
        held = m.heldout(built, search)
    same_data = recorded_fp is not None and recorded_fp == ds.fingerprint
    return VerifyReport(
        path=where,
        holds=bool(res.recall_lb >= target - EPS) and same_data,
        target=target,
        backend=backend,
        dataset=ds.name,
        fingerprint_matches=same_data,
        measured=res,
        heldout=held,
        recorded={
            "recall": ev.get("recall"),
            "recall_lower_bound": ev.get("recall_lower_bound"),
            "heldout_recall": ev.get("heldout_recall"),
            "p95_ms": (ev.get("latency_ms") or {}).get("p95"),
            "fingerprint": recorded_fp,
        },
        fingerprint=ds.fingerprint,
    )
