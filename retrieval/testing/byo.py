"""Your-own-data examples made from the public collections in ``../shared/data``: a small BEIR
folder cut from Cranfield (graded qrels kept) and labelled pair files cut from GPTCache's QQP,
in the formats ``rwb tune rerank`` / ``rwb tune cache`` read from a user. Tests and
``scripts/make_byo_examples.py`` write them; the texts and labels are the real ones.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.data import TextCollection


def write_beir(coll: TextCollection, out: str | Path, *, n_queries: int = 40,
               n_docs: int = 400, split: str = "test", seed: int = 0) -> Path:
    """A BEIR folder of ``n_queries`` judged queries of ``coll`` (seeded), every document they
    judge, and other documents up to ``n_docs``; qrels as given (graded). Returns the folder."""
    folder = Path(out)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    judged = [q for q in coll.queries if coll.qrels.get(q) and coll.queries[q].strip()]
    pick = sorted(rng.choice(len(judged), min(n_queries, len(judged)), replace=False).tolist())
    qids = [judged[i] for i in pick]
    keep = {d for q in qids for d in coll.qrels[q] if d in coll.corpus}
    others = [d for d in coll.corpus if d not in keep and coll.corpus[d].strip()]
    extra = max(0, n_docs - len(keep))
    if extra and others:
        keep |= {others[i] for i in rng.choice(len(others), min(extra, len(others)),
                                               replace=False)}
    docs = [d for d in coll.corpus if d in keep]
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps({"_id": d, "title": "", "text": coll.corpus[d]}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for q in qids:
            fh.write(json.dumps({"_id": q, "text": coll.queries[q]}) + "\n")
    with (folder / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for q in qids:
            for d, g in coll.qrels[q].items():
                if d in keep:
                    fh.write(f"{q}\t{d}\t{g}\n")
    return folder


def sample_pairs(pairs: Sequence[Any], n: int, seed: int = 0) -> list[tuple[str, str, int]]:
    """``n`` seeded (text_a, text_b, label) triples of ``pairs`` (objects with those fields)."""
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(len(pairs), min(n, len(pairs)), replace=False))
    return [(pairs[i].text_a, pairs[i].text_b, int(pairs[i].label)) for i in idx]


def write_pairs(rows: Sequence[tuple[str, str, int]], out: str | Path, fmt: str = "jsonl", *,
                columns: tuple[str, str, str] = ("a", "b", "duplicate"),
                bool_labels: bool = False) -> Path:
    """Write labelled pairs as jsonl / csv / tsv with a header naming ``columns``."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    ca, cb, cl = columns
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for a, b, lab in rows:
                fh.write(json.dumps({ca: a, cb: b, cl: bool(lab) if bool_labels else lab}) + "\n")
        return path
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="," if fmt == "csv" else "\t")
        w.writerow(columns)
        for a, b, lab in rows:
            w.writerow([a, b, ("true" if lab else "false") if bool_labels else lab])
    return path


__all__ = ["sample_pairs", "write_beir", "write_pairs"]
