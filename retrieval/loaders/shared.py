"""The public collections in ``../shared/data`` (see each folder's README.md).

Every loader looks in :func:`retrieval.paths.data_dir_candidates` and raises a DataError naming
every place it looked when the folder or a file is missing. Parsed collections are memoised per
process; each call returns a new :class:`TextCollection` with its own dicts.
"""

from __future__ import annotations

import ast
import csv
import functools
import html
import io
import json
import re
import tarfile
import tokenize
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from retrieval.data import TextCollection
from retrieval.errors import DataError, DataNotFound, param_error
from retrieval.paths import data_dir_candidates

QQPWhich = Literal["full", "positive", "mock"]
QQP_FILES: dict[str, str] = {
    "full": "similiar_qqp_full.json.gz",
    "positive": "similiar_qqp.json.gz",
    "mock": "mock_data.json",
}


def shared_folder(sub: str) -> Path:
    """The first existing ``<candidate>/<sub>`` folder, else DataError naming every candidate."""
    looked = [c / sub for c in data_dir_candidates()]
    for p in looked:
        if p.is_dir():
            return p
    raise DataError(
        f"shared dataset folder '{sub}' not found; looked in: "
        f"{', '.join(str(p) for p in looked)} (set RWB_DATA_DIR to the folder holding it)"
    )


def shared_file(sub: str, name: str) -> Path:
    folder = shared_folder(sub)
    p = folder / name
    if not p.is_file():
        raise DataNotFound(f"shared dataset '{sub}': file not found: {name} (looked in {p})")
    return p


def _copy(coll: TextCollection) -> TextCollection:
    return TextCollection(
        name=coll.name,
        corpus=dict(coll.corpus),
        queries=dict(coll.queries),
        qrels={q: dict(d) for q, d in coll.qrels.items()},
        source=coll.source,
        info=dict(coll.info),
    )


# --------------------------------------------------------------------------- SciFact

SCIFACT_SPLITS = {"test": "claims_validation.csv", "train": "claims_train.csv"}


def _np_str_list(cell: str) -> list[str]:
    """``"['a' 'b']"`` (NumPy array notation) -> ``["a", "b"]``."""
    toks = tokenize.generate_tokens(io.StringIO(cell).readline)
    return [ast.literal_eval(t.string) for t in toks if t.type == tokenize.STRING]


@functools.lru_cache(maxsize=4)
def _scifact(path: Path, split: str) -> TextCollection:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"SciFact: {path} is not a readable zip file ({exc})") from None
    with zf:
        names = zf.namelist()

        def rows(member: str) -> list[dict[str, str]]:
            if member not in names:
                raise DataError(
                    f"SciFact: member {member} not in {path}; members: {', '.join(names)}"
                )
            # SciFact's abstract cells exceed csv's default field limit; the limit is
            # process-wide, so it is raised for this read only (other CSV readers keep theirs)
            old = csv.field_size_limit(10**9)
            try:
                with zf.open(member) as raw:
                    return list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8")))
            finally:
                csv.field_size_limit(old)

        corpus: dict[str, str] = {}
        for r in rows("corpus_train.csv"):
            abstract = " ".join(_np_str_list(r["abstract"]))
            corpus[r["doc_id"]] = f"{r['title']} {abstract}".strip()
        queries: dict[str, str] = {}
        qrels: dict[str, dict[str, int]] = {}
        for r in rows(SCIFACT_SPLITS[split]):
            queries[r["id"]] = r["claim"]
            for doc in r["cited_doc_ids"].strip("[]").split():
                qrels.setdefault(r["id"], {})[doc] = 1
    return TextCollection(
        name=f"scifact-{split}" if split != "test" else "scifact",
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        source=f"scifact:{path}",
        info={
            "collection": "scifact",
            "split": split,
            "queries_from": SCIFACT_SPLITS[split],
            "n_docs": len(corpus),
            "n_queries": len(queries),
            "n_qrels": sum(len(v) for v in qrels.values()),
            "convention": (
                "BEIR SciFact: doc text = title + ' ' + abstract sentences joined by spaces; "
                "qrels = (claim id, each cited_doc_id, grade 1)"
            ),
        },
    )


def load_scifact(split: str = "test") -> TextCollection:
    """SciFact as BEIR defines it: 5,183 abstracts; split "test" = the 300 dev claims
    (``claims_validation.csv``, 339 judgments), "train" = 809 claims (919 judgments)."""
    if split not in SCIFACT_SPLITS:
        raise param_error("split", "one of test, train", split, where="SciFact")
    return _copy(_scifact(shared_file("scifact", "scifact.zip"), split))


# --------------------------------------------------------------------------- Cranfield

CRANFIELD_GRADES = {
    1: "complete answer to the question",
    2: "high degree of relevance",
    3: "useful background or methods",
    4: "minimum interest (e.g. historical)",
}


