"""`rwb bench churn SPEC`: each config through the spec's runbook; recall (and its fresh-build
control) at every search step, write throughput, and one line of advice per engine.

The run directory, written as the run goes:

- ``spec.yaml``, ``manifest.json``, ``rows.parquet`` (base ``row`` -> caller ``id``: ids are
  never row numbers; the dataset's own ids when it has them; for string ids also the int64
  ``engine_id`` each row is stored under), ``runbook.parquet`` (the resolved steps: index,
  op, label, count);
- ``steps.jsonl``: one JSON record per finished step and config (a search step's record holds
  the ids it retrieved), then one ``done`` record per config (its advice): what a resume reads;
- at the end ``steps.parquet`` (one row per config x step), ``ids.parquet`` (``backend``
  (the config's label), ``step``, ``query``, ``ids``: every search step's retrieved ids, so any
  recall can be recomputed outside rwb) and ``summary.json``.

Killed mid-runbook, the same command with ``resume`` (``--resume``) continues each config from
its last finished step: the index is rebuilt by replaying the runbook's writes up to there
(resolved runbooks are deterministic: same ids, same vectors, same order), unmeasured; finished
steps are kept as recorded. A spec that differs from the recorded one is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.churn.live import ConfigRun, control_steps
from retrieval.churn.logic import AdviceInput, advice_dict
from retrieval.churn.spec import ChurnSpec, runbook_name, runbook_of
from retrieval.churn.summary import ChurnBenchSummary
from retrieval.data import VectorDataset
from retrieval.errors import ConfigError
from retrieval.runs import RunDir
from retrieval.workload.runbook import (
    ResolvedRunbook,
    dataset_row_ids,
    resolve_runbook,
    truth_at_searches,
)

log = logging.getLogger(__name__)
Progress = Callable[[int, int, str], None]
PROGRESS_FILE = "steps.jsonl"


@dataclass(frozen=True)
class ChurnResult:
    summary: dict[str, Any]
    steps: list[dict[str, Any]]
    run: RunDir


def _spec_text(spec: ChurnSpec) -> str:
    return json.dumps(spec.model_dump(mode="json"), sort_keys=True)


#: the fingerprints of what a churn run measured (data and resolved runbook), beside spec.json
FINGERPRINTS_FILE = "fingerprints.json"


def runbook_fingerprint(book: ResolvedRunbook) -> str:
    """sha256 (hex, 16 chars) of a resolved runbook: every step's op, label and ids, the
    insertion order and the caller ids (a changed runbook file changes it)."""
    h = hashlib.sha256()
    for st in book.steps:
        h.update(f"{st.index}|{st.op}|{st.label}|".encode())
        h.update(np.ascontiguousarray(st.ids, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(book.order, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(book.ids, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


def _resumable(spec: ChurnSpec, prints: dict[str, str]) -> Callable[[Path], bool]:
    def ok(path: Path) -> bool:
        mark = path / "spec.json"
        if not (path / PROGRESS_FILE).is_file() or not mark.is_file():
            return False
        if mark.read_text(encoding="utf-8") != _spec_text(spec):
            raise ConfigError(f"--resume: '{path}' holds a churn run of another spec (spec.json "
                              f"differs); resume with the same spec, or choose a new --out")
        try:
            had = json.loads((path / FINGERPRINTS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            had = {}
        for what, key in (("data", "data_fingerprint"), ("runbook", "runbook_fingerprint")):
            if not isinstance(had, dict) or had.get(key) != prints[key]:
                raise ConfigError(
                    f"--resume: '{path}' holds a churn run on other {what} ({key} "
                    f"{had.get(key) if isinstance(had, dict) else None}; now {prints[key]}): "
                    f"its steps cannot be mixed with these; choose a new --out")
        return True

    return ok


def read_progress(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Records of ``steps.jsonl`` by config label (a torn last line is dropped)."""
    out: dict[str, list[dict[str, Any]]] = {}
    f = path / PROGRESS_FILE
    if not f.is_file():
        return out
    for line in f.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            log.warning("%s: dropped a torn line (the run was killed while writing it)", f)
            continue
        out.setdefault(rec["config"], []).append(rec)
    return out


