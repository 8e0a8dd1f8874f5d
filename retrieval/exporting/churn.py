"""Evidence that an exported ANN config holds under churn (issue 22): ``rwb export RUN --churn
CHURN_RUN`` adds ``evidence.under_churn`` from a ``rwb bench churn`` run of the same config (the
same backend, build params and search settings): the runbook's name, the last search step's
recall / control recall / drift / damage (fractions of recall), and whether the recall's lower
bound met the export's target at every search step. ``rwb verify`` shows it as recorded (it does
not re-run the churn)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrieval.errors import ConfigError
from retrieval.exporting.files import full_search, read_config, tidy, write_config
from retrieval.runs import RunKind, declares_kind
from retrieval.tune.measure import EPS

#: the run kind whose runs ``--churn`` takes (``rwb bench churn``; its summary model sits in
#: :mod:`retrieval.churn`, a sibling this package does not import)
CHURN_KIND = RunKind("bench-churn")
#: the evidence field of an export that holds the churn figures
FIELD = "under_churn"


def _read_churn(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ConfigError(f"--churn '{path}': not a complete rwb bench churn run (no readable "
                          f"manifest.json and summary.json)") from None
    kind = CHURN_KIND
    if not (declares_kind(manifest, kind) and declares_kind(summary, kind)):
        raise ConfigError(f"--churn '{path}': not a rwb bench churn run (kind "
                          f"{manifest.get('kind')!r}; expected '{CHURN_KIND}')")
    return manifest, summary


def check_churn_data(churn_run: Path | str, tuned_run: Path | str) -> None:
    """ConfigError (one line) when the churn run measured other data than the tuned run (their
    data fingerprints differ, or the churn run recorded none): checked before an export is
    written."""
    path = Path(churn_run).resolve()
    _, summary = _read_churn(path)
    try:
        tuned = json.loads((Path(tuned_run) / "summary.json").read_text(encoding="utf-8"))
        ds = tuned.get("dataset")
        fp = tuned.get("dataset_fingerprint") or (ds.get("fingerprint")
                                                  if isinstance(ds, dict) else None)
    except (OSError, ValueError, AttributeError):
        return  # the export itself says what is wrong with the run
    measured = summary.get("data_fingerprint")
    if isinstance(fp, str) and measured != fp:
        raise ConfigError(
            f"--churn '{path}': the churn run measured other data (data_fingerprint "
            f"{measured or 'not recorded'}; the tuned run's dataset fingerprint {fp}); run rwb "
            f"bench churn on the data the config was tuned on")


def _scalar(v: Any) -> Any:
    return v[0] if isinstance(v, list) and len(v) == 1 else v


def _same_config(c: Mapping[str, Any], backend: str, build: Mapping[str, Any],
                 search: Mapping[str, Any]) -> bool:
    if c.get("backend") != backend or dict(c.get("build") or {}) != dict(build):
        return False
    given = {k: _scalar(v) for k, v in (c.get("search") or {}).items()}
    return full_search(backend, given) == dict(search)


def churn_evidence(churn_run: Path | str, backend: str, build: Mapping[str, Any],
                   search: Mapping[str, Any], target: float,
                   data_fingerprint: str | None = None) -> dict[str, Any]:
    """``evidence.under_churn`` for the config (``backend``, full ``build`` params, full
    ``search`` params) from the churn run ``churn_run``; ConfigError naming the run's configs
    when none is this config, or when the churn run measured other data than
    ``data_fingerprint`` (the export's ``evidence.dataset.fingerprint``) or recorded none."""
    path = Path(churn_run).resolve()
    manifest, summary = _read_churn(path)
    measured = summary.get("data_fingerprint")
    if data_fingerprint is not None and measured != data_fingerprint:
        raise ConfigError(
            f"--churn '{path}': the churn run measured other data (data_fingerprint "
            f"{measured or 'not recorded'}; the export's evidence.dataset.fingerprint "
            f"{data_fingerprint}); run rwb bench churn on the data the config was tuned on")
    configs = summary.get("configs") or []
    match = next((c for c in configs if _same_config(c, backend, build, search)), None)
    if match is None:
        have = "; ".join(f"{c.get('label')}: {c.get('backend')} build {c.get('build')} search "
                         f"{c.get('search')}" for c in configs) or "none"
        raise ConfigError(f"--churn '{path}': no config of this churn run is the exported one "
                          f"({backend} build {dict(build)} search {dict(search)}); the run has: "
                          f"{have}")
    searches = [s for s in match.get("steps") or [] if s.get("op") == "search"]
    if not searches:
        raise ConfigError(f"--churn '{path}': config '{match.get('label')}' has no search step")
    lowers = [s.get("recall_lower") for s in searches]
    held = all(lb is not None and float(lb) >= target - EPS for lb in lowers)
    last = searches[-1]
    runbook = summary.get("runbook") or {}
    return tidy({
        "runbook": runbook.get("name"),
        "runbook_steps": runbook.get("steps"),
        "search_steps": len(searches),
        "target_recall": target,
        "held_at_every_search_step": held,
        "min_recall_lower_bound": min((float(x) for x in lowers if x is not None),
                                      default=None),
        "last_search_step": {key: last.get(key) for key in (
            "step", "live", "recall", "recall_lower", "control_recall", "drift", "damage")},
        "advice": (match.get("advice") or {}).get("line"),
        "config_label": match.get("label"),
        "churn_run": str(path),
        "churn_run_id": summary.get("run_id"),
        "data_fingerprint": measured,
        "runbook_fingerprint": summary.get("runbook_fingerprint"),
        "measured_at": manifest.get("created"),
        "note": "recorded by rwb bench churn; rwb verify shows it and does not re-run it",
    })


def add_churn_evidence(export_file: Path | str, churn_run: Path | str) -> dict[str, Any]:
    """Add ``evidence.under_churn`` to an ANN export written by rwb (its ``source`` names the
    config); returns the evidence added."""
    from retrieval.exporting.ann import FILE_KIND

    doc = read_config(export_file)
    if doc.get("kind") != FILE_KIND:
        raise ConfigError(f"--churn applies to ANN index exports (kind '{FILE_KIND}'); "
                          f"{export_file} is kind {doc.get('kind')!r}")
    src = doc.get("source") or {}
    ev = doc.get("evidence") or {}
    target = ev.get("target_recall")
    if not isinstance(target, int | float):
        raise ConfigError(f"{export_file}: field 'evidence.target_recall' is missing")
    recorded = (ev.get("dataset") or {}).get("fingerprint")
    if not isinstance(recorded, str):
        raise ConfigError(f"{export_file}: field 'evidence.dataset.fingerprint' is missing; "
                          f"churn evidence is attached only to data it was measured on")
    got = churn_evidence(churn_run, str(src.get("backend")), src.get("build_params") or {},
                         src.get("search") or {}, float(target), recorded)
    doc["evidence"] = {**ev, FIELD: got}
    write_config(export_file, doc)
    return got


__all__ = ["FIELD", "add_churn_evidence", "check_churn_data", "churn_evidence"]
