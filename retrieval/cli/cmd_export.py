"""`rwb export RUN --engine E --out FILE`: the tuned config in an engine's own names, with its
evidence; `rwb verify FILE`: rebuild, re-measure, exit 1 if the config no longer holds."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from retrieval.cli._common import print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a tuned run as an engine-native config with its evidence",
        description=(
            "Write the cheapest config meeting the target of a sweep run in an engine's own "
            "parameter names (milvus, faiss, hnswlib, qdrant, pgvector, redis, weaviate; "
            "redisvl for semantic-cache threshold runs; rerank for rwb tune rerank depth runs; "
            "milvus, qdrant or lancedb hybrid search for rwb tune fusion runs), "
            "with the evidence: target, recall and its lower "
            "bound, held-out recall, latency, dataset fingerprint, CPU, versions, run id. "
            "Exit 1 when the run has no config meeting the target for that engine."
        ),
    )
    p.add_argument("run", help="run directory of rwb sweep (rwb tune cache for redisvl, "
                   "rwb tune rerank for rerank, rwb tune fusion for a hybrid fusion)")
    p.add_argument("--engine", required=True,
                   help="milvus | faiss | hnswlib | qdrant | pgvector | redis | weaviate | "
                   "redisvl | rerank")
    p.add_argument("--out", required=True, help="output file (.yaml, or .json); an existing "
                   "file rwb did not write is refused")
    p.add_argument("--force", action="store_true",
                   help="replace --out even if it is a file rwb did not write")
    p.add_argument("--backend", help="export this index label/backend's config")
    p.add_argument("--churn", metavar="CHURN_RUN",
                   help="a rwb bench churn run of the same config: the evidence then says "
                   "whether it holds under that runbook (runbook, last step's recall / control "
                   "/ damage, target held at every search step)")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(func=run_export)

    v = sub.add_parser(
        "verify",
        help="rebuild and re-measure an exported config; exit 1 if it no longer holds",
    )
    v.add_argument("file", help="a file written by rwb export")
    v.add_argument("--pairs", metavar="FILE",
                   help="semantic-cache exports: the transfer check - measure the exported "
                        "threshold on this other labelled pairs file (jsonl/csv/tsv) and say "
                        "whether the false-hit cap holds there")
    v.add_argument("--engine", help="measure the file's settings on this engine instead "
                   "(does the target transfer?); exit 3: an engine rwb cannot run")
    v.add_argument("--dataset", metavar="NAME|FILE|FOLDER",
                   help="the data to re-measure on when the recorded one is not reachable: "
                        "ANN exports a dataset name, manifest .yaml or .hdf5 path; rerank "
                        "exports a BEIR folder; cache exports a pairs file; its fingerprint "
                        "must be the recorded one (a moved one is also looked for under "
                        "$RWB_DATA_DIR and the current folder)")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.set_defaults(func=run_verify)


def run_export(args: argparse.Namespace) -> int:
    from retrieval.api import export
    from retrieval.exporting import NothingToExport
    from retrieval.exporting.files import is_rwb_export
    from retrieval.runs import check_out_file

    check_out_file(args.out, force=args.force, ours=is_rwb_export)
    out = Path(args.out)
    # what is there now: an earlier rwb export (check_out_file let it through), or --force
    replaced = ("" if not out.is_file() else " (replaced an earlier rwb export)"
                if is_rwb_export(out) else " (replaced the file that was there: --force)")
    try:
        result = export(args.run, args.engine, args.out, backend=args.backend, force=args.force,
                        churn=getattr(args, "churn", None))
    except NothingToExport as exc:
        print(f"rwb: nothing to export: {exc}", file=sys.stderr)
        return 1
    info = result.to_dict()
    if args.json:
        print_json({**info, "replaced": bool(replaced)})
    else:
        label = info.get("label")
        extra = f" from {label} ({info.get('backend')})" if label else ""
        print(f"wrote {info.get('path')}{replaced}: {args.engine} config{extra}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from retrieval.api import verify
    from retrieval.exporting import ChecksReport, VerifyReport
    from retrieval.exporting.verify import NotMeasurable

    result = verify(args.file, engine=getattr(args, "engine", None),
                    dataset=getattr(args, "dataset", None), pairs=getattr(args, "pairs", None))
    report = result.report
    if isinstance(report, NotMeasurable):
        if args.json:
            print_json(report.to_dict())
        else:
            print(f"verify {args.file}: NOT MEASURABLE HERE (engine {report.engine}): "
                  f"{report.reason}")
        return report.exit_code
    if args.json:
        print_json(report.to_dict())
        return 0 if report.holds else 1
    if isinstance(report, ChecksReport):  # a report of named checks (redisvl, rerank)
        print(f"verify {args.file}: {'HOLDS' if report.holds else 'FAILS'}")
        measured = getattr(report, "measured", None)
        found = measured.get("dataset_found_at") if isinstance(measured, dict) else None
        for name, where in (found.items() if isinstance(found, dict) else [("data", found)]):
            if where:
                print(f"  {name} not at its recorded path; found at {where}")
        for c in report.checks:
            mark = "ok  " if c.get("passed") else "FAIL"
            print(f"  {mark} {c.get('check')}: measured {c.get('measured')}, "
                  f"expected {c.get('expected')}")
        return 0 if report.holds else 1
    if not isinstance(report, VerifyReport):
        print(f"verify {args.file}: {'HOLDS' if report.holds else 'FAILS'}")
        return 0 if report.holds else 1
    m, rec = report.measured, report.recorded
    print(f"verify {report.path}: {'HOLDS' if report.holds else 'FAILS'}")
    was = rec.get("fingerprint")
    fp = "fingerprint matches" if report.fingerprint_matches else (
        f"DATA CHANGED: fingerprint {was} recorded, {report.fingerprint} now; the evidence is "
        f"about other data, re-run rwb sweep on it" if was else
        f"NO FINGERPRINT recorded in the file (now {report.fingerprint}): cannot tell that the "
        f"data is the one tuned on")
    on = f" (settings of the {rec.get('measured_on')} evidence, as {report.transfer_to})" if (
        report.transfer_to) else ""
    print(f"  {report.backend} on {report.dataset}{on} ({fp})")
    for c in report.named_checks:
        if not c.get("passed"):
            print(f"  FAIL {c.get('check')}: measured {c.get('measured')}, expected "
                  f"{c.get('expected')}")
    cmp = ">=" if report.bound_holds else "<"
    print(f"  recall {m.recall:.4f} (recorded {_f(rec.get('recall'))}), lower bound "
          f"{m.recall_lb:.4f} {cmp} target {report.target}")
    if report.within_tolerance is not None:
        print(f"  judged within the rebuild tolerance {report.within_tolerance:g} (an unseeded "
              f"or multi-threaded build; the recorded bound met the target): expect flakes, "
              f"re-tune with a margin")
    if report.heldout is not None:
        print(f"  held-out recall {report.heldout.recall:.4f} (recorded "
              f"{_f(rec.get('heldout_recall'))})")
    if m.p95_ms is not None:
        print(f"  p95 {m.p95_ms:.4g} ms (recorded {_f(rec.get('p95_ms'), '.4g')} ms; "
              f"{latency_cause(rec.get('measured_on'), report.backend)})")
    churn = rec.get("under_churn")
    if isinstance(churn, dict):
        print(f"  {churn_line(churn)}")
    return 0 if report.holds else 1


def churn_line(c: dict[str, Any]) -> str:
    """The recorded ``evidence.under_churn`` in one line (not re-measured by verify)."""
    last = c.get("last_search_step") or {}
    held = ("held at every search step" if c.get("held_at_every_search_step") else
            "did NOT hold at every search step")
    return (f"under churn '{c.get('runbook')}' (recorded, not re-run): target "
            f"{c.get('target_recall')} {held} ({c.get('search_steps')} search steps); last step "
            f"{last.get('step')}: recall {_f(last.get('recall'))}, control "
            f"{_f(last.get('control_recall'))}, damage {_f(last.get('damage'))}")


def latency_cause(recorded_on: Any, measured_on: str) -> str:
    """Why verify's p95 may differ from the recorded one: another engine (a server over a
    socket vs in-process) when the backends differ, else the machine."""
    from retrieval.indexes.engine import engine_of_backend

    if not recorded_on or recorded_on == measured_on:
        return "latency depends on the machine"

    def where(backend: str) -> str:
        desc = engine_of_backend(backend)
        return "a server over a socket" if desc is not None and (
            desc.server or desc.local_server) else "in-process"

    return (f"a different engine: recorded on {recorded_on} ({where(str(recorded_on))}), "
            f"measured now on {measured_on} ({where(measured_on)}); latency does not transfer "
            f"between them")


def _f(v: Any, spec: str = ".4f") -> str:
    return "-" if v is None else format(float(v), spec)
