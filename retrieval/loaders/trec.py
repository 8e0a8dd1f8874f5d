"""TREC run files (``qid Q0 docid rank score tag``, whitespace-separated), read and written.

Reading orders each query's documents the way trec_eval and ranx do: by ``score`` descending
(ties: the file's ``rank``, then file order). Every malformed line is a DataError naming the file,
the line and the value received. Writing uses rank-derived scores (``n - rank + 1``), so a tool
that sorts by score keeps rwb's order exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from retrieval.errors import DataError, DataNotFound

log = logging.getLogger(__name__)

COLUMNS = "qid Q0 docid rank score tag"


def _lines(path: Path) -> list[tuple[int, str]]:
    if not path.is_file():
        raise DataNotFound(f"TREC run file not found: {path} (looked in {path.resolve()})")
    out = []
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                out.append((lineno, raw.decode("utf-8")))
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                                f"column {exc.start + 1})") from None
    return out


def read_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """Query id -> [(doc id, score)], best first (score descending, ties by rank)."""
    p = Path(path).expanduser()
    rows: dict[str, list[tuple[float, int, int, str]]] = {}
    seen: set[tuple[str, str]] = set()
    n = 0
    for lineno, line in _lines(p):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            raise DataError(f"{p}:{lineno}: expected 6 whitespace-separated columns ({COLUMNS}); "
                            f"received {len(parts)}: {line.strip()[:80]!r}")
        qid, _, doc, rank_s, score_s, _ = parts
        try:
            rank = int(rank_s)
        except ValueError:
            raise DataError(f"{p}:{lineno}: column 'rank' must be an integer; received "
                            f"{rank_s!r}") from None
        try:
            score = float(score_s)
        except ValueError:
            raise DataError(f"{p}:{lineno}: column 'score' must be a number; received "
                            f"{score_s!r}") from None
        if score != score:  # NaN
            raise DataError(f"{p}:{lineno}: column 'score' must be a number; received 'nan'")
        if (qid, doc) in seen:
            raise DataError(f"{p}:{lineno}: document {doc!r} appears twice for query {qid!r}")
        seen.add((qid, doc))
        rows.setdefault(qid, []).append((-score, rank, n, doc))
        n += 1
    if not rows:
        raise DataError(f"{p}: the run file is empty (expected lines '{COLUMNS}')")
    return {q: [(doc, -neg) for neg, _, _, doc in sorted(r)] for q, r in rows.items()}


def write_run(path: str | Path, rankings: Mapping[str, Sequence[str]], tag: str,
              scores: Mapping[str, Sequence[float]] | None = None) -> Path:
    """Write ``rankings`` (query id -> doc ids, best first) as a TREC run; returns the path.

    ``scores``: each query's scores, aligned with its doc ids and non-increasing (the stage's
    real scores, so score-based fusion such as ranx's min-max + CombSUM works); without them a
    rank-derived score (n, n-1, ..., 1) is written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tag = "".join(c if not c.isspace() else "_" for c in tag) or "rwb"
    with p.open("w", encoding="utf-8") as fh:
        for qid, docs in rankings.items():
            n = len(docs)
            given = None if scores is None else scores.get(qid)
            if given is not None and len(given) != n:
                raise ValueError(f"write_run: query {qid}: {len(given)} scores for {n} docs")
            for i, doc in enumerate(docs):
                sc = f"{float(given[i]):.9g}" if given is not None else str(n - i)
                fh.write(f"{qid} Q0 {doc} {i + 1} {sc} {tag}\n")
    return p


__all__ = ["COLUMNS", "read_run", "write_run"]