def _smart(path: Path) -> list[tuple[str, dict[str, str]]]:
    """Parse a SMART tagged file (``.I id`` then ``.X`` fields); skips the id-less sentinel."""
    try:
        text = path.read_bytes().decode("ascii").replace("\r\n", "\n")
    except (UnicodeDecodeError, OSError) as exc:
        raise DataError(f"Cranfield: cannot read {path} as ASCII ({exc})") from None
    out = []
    for block in re.split(r"^\.I", text, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        if not head.strip():
            continue
        fields = dict(re.findall(r"^\.([A-Z])\n(.*?)(?=^\.[A-Z]\n|\Z)", body, flags=re.M | re.S))
        out.append((head.strip(), fields))
    return out


def _ws(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=2)
def _cranfield(folder: Path) -> TextCollection:
    docs = _smart(folder / "cran.all.1400")
    corpus = {doc_id: _ws(f.get("W", "")) for doc_id, f in docs}
    raw_queries = _smart(folder / "cran.qry")
    queries = {str(i + 1): _ws(f.get("W", "")) for i, (_, f) in enumerate(raw_queries)}
    qrels: dict[str, dict[str, int]] = {}
    qrels_path = folder / "cranqrel"
    for lineno, line in enumerate(qrels_path.read_text(encoding="ascii").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 3 or not all(p.lstrip("-").isdigit() for p in parts):
            raise DataError(f"{qrels_path}:{lineno}: expected 'qid docid grade'; got {line!r}")
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    empty = [d for d, t in corpus.items() if not t]
    return TextCollection(
        name="cranfield",
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        source=f"cranfield:{folder}",
        info={
            "collection": "cranfield",
            "n_docs": len(corpus),
            "n_queries": len(queries),
            "n_qrels": sum(len(v) for v in qrels.values()),
            "text": "the .W abstract (it begins with the title), whitespace collapsed",
            "empty_docs": empty,
            "query_ids": "k-th query in cran.qry -> id 'k' (1..225), as cranqrel numbers them",
            "grades": {str(k): v for k, v in CRANFIELD_GRADES.items()},
            "relevance_convention": (
                "grades as given: LOWER is MORE relevant (1 best, 4 least; no 5s = no interest). "
                "Binary metrics: treat grades 1-3 (or 1-4) as relevant and say which. Graded "
                "metrics (nDCG): use load_cranfield(relevance='gain'), gain = 5 - grade"
            ),
        },
    )


def load_cranfield(relevance: Literal["as-given", "gain"] = "as-given") -> TextCollection:
    """Cranfield: 1,400 docs, 225 queries (ids 1..225 in file order), 1,837 graded judgments.

    ``relevance="as-given"`` keeps Cleverdon's grades (1 = complete answer ... 4 = minimal
    interest: lower is better); ``"gain"`` maps them to 5 - grade (4 best ... 1) for nDCG.
    Docs 471 and 995 have no text in the source (empty strings here; 995 is judged).
    """
    if relevance not in ("as-given", "gain"):
        raise param_error("relevance", "one of as-given, gain", relevance, where="Cranfield")
    folder = shared_folder("cranfield")
    for name in ("cran.all.1400", "cran.qry", "cranqrel"):
        shared_file("cranfield", name)
    coll = _copy(_cranfield(folder))
    if relevance == "gain":
        for docs in coll.qrels.values():
            for d, g in docs.items():
                docs[d] = 5 - g
        coll.info["relevance"] = "gain = 5 - grade (4 = complete answer ... 1 = minimal)"
    else:
        coll.info["relevance"] = "grade as given (1 = complete answer ... 4 = minimal)"
    return coll


# --------------------------------------------------------------------------- Reuters

_REC = re.compile(r"<REUTERS (.*?)>(.*?)</REUTERS>", re.S)
_NEWID = re.compile(r'NEWID="(\d+)"')
_BODY = re.compile(r"<BODY>(.*?)</BODY>", re.S)
_TITLE = re.compile(r"<TITLE>(.*?)</TITLE>", re.S)
_PARA = re.compile(r"\n(?=[ \t])")


@functools.lru_cache(maxsize=4)
def _reuters(folder: Path, min_chars: int, include_titles: bool) -> TextCollection:
    corpus: dict[str, str] = {}
    seen: set[str] = set()
    n_records = n_bodies = n_raw = n_short = n_dup = n_titles = 0
    files = [folder / f"reut2-{i:03d}.sgm" for i in range(22)]
    for path in files:
        if not path.is_file():
            raise DataNotFound(f"Reuters-21578: file not found: {path.name} (looked in {path})")
        raw = path.read_text(encoding="latin-1")
        for attrs, rec in _REC.findall(raw):
            n_records += 1
            m_id = _NEWID.search(attrs)
            if m_id is None:
                raise DataError(f"{path}: a <REUTERS> record has no NEWID attribute")
            newid = m_id.group(1)
            if include_titles:
                m_title = _TITLE.search(rec)
                title = _ws(html.unescape(m_title.group(1))) if m_title else ""
                if title and title not in seen:
                    seen.add(title)
                    corpus[f"{newid}-title"] = title
                    n_titles += 1
            m_body = _BODY.search(rec)
            if m_body is None:
                continue
            n_bodies += 1
            body = html.unescape(m_body.group(1)).replace("\x03", "")
            for j, para in enumerate(_PARA.split(body)):
                text = _ws(para)
                if not text:
                    continue
                n_raw += 1
                if len(text) < min_chars:
                    n_short += 1
                    continue
                if text in seen:
                    n_dup += 1
                    continue
                seen.add(text)
                corpus[f"{newid}-{j}"] = text
    return TextCollection(
        name="reuters-paragraphs",
        corpus=corpus,
        source=f"reuters21578:{folder}",
        info={
            "collection": "reuters",
            "n_records": n_records,
            "n_bodies": n_bodies,
            "n_paragraphs_raw": n_raw,
            "n_short_dropped": n_short,
            "n_duplicates_dropped": n_dup,
            "n_titles": n_titles,
            "n_paragraphs": len(corpus) - n_titles,
            "min_chars": min_chars,
            "split": "body split before each indented line; whitespace collapsed; "
            "exact duplicates dropped (first kept); ids '<NEWID>-<paragraph position>'",
        },
    )


def load_reuters_paragraphs(min_chars: int = 40, *, include_titles: bool = False) -> TextCollection:
    """Reuters-21578 bodies split into paragraphs (corpus only, no queries).

    A paragraph starts at each indented line; texts shorter than ``min_chars`` characters
    (sign-offs such as "Reuter", table fragments) and exact duplicates are dropped. With the
    defaults: 84,175 paragraphs from 19,043 bodies. ``include_titles`` adds the story titles as
    extra passages (ids ``<NEWID>-title``).
    """
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 1:
        raise param_error("min_chars", "an integer >= 1", min_chars, where="Reuters-21578")
    return _copy(_reuters(shared_folder("reuters21578"), min_chars, bool(include_titles)))


# --------------------------------------------------------------------------- QQP


@dataclass(frozen=True)
class QQPPair:
    """A pair of user questions; ``label`` 1 = duplicates (same intent), 0 = not."""

    text_a: str
    text_b: str
    label: int


def _read_json_member(path: Path) -> Any:
    """The .json.gz files are gzipped tar archives holding one JSON member."""
    if path.suffix == ".json":
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(f"QQP: {path} is not valid JSON ({exc})") from None
    try:
        with tarfile.open(path, "r:gz") as tf:
            members = [m for m in tf.getmembers() if m.isfile()]
            if len(members) != 1:
                raise DataError(
                    f"QQP: {path} should hold one JSON member; found "
                    f"{[m.name for m in members]}"
                )
            fh = tf.extractfile(members[0])
            assert fh is not None
            return json.load(fh)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataError(
            f"QQP: {path} is not a readable gzipped tar archive ({exc}); the .json.gz files "
            f"are tar.gz, see the folder's README.md"
        ) from None
    except json.JSONDecodeError as exc:
        raise DataError(f"QQP: the JSON inside {path} is invalid ({exc})") from None


@functools.lru_cache(maxsize=3)
def _qqp_pairs(path: Path, which: str) -> tuple[QQPPair, ...]:
    data = _read_json_member(path)
    if not isinstance(data, list):
        raise DataError(f"QQP: {path}: expected a JSON list of pairs; got {type(data).__name__}")
    out = []
    for i, rec in enumerate(data):
        try:
            if which == "full":
                out.append(QQPPair(str(rec["text_a"]), str(rec["text_b"]), int(rec["label"])))
            else:
                out.append(QQPPair(str(rec["origin"]), str(rec["similar"]), 1))
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"QQP: {path}: record {i} is malformed ({exc!r})") from None
    return tuple(out)


def load_qqp_pairs(which: QQPWhich = "full") -> list[QQPPair]:
    """Question pairs from GPTCache's benchmark files.

    ``"full"``: 80,854 labelled Quora pairs (30,141 duplicates); ``"positive"``: the 30,141
    duplicate pairs only (``similiar_qqp.json.gz``); ``"mock"``: 999 ChatGPT paraphrase pairs
    (all label 1; a smoke test, not a benchmark).
    """
    if which not in QQP_FILES:
        raise param_error("which", "one of full, positive, mock", which, where="QQP pairs")
    return list(_qqp_pairs(shared_file("gptcache_qqp", QQP_FILES[which]), which))


def load_qqp_questions() -> TextCollection:
    """The 137,551 distinct questions of the full QQP pair file (corpus only), ids ``q<idx>``
    in first-seen order (text_a before text_b, pair by pair). Texts are kept exactly."""
    pairs = load_qqp_pairs("full")
    index: dict[str, int] = {}
    for p in pairs:
        for t in (p.text_a, p.text_b):
            if t not in index:
                index[t] = len(index)
    corpus = {f"q{i}": t for t, i in index.items()}
    return TextCollection(
        name="qqp-questions",
        corpus=corpus,
        source=f"gptcache_qqp:{shared_file('gptcache_qqp', QQP_FILES['full'])}",
        info={
            "collection": "qqp-questions",
            "n_pairs": len(pairs),
            "n_questions": len(corpus),
            "ids": "q<idx>, first-seen order over (text_a, text_b) of each pair",
        },
    )
