"""``rwb verify FILE [--engine NAME]``: build what the exported engine config says, on that
engine, re-measure it on the recorded queries with the recorded bound, and say whether it holds.

What is measured is the file's ``config`` (the engine's own names), mapped back to the rwb
backend that runs that engine (:mod:`retrieval.exporting.inverse`); the ``source:`` block only says
which data, ``k``, query split, seed and timing settings the evidence used. It holds when:

- the dataset is the one the config was tuned on (its fingerprint equals
  ``evidence.dataset.fingerprint``: changed or unrecorded data fails);
- the re-measured lower confidence bound on mean recall@k over the tuning queries (same split,
  same bound) is >= the recorded target;
- the config is the one the evidence was measured with: each field of ``config`` equals the
  export of the ``source`` params (an edited ``M`` or ``ef`` fails naming the field);
- the evidence is reproducible: the recorded recall, its bound and the held-out recall agree
  with a re-measurement on the backend that produced them (``evidence.measured_on``; the same
  measurement when that backend runs the file's engine) within the sampling tolerance.

An engine rwb cannot run (weaviate) is "not measurable here" (:class:`NotMeasurable`, never
HOLDS). With ``engine=NAME`` the same settings are translated to NAME's config and measured
there: it holds when the target transfers (bound and data checks only). Latency is reported for
information (it depends on the machine).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from retrieval.data import VectorDataset
from retrieval.errors import ConfigError, DataError, RwbError, param_error, unknown_name_error
from retrieval.evaluation import Evaluator
from retrieval.exporting.ann import EVIDENCE_FIELDS, FILE_KIND, TOP_FIELDS, full_search
from retrieval.exporting.engines import translate
from retrieval.exporting.files import check_layout, field_of
from retrieval.exporting.inverse import PORTABLE_READERS, Rebuilt, inverse_for
from retrieval.exporting.portable import Portable, portable
from retrieval.exporting.registry import register_verifier
from retrieval.indexes.registry import all_backends, get_backend
from retrieval.params import validate_params
from retrieval.tune.config import ConfidenceSpec
from retrieval.tune.decide import split_queries
from retrieval.tune.measure import EPS, Measurer
from retrieval.tune.results import HeldOut, PointResult

#: exit code of ``rwb verify`` for an engine rwb cannot run
NOT_MEASURABLE_EXIT = 3


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
    engine: str = ""
    #: named checks besides the bound: config vs evidence, evidence reproduced
    named_checks: list[dict[str, Any]] = field(default_factory=list)
    #: the engine the file's settings were measured on by this verify (``--engine``), or ""
    transfer_to: str = ""
    build: dict[str, Any] = field(default_factory=dict)
    search: dict[str, Any] = field(default_factory=dict)
    #: a scale rule evaluated at another collection size: N, the knob there, its native config
    scaled: dict[str, Any] = field(default_factory=dict)
    #: the rebuild tolerance the bound was judged within (an unseeded or multi-threaded build
    #: whose re-measured bound fell below the target by less than it; see :func:`_tolerance`)
    within_tolerance: float | None = None

    @property
    def bound_holds(self) -> bool:
        """The re-measured lower bound meets the target (whatever the data)."""
        return bool(self.measured.recall_lb >= self.target - EPS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "holds": self.holds,
            "measurable": True,
            "engine": self.engine,
            "transfer_to": self.transfer_to or None,
            "target_recall": self.target,
            "backend": self.backend,
            "build": self.build,
            "search": self.search,
            "dataset": self.dataset,
            "fingerprint_matches": self.fingerprint_matches,
            "fingerprint": self.fingerprint,
            "measured": self.measured.to_dict(),
            "heldout": self.heldout.to_dict() if self.heldout else None,
            "recorded": self.recorded,
            "file_checks": self.named_checks,
            **({"scaled": self.scaled} if self.scaled else {}),
            **({"within_tolerance": self.within_tolerance}
               if self.within_tolerance is not None else {}),
        }


@dataclass(frozen=True)
class NotMeasurable:
    """An export for an engine rwb cannot run: nothing was measured, so it never holds."""

    path: str
    engine: str
    reason: str
    holds: bool = False
    exit_code: int = NOT_MEASURABLE_EXIT

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "holds": False, "measurable": False, "engine": self.engine,
                "reason": self.reason}


def _need(doc: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in doc or doc[key] is None:
        raise ConfigError(f"{where}: field '{key}' is missing; is this a file from rwb export?")
    return doc[key]


def known_engine(doc: Mapping[str, Any], where: str) -> str:
    """The file's ``engine``: one rwb exports to (any other name is an edit: ConfigError)."""
    from retrieval.exporting.engines import ANN_ENGINES

    engine = field_of(doc, "engine", where, "string")
    if engine not in ANN_ENGINES:
        raise unknown_name_error("engine", engine, ANN_ENGINES, where=f"{where}: field 'engine'")
    return str(engine)