class _Log:
    """Appends one JSON line per record, flushed and synced (what a resume reads)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, rec: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, default=_plain) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _plain(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(type(x).__name__)


def _runbook_facts(book: ResolvedRunbook) -> dict[str, Any]:
    return {"steps": len(book.steps), "peak_live": book.peak,
            "ops": {op: book.count(op) for op in ("insert", "delete", "replace", "search",
                                                  "maintain")}}


def _advice(cr: ConfigRun, recs: list[dict[str, Any]], probe: Any) -> dict[str, Any]:
    spec = cr.spec
    searches = [r for r in recs if r["op"] == "search"]
    last = searches[-1]
    ctl = next((r for r in reversed(searches) if r.get("control_recall") is not None), None)
    a = AdviceInput(
        target=spec.target_recall, knob=cr.knob, value=cr.value,
        knob_max=cr.knob_range[1] if cr.knob_range else None,
        recall=last["recall"], lower=last["recall_lower"], tuned=last.get("tuned_knob"),
        searched=spec.retune, control_lower=ctl["control_lower"] if ctl else None,
        control_tuned=ctl.get("control_tuned_knob") if ctl else None,
        damage=ctl["damage"] if ctl else None, damage_points=spec.damage_points,
        maintain=tuple(probe) if probe else None, before_maintain=_before_maintain(recs))
    return advice_dict(a)


def _before_maintain(recs: list[dict[str, Any]]) -> tuple[int, float, float] | None:
    """(step, recall lower bound, share of queries short of k) of the last search step before
    the runbook's last ``maintain`` step that a search follows; None without one."""
    maintains = [i for i, r in enumerate(recs) if r["op"] == "maintain"]
    if not maintains or not any(r["op"] == "search" for r in recs[maintains[-1]:]):
        return None
    before = [r for r in recs[:maintains[-1]] if r["op"] == "search"]
    if not before:
        return None
    r = before[-1]
    return int(r["step"]), float(r["recall_lower"]), float(r.get("short_queries") or 0.0)


def _one_config(cr: ConfigRun, book: ResolvedRunbook, done: list[dict[str, Any]], out: _Log,
                controls: set[int], tick: Callable[[str], None]) -> dict[str, Any]:
    """Run (or finish) one config; its ``done`` record."""
    finished = next((r for r in done if r["op"] == "done"), None)
    if finished is not None:
        for _ in book.steps:
            tick(f"{cr.label}: recorded")
        return finished
    recs = [r for r in done if r["op"] != "done"]
    last = recs[-1]["step"] if recs else -1
    if last >= 0:
        log.info("%s: resuming after step %d (replaying the writes)", cr.label, last)
        cr.replay(last)
        first = next((r for r in recs if r["op"] == "search"), None)
        cr.reference = first["recall"] if first else None
    for st in book.steps:
        if st.index <= last:
            tick(f"{cr.label}: recorded")
            continue
        rec: dict[str, Any] = {"config": cr.label, "backend": cr.cfg.backend, "step": st.index,
                               "op": st.op, "label": st.label, "n": int(st.ids.shape[0])}
        if st.op == "search":
            found = cr.search(st, st.index in controls)
            rec.update(found.row, ids=found.ids)
        else:
            rec.update(cr.write(st), live=len(cr.live))
        out.add(rec)
        recs.append(rec)
        tick(f"{cr.label}: {st.label}")
    last_search = next(s for s in reversed(book.steps) if s.op == "search")
    probe = cr.probe_maintain(last_search) if cr.spec.probe_maintain else None
    fin = {"config": cr.label, "backend": cr.cfg.backend, "op": "done",
           "advice": _advice(cr, recs, probe),
           "maintain_probe": None if probe is None else
           {"action": probe[0], "seconds": probe[1], "recall_after": probe[2]}}
    out.add(fin)
    return fin


def run_churn(spec: ChurnSpec, *, out: str | Path | None = None, force: bool = False,
              resume: bool = False, progress: Progress | None = None) -> ChurnResult:
    """Run the spec's runbook on every config and write the run directory (see the module
    docstring). Backends that cannot do a write step are refused in one line before anything
    runs."""
    from retrieval.loaders.catalog import resolve_dataset

    ds = resolve_dataset(spec.dataset, where=f"{spec.source}: field 'dataset'")
    rb = runbook_of(spec)
    book = resolve_runbook(rb, ds.base, where=spec.source,
                           ids=dataset_row_ids(rb, ds.base_ids, where=spec.source))
    queries = np.ascontiguousarray(ds.queries[: spec.queries or ds.n_queries])
    controls = control_steps(book, spec.control)
    labels = [c.label or c.backend for c in spec.configs]
    prints = {"data_fingerprint": ds.fingerprint,
              "runbook_fingerprint": runbook_fingerprint(book)}
    run = RunDir.create(out, f"{ChurnBenchSummary.KIND}-{spec.name}", force=force,
                        resumable=_resumable(spec, prints) if resume else None)
    done = read_progress(run.path) if resume else {}
    if resume and not done:
        log.info("%s: nothing recorded yet, the run starts from the first step", run.path)
    total, count = max(1, len(spec.configs) * len(book.steps)), [0]

    def tick(what: str) -> None:
        count[0] += 1
        if progress:
            progress(min(count[0], total), total, what)

    with run.recording():
        work = run.work_dir()
        runs = [ConfigRun(spec, c, lab, ds, queries, book, {}, work)
                for c, lab in zip(spec.configs, labels, strict=True)]
        for cr in runs:
            cr.check()
        run.write_yaml("spec.yaml", spec.model_dump(mode="json"))
        (run.path / "spec.json").write_text(_spec_text(spec), encoding="utf-8")
        run.write_json(FINGERPRINTS_FILE, prints)
        run.write_manifest(kind=ChurnBenchSummary.KIND, spec_source=spec.source, **prints,
                           seeds={"index": spec.seed, "runbook_ids": runbook_of(spec).ids.seed},
                           index_threads=spec.threads, resumed=bool(done))
        import pandas as pd

        strings = ds.base_ids is not None and not ds.base_ids.is_int
        run.write_frame("rows.parquet", pd.DataFrame({
            "row": np.arange(ds.n_base),
            "id": ds.base_ids.ids if ds.base_ids is not None and strings else book.ids,
            **({"engine_id": book.ids} if strings else {})}))
        run.write_table("runbook.parquet", [{"step": s.index, "op": s.op, "label": s.label,
                                             "n": int(s.ids.shape[0])} for s in book.steps])
        truth = truth_at_searches(book, ds.base, queries, ds.metric, spec.k)
        log_ = _Log(run.path / PROGRESS_FILE)
        finals = []
        for cr in runs:
            cr.truth = truth
            with cr:
                finals.append(_one_config(cr, book, done.get(cr.label, []), log_, controls,
                                          tick))
        result = _write_results(run, spec, ds, queries.shape[0], book, runs, finals, done,
                                prints)
        run.record_threads(spec.threads)
        run.remove_work()
    return result


