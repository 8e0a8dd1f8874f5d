"""BEIR-format text collections: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

Documents become ``(title + " " + text).strip()`` (BEIR's usual single-field choice). As in BEIR's
own loader, only the queries judged in the split are kept.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from retrieval.data import TextCollection
from retrieval.errors import DataError, DataNotFound

log = logging.getLogger(__name__)


def _utf8_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 file (a leading byte-order mark dropped, as in pairs
    files); DataError naming file, line and byte otherwise."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                yield lineno, raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                    f"{exc.start + 1}); BEIR files are UTF-8"
                ) from None


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, line in _utf8_lines(path):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(rec, dict) or "_id" not in rec:
            raise DataError(f"{path}:{lineno}: expected an object with an '_id' field")
        yield lineno, rec


def _need(folder: Path, rel: str) -> Path:
    p = folder / rel
    if not p.is_file():
        raise DataNotFound(f"BEIR collection: file not found: {rel} (looked in {p.resolve()})")
    return p


def load_beir(path: str | Path, split: str = "test", *, name: str | None = None) -> TextCollection:
    """Load a BEIR folder; ``qrels[query_id][doc_id] = score`` as given (0 = judged not
    relevant in the datasets that have it)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise DataNotFound(
            f"BEIR collection: folder not found: {path} (looked in {folder.resolve()})"
        )
    corpus_path = _need(folder, "corpus.jsonl")
    queries_path = _need(folder, "queries.jsonl")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        have = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
        raise DataError(
            f"BEIR collection: no qrels for split '{split}' (looked in {qrels_path.resolve()}); "
            f"splits found: {', '.join(have) or '(none)'}"
        )

    corpus: dict[str, str] = {}
    for lineno, rec in _jsonl(corpus_path):
        doc_id = str(rec["_id"])
        if doc_id in corpus:
            raise DataError(f"{corpus_path}:{lineno}: duplicate document id '{doc_id}'")
        corpus[doc_id] = f"{rec.get('title') or ''} {rec.get('text') or ''}".strip()
    all_queries = {str(rec["_id"]): str(rec.get("text") or "") for _, rec in _jsonl(queries_path)}

    qrels: dict[str, dict[str, int]] = {}
    lines = [text for _, text in _utf8_lines(qrels_path)]
    reader = csv.reader(lines, delimiter="\t")
    for lineno, row in enumerate(reader, 1):
        if not row or not "".join(row).strip():
            continue
        if lineno == 1 and not row[-1].strip().lstrip("-").isdigit():
            continue  # header: query-id corpus-id score
        if len(row) != 3:
            raise DataError(
                f"{qrels_path}:{lineno}: expected 3 tab-separated columns "
                f"(query-id, corpus-id, score); received {len(row)}"
            )
        try:
            score = int(row[2])
        except ValueError:
            raise DataError(
                f"{qrels_path}:{lineno}: score must be an integer; received {row[2]!r}"
            ) from None
        qrels.setdefault(row[0].strip(), {})[row[1].strip()] = score

    missing_q = [q for q in qrels if q not in all_queries]
    if missing_q:
        raise DataError(
            f"{qrels_path}: {len(missing_q)} judged query ids are not in {queries_path.name} "
            f"(first: {missing_q[0]!r})"
        )
    queries = {q: all_queries[q] for q in all_queries if q in qrels}
    coll = TextCollection(
        name=name or folder.name,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        source=f"beir:{folder.resolve()}",
        info={
            "format": "beir",
            "split": split,
            "n_docs": len(corpus),
            "n_queries": len(queries),
            "n_qrels": sum(len(v) for v in qrels.values()),
            "text": "title + ' ' + text, stripped",
        },
    )
    unknown = coll.unknown_qrels()
    if unknown:
        log.warning(
            "%s: %d judged documents are not in the corpus", qrels_path,
            sum(len(v) for v in unknown.values()),
        )
    return coll