def _flat(d: Any, prefix: str) -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}.{k}"))
        return out
    return {prefix: d}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def config_diffs(given: Any, expected: Any) -> list[str]:
    """``field: file says X, the evidence was measured with Y`` for each field of the ``given``
    config that differs from the ``expected`` one (both engine-native mappings)."""
    g, e = _flat(given or {}, "config"), _flat(expected or {}, "config")
    return [f"{key}: file says {g.get(key)!r}, the evidence was measured with {e.get(key)!r}"
            for key in sorted(set(e) | set(g)) if not _same(g.get(key), e.get(key))]


class Remeasured(Protocol):
    """A re-measured mean recall over ``n_queries`` queries (a held-out one)."""

    @property
    def recall(self) -> float: ...
    @property
    def n_queries(self) -> int: ...


class RemeasuredBound(Remeasured, Protocol):
    """... with its lower confidence bound."""

    @property
    def recall_lb(self) -> float: ...


def config_check(doc: Mapping[str, Any], src: Mapping[str, Any], engine: str, metric: str,
                 dim: int, k: int) -> dict[str, Any]:
    """Each field of ``config`` against the export of the measured ``source`` params."""
    backend = str(src.get("backend"))
    try:
        p = portable(backend, src.get("build_params") or {}, full_search(backend,
                                                                        src.get("search") or {}))
        expected = translate(engine, p, metric, dim, k)
    except ConfigError as exc:
        return {"check": "config is the one measured", "passed": False,
                "measured": f"source params cannot be exported to {engine}: {exc}",
                "expected": "an exportable source"}
    diffs = config_diffs(doc.get("config"), expected)
    return {"check": "config is the one measured", "passed": not diffs,
            "measured": "; ".join(diffs) or "every field matches the source params",
            "expected": f"the {engine} export of source {backend} params",
            "fields": [d.split(":", 1)[0] for d in diffs]}


def _tolerance(r: float, n: int, k: int) -> float:
    """How far a rebuild of an unseeded or multi-threaded graph (Qdrant, Redis; several build
    threads) may move a mean recall@k over n queries: 4 standard errors of that mean, at least
    0.05. Per-query recall lies in [0, 1], so its variance is at most r(1 - r): the standard
    error is taken over queries, not over the n*k neighbours (which are not independent; seen:
    a Qdrant rebuild of a small collection moved the lower bound by 0.08)."""
    return max(0.05, 4.0 * math.sqrt(max(r * (1 - r), 1e-4) / max(n, 1)))


def judge_bound(recall: float, lower: float, n: int, k: int, target: float,
                recorded_lower: float | None, reproducible: bool) -> tuple[bool, float | None]:
    """(whether the re-measured ``lower`` bound meets ``target``, the tolerance it was judged
    within or None). A build that cannot be rebuilt exactly (unseeded engine, several build
    threads) whose recorded bound met the target holds when its re-measured bound falls short
    by no more than the rebuild tolerance (:func:`_tolerance`, docs/engines.md): a config chosen
    at the bound would otherwise fail about half the time on an untouched file."""
    if lower >= target - EPS:
        return True, None
    if reproducible or recorded_lower is None or recorded_lower < target - EPS:
        return False, None
    tol = _tolerance(recall, n, k)
    return (True, round(tol, 4)) if target - lower <= tol else (False, None)