def _caller_of(ds: VectorDataset, book: ResolvedRunbook) -> Callable[[list[int]], list[Any]]:
    """Engine ids -> the caller's ids: the same for a dataset with integer ids (or none); for
    string ids, the id of the base row first inserted under each engine id."""
    if ds.base_ids is None or ds.base_ids.is_int:
        return lambda ids: list(ids)
    caller = dict(zip(book.ids.tolist(), ds.base_ids.ids.tolist(), strict=True))
    return lambda ids: [caller[i] for i in ids if i >= 0]


def _write_results(run: RunDir, spec: ChurnSpec, ds: VectorDataset, nq: int,
                   book: ResolvedRunbook, runs: list[ConfigRun], finals: list[dict[str, Any]],
                   done: dict[str, list[dict[str, Any]]],
                   prints: dict[str, str]) -> ChurnResult:
    import pandas as pd

    from retrieval.ids import query_keys

    dataset = ds.name
    to_caller = _caller_of(ds, book)
    qkeys = query_keys(ds.query_ids, np.arange(nq))

    recs = read_progress(run.path)
    steps: list[dict[str, Any]] = []
    id_rows: list[dict[str, Any]] = []
    configs = []
    for cr, fin in zip(runs, finals, strict=True):
        mine = [r for r in recs.get(cr.label, []) if r["op"] != "done"]
        for r in mine:
            if "ids" in r:
                id_rows += [{"backend": cr.label, "step": r["step"], "query": qkeys[q],
                             "ids": to_caller(ids)} for q, ids in enumerate(r["ids"])]
        rows = [{k: v for k, v in r.items() if k != "ids"} for r in mine]
        steps += rows
        configs.append({"label": cr.label, "backend": cr.cfg.backend,
                        "build": cr.bp.model_dump(mode="json"), "search": cr.search0,
                        "knob": cr.knob, "knob_value": cr.value,
                        "knob_range": list(cr.knob_range) if cr.knob_range else None,
                        "steps": rows, "advice": fin["advice"],
                        "maintain_probe": fin.get("maintain_probe")})
    run.write_table("steps.parquet", steps)
    run.write_frame("ids.parquet", pd.DataFrame(id_rows, columns=["backend", "step", "query",
                                                                   "ids"]))
    summary = {
        "kind": ChurnBenchSummary.KIND, "run_id": run.run_id, "name": spec.name,
        "dataset": dataset, **prints, "k": spec.k, "n_queries": nq,
        "target_recall": spec.target_recall,
        "confidence": spec.confidence.model_dump(mode="json"), "control": spec.control,
        "runbook": {"name": runbook_name(spec), **_runbook_facts(book)},
        "recall": "recall@k by id against the exact top-k of the live set at the step",
        "drift_damage": "drift = recall at the first search step - control (a fresh build on "
                        "the live set); damage = control - recall; fractions of recall",
        "configs": configs,
        "resumed": ({"from": {lab: max((r["step"] for r in v if r["op"] != "done"), default=-1)
                              for lab, v in done.items()}} if done else None),
    }
    model = ChurnBenchSummary.model_validate(summary)
    run.write_summary(model)
    return ChurnResult(model.to_json_dict(), steps, run)


__all__ = ["FINGERPRINTS_FILE", "ChurnResult", "read_progress", "run_churn",
           "runbook_fingerprint"]