def k_check(doc: Mapping[str, Any], k: int, where: str) -> list[dict[str, Any]]:
    """``evidence.k`` (an integer >= 1, else ConfigError) is the ``k`` verify measures with."""
    recorded = field_of(doc, "evidence.k", where, "integer", default=None, ge=1)
    if recorded is None or recorded == k:
        return []
    return [{"check": "evidence.k", "passed": False, "measured": k,
             "expected": f"{recorded} (the evidence's k; the source measures recall@{k})",
             "fields": ["evidence.k"]}]


def heldout_meets_check(ev: Mapping[str, Any], held: Remeasured | None, target: float,
                        where: str) -> list[dict[str, Any]]:
    """``evidence.heldout_meets_target`` says what the held-out recall says: the recorded one
    (itself checked against a re-measurement), else the re-measured one."""
    meets = ev.get("heldout_meets_target")
    if meets is None:
        return []
    if not isinstance(meets, bool):
        raise param_error("evidence.heldout_meets_target", "true or false", meets, where=where)
    recall = ev.get("heldout_recall")
    if not isinstance(recall, int | float) or isinstance(recall, bool):
        if held is None:
            return []
        recall = held.recall
    now = bool(float(recall) >= target - EPS)
    return [{"check": "evidence.heldout_meets_target", "passed": meets == now,
             "measured": now,
             "expected": f"{meets} (held-out recall {float(recall):.6g} vs target {target})",
             "fields": [] if meets == now else ["evidence.heldout_meets_target"]}]


def evidence_checks(ev: Mapping[str, Any], res: RemeasuredBound, held: Remeasured | None,
                    backend: str, k: int, threads: int) -> list[dict[str, Any]]:
    """The recorded figures against a re-measurement on the backend that produced them;
    ``threads``: 1 when the index is the one the evidence was measured on (a seeded one-thread
    build, or that build loaded from the cache), else the build threads of a fresh rebuild."""
    out = []
    sealed = ev.get("recorded_digest")
    if sealed is not None:  # exports since issue 34: figures verify cannot re-measure exactly
        from retrieval.exporting.files import RECORDED_FIGURES, recorded_digest

        now_digest = recorded_digest(ev)
        if now_digest != sealed:
            out.append({"check": "evidence.recorded_digest", "passed": False,
                        "measured": now_digest,
                        "expected": f"{sealed} (the figures the export recorded: "
                                    f"{', '.join(RECORDED_FIGURES)}; one was edited since)",
                        "fields": [f"evidence.{f}" for f in RECORDED_FIGURES]})
    measured_on = ev.get("measured_on")
    if measured_on is not None and measured_on != backend:
        out.append({"check": "evidence.measured_on", "passed": False, "measured": backend,
                    "expected": measured_on, "fields": ["evidence.measured_on"]})
    recorded_n = ev.get("tuning_queries")
    if recorded_n is not None and recorded_n != res.n_queries:
        out.append({"check": "evidence.tuning_queries", "passed": False,
                    "measured": res.n_queries,
                    "expected": f"{recorded_n} (the queries of the recorded tuning split)",
                    "fields": ["evidence.tuning_queries"]})
    pairs = [("evidence.recall", ev.get("recall"), res.recall, res.n_queries),
             ("evidence.recall_lower_bound", ev.get("recall_lower_bound"), res.recall_lb,
              res.n_queries)]
    if held is not None:
        pairs.append(("evidence.heldout_recall", ev.get("heldout_recall"), held.recall,
                      held.n_queries))
    exact = bool(getattr(get_backend(backend), "deterministic", False)) and threads == 1
    for name, recorded, now, n in pairs:
        if recorded is None:
            continue
        # a seeded one-thread build reproduces its figures (to the 6 digits the file keeps)
        tol = 2e-6 if exact else _tolerance(float(now), n, k)
        why = "" if exact else (", an unseeded build" if threads == 1 else
                                f", a {threads}-thread build")
        ok = abs(float(recorded) - float(now)) <= tol
        out.append({"check": name, "passed": ok, "measured": round(float(now), 6),
                    "expected": f"{recorded} (within {tol:.2g}, re-measured on {backend}{why})",
                    "fields": [] if ok else [name]})
    return out


def _verify_scaled(doc: Mapping[str, Any], where: str, ds: VectorDataset, engine: str,
                   target: float, k: int, settings: Mapping[str, Any],
                   recorded_fp: str | None) -> VerifyReport:
    """A collection of another size: the export's scale rule evaluated at its N
    (:mod:`retrieval.exporting.verify_scale`)."""
    from retrieval.exporting.verify_scale import verify_at_n

    out = verify_at_n(doc, where, ds, engine, target, k, settings)
    ev = doc.get("evidence") or {}
    return VerifyReport(
        path=where, holds=bool(out["check"]["passed"]), target=target, backend=out["backend"],
        dataset=ds.name, fingerprint_matches=False, measured=out["measured"],
        heldout=out["heldout"],
        recorded={"recall": ev.get("recall"), "recall_lower_bound": ev.get("recall_lower_bound"),
                  "fingerprint": recorded_fp, "n_base": (ev.get("dataset") or {}).get("n_base")},
        fingerprint=ds.fingerprint, engine=engine, named_checks=[out["check"]],
        build=out["build"], search=out["search"],
        scaled={"n": out["n"], "knob": out["check"]["expected"], "config_at_n": out["config_at_n"],
                "rule": ev.get("scale_rule")},
    )
#: how far a re-measured bytes/vector may sit from the recorded one: this share of it, or
#: MEMORY_TOLERANCE_B bytes (RSS and allocator noise), whichever is larger
MEMORY_TOLERANCE = 0.15
MEMORY_TOLERANCE_B = 32.0


def memory_check(ev: Mapping[str, Any], built: Any, vectors: Any) -> list[dict[str, Any]]:
    """``evidence.bytes_per_vector`` (when the export has one) against the index's memory
    measured again the same way (:func:`retrieval.memory.measure`), and the doctor's verdict
    on it."""
    recorded = ev.get("bytes_per_vector")
    if recorded is None:
        return []
    from retrieval import memory

    rep = memory.measure(built.index, built.info.n, vectors)
    now = rep.bytes_per_vector
    tol = max(MEMORY_TOLERANCE * float(recorded), MEMORY_TOLERANCE_B)
    ok = now is not None and abs(now - float(recorded)) <= tol
    out = [{"check": "evidence.bytes_per_vector", "passed": ok,
            "measured": None if now is None else round(now, 1),
            "expected": f"{recorded} (within {tol:.3g} bytes; {rep.resident_source})",
            "fields": [] if ok else ["evidence.bytes_per_vector"]}]
    if rep.flags:
        out.append({"check": "memory doctor", "passed": False, "measured": list(rep.flags),
                    "expected": "an encoding that holds what it claims", "fields": []})
    return out


@register_verifier(FILE_KIND, default=True)
def verify_ann_file(doc: Mapping[str, Any], path: Path | str) -> VerifyReport | NotMeasurable:
    """The default verifier: an ANN export (any file no other verifier claims)."""
    if doc.get("kind") != FILE_KIND:
        raise ConfigError(
            f"{path}: not an rwb export (field 'kind' must be '{FILE_KIND}'; received "
            f"{doc.get('kind')!r})"
        )
    return verify_ann(doc, path)


def _rebuilt(engine: str, cfg: Any, metric: str, dim: int, k: int, where: str) -> Rebuilt | str:
    inv = inverse_for(engine)
    if inv is None:
        return (f"rwb cannot run {engine}: the config is a translation, never measured on "
                f"{engine}; measure it there, or verify with --engine NAME on an engine rwb runs")
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"{where}: field 'config' must be a mapping; received {cfg!r}")
    return inv(cfg, metric, dim, k, where)


def _transfer(r: Rebuilt | Portable, engine: str, metric: str, dim: int, k: int,
              where: str) -> Rebuilt | str:
    """The same settings as ``engine``'s config, mapped back to the backend that runs it."""
    if isinstance(r, Rebuilt):
        cls = get_backend(r.backend)
        build = validate_params(cls.BuildParams, r.build, where=where).model_dump(mode="json")
        search = validate_params(cls.SearchParams, r.search, where=where).model_dump(mode="json")
        r = portable(r.backend, build, search)
    native = translate(engine, r, metric, dim, k)
    return _rebuilt(engine, native, metric, dim, k, f"{where} (as {engine})")


#: how to give the data when the recorded reference is not reachable
GIVE_DATA = ("pass the data: rwb verify FILE --dataset NAME|MANIFEST|HDF5, or "
             "retrieval.verify(FILE, dataset=...) (a VectorDataset for in-memory arrays)")


def given_dataset(dataset: Any, where: str) -> VectorDataset:
    """``dataset`` (a VectorDataset, or a dataset name / manifest / HDF5 path / mapping resolved
    from the current directory) as a VectorDataset."""
    from retrieval.loaders.catalog import resolve_dataset

    if isinstance(dataset, VectorDataset):
        return dataset
    if isinstance(dataset, Path):
        dataset = str(dataset)
    return resolve_dataset(dataset, where=f"{where}: --dataset")


def _dataset(src: Mapping[str, Any], where: str, dataset: Any,
             recorded_fp: str | None) -> VectorDataset:
    """The data to re-measure on: ``dataset`` when given (its fingerprint must be the recorded
    one: DataError otherwise), else the recorded ``source.dataset``."""
    from retrieval.loaders.catalog import resolve_dataset

    if dataset is not None:
        ds = given_dataset(dataset, where)
        if ds.fingerprint != recorded_fp:
            raise DataError(
                f"{where}: --dataset '{ds.name}' is not the data the config was tuned on "
                f"(fingerprint {ds.fingerprint}; evidence.dataset.fingerprint {recorded_fp})")
        return ds
    ref = _need(src, "dataset", f"{where}: source")
    if src.get("dataset_in_memory"):
        raise ConfigError(f"{where}: the config was tuned on data given in memory ('{ref}', "
                          f"fingerprint {recorded_fp}), which no file names; {GIVE_DATA}")
    try:
        return resolve_dataset(ref, where=f"{where}: field 'source.dataset'")
    except RwbError as exc:
        raise type(exc)(f"{exc}; or {GIVE_DATA}") from None


def verify_ann(doc: Mapping[str, Any], path: Path | str, engine: str | None = None,
               dataset: Any = None) -> VerifyReport | NotMeasurable:
    """Measure the config of an exported ANN file on its engine, or on ``engine`` (see module
    doc); ``dataset``: the data to measure on instead of the recorded ``source.dataset`` (a
    VectorDataset, or a dataset name / manifest / HDF5 path), refused unless its fingerprint is
    the recorded one."""
    where = str(path)
    check_layout(doc, where, FILE_KIND, TOP_FIELDS, EVIDENCE_FIELDS)
    src = field_of(doc, "source", where, "mapping")
    ev = field_of(doc, "evidence", where, "mapping")
    file_engine = known_engine(doc, where)
    target = float(field_of(doc, "evidence.target_recall", where, "number", gt=0.0, le=1.0))
    src_backend = str(_need(src, "backend", f"{where}: source"))
    if src_backend not in all_backends():
        raise unknown_name_error("backend", src_backend, all_backends(),
                                 where=f"{where}: field 'source.backend'")
    k = field_of(doc, "source.k", where, "integer", ge=1)
    checks: list[dict[str, Any]] = k_check(doc, k, where)
    seed = field_of(doc, "source.seed", where, "integer", default=0)
    heldout_fraction = float(field_of(doc, "source.query_split.heldout_fraction", where,
                                      "number", default=0.5, gt=0.0, le=1.0))
    split_seed = field_of(doc, "source.query_split.seed", where, "integer", default=seed)
    threads = field_of(doc, "source.threads", where, "integer", default=1, ge=1)
    # the sweep's build threads (files before they were recorded: built with the search threads)
    build_threads = field_of(doc, "source.build_threads", where, "integer", default=threads,
                             ge=1)
    warmup = field_of(doc, "source.warmup", where, "integer", default=32, ge=0)
    repeats = field_of(doc, "source.batch_repeats", where, "integer", default=3, ge=1)
    conf_doc = field_of(doc, "evidence.confidence", where, "mapping", default={})
    conf = validate_params(ConfidenceSpec, conf_doc, where=where, prefix="evidence.confidence.")
    recorded_fp = field_of(doc, "evidence.dataset", where, "mapping", default={}).get(
        "fingerprint")
    if inverse_for(file_engine) is None and engine in (None, file_engine):
        return NotMeasurable(where, file_engine, str(_rebuilt(file_engine, {}, "", 0, k, where)))
    if dataset is not None and isinstance(ev.get("scale_rule"), Mapping):
        other = given_dataset(dataset, where)
        if other.fingerprint != recorded_fp:  # another collection: the rule's knob at its N
            return _verify_scaled(doc, where, other, engine or file_engine, target, k, {
                "heldout_fraction": heldout_fraction, "split_seed": split_seed,
                "threads": threads, "seed": seed, "warmup": warmup, "repeats": repeats,
                "build_threads": build_threads, "modes": src.get("modes") or ["single", "batch"],
            }, recorded_fp)
    ds = _dataset(src, where, dataset, recorded_fp)
    metric, dim = str(ds.metric), int(ds.dim)
    rebuilt: Rebuilt | Portable | str = _rebuilt(file_engine, doc.get("config"), metric, dim,
                                                 k, where)
    if isinstance(rebuilt, str):  # --engine given for a file rwb cannot measure itself
        reader = PORTABLE_READERS.get(file_engine)
        if reader is None or not isinstance(doc.get("config"), Mapping):
            return NotMeasurable(where, file_engine, rebuilt)
        rebuilt = reader(doc["config"], metric, where)
    if engine is not None and engine != file_engine:
        moved = _transfer(rebuilt, engine, metric, dim, k, where)
        if isinstance(moved, str):
            return NotMeasurable(where, engine, moved)
        measure_on = moved
    else:
        assert isinstance(rebuilt, Rebuilt)
        measure_on = rebuilt
        checks.append(cfg_check := config_check(doc, src, file_engine, metric, dim, k))
    split = split_queries(ds.n_queries, heldout_fraction, split_seed)
    modes = src.get("modes") or ["single", "batch"]
    with Evaluator(ds, k, threads=threads, seed=seed, warmup=warmup,
                   batch_repeats=repeats, build_threads=build_threads) as e:
        m = Measurer(e, split, modes, target, conf, seed)
        built = e.build(measure_on.backend, measure_on.build)
        res = m.full(built, measure_on.search)
        held = m.heldout(built, measure_on.search)
        if engine is None or engine == file_engine:
            src_build = _need(src, "build", f"{where}: source")
            src_search = _need(src, "search", f"{where}: source")
            same = src_backend == measure_on.backend and cfg_check["passed"]
            ev_built = built
            if same:
                ev_res, ev_held = res, held
            else:  # the evidence came from another backend (or other params): re-measure it
                ev_built = e.build(src_backend, src_build)
                ev_res, ev_held = m.full(ev_built, src_search), m.heldout(ev_built, src_search)
            # the same index as the sweep's: a one-thread seeded rebuild, or the sweep's own
            # build loaded from the index cache; else a multi-threaded rebuild (not reproducible)
            same_index = build_threads == 1 or ev_built.outcome.cache == "hit"
            checks += evidence_checks(ev, ev_res, ev_held, src_backend, k,
                                      1 if same_index else build_threads)
            checks += heldout_meets_check(ev, ev_held, target, where)
            checks += memory_check(ev, ev_built, ds.base)
    same_data = recorded_fp is not None and recorded_fp == ds.fingerprint
    reproducible = bool(getattr(get_backend(measure_on.backend), "deterministic", False)) and (
        build_threads == 1 or built.outcome.cache == "hit")
    recorded_lb = ev.get("recall_lower_bound")
    bound, slack = judge_bound(float(res.recall), float(res.recall_lb), res.n_queries, k,
                               target, recorded_lb if isinstance(recorded_lb, int | float)
                               else None, reproducible)
    return VerifyReport(
        within_tolerance=slack,
        path=where,
        holds=bound and same_data and all(c["passed"] for c in checks),
        target=target,
        backend=measure_on.backend,
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
            "measured_on": ev.get("measured_on") or src_backend,
            **({"under_churn": ev["under_churn"]} if ev.get("under_churn") else {}),
        },
        fingerprint=ds.fingerprint,
        engine=engine or file_engine,
        named_checks=checks,
        transfer_to=engine if engine and engine != file_engine else "",
        build=dict(measure_on.build),
        search=dict(measure_on.search),
    )
