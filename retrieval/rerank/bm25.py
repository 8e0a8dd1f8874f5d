"""BM25 first stage over a text corpus (rank-bm25 or bm25s, one pinned tokenisation).

The convention is pinned and recorded with every result (:meth:`BM25Params.convention`):

- **Tokenisation** (both implementations): ``bm25s.tokenize`` - lowercase, scikit-learn token
  pattern ``(?u)\\b\\w\\w+\\b``, bm25s' English stopword list (the 33 Lucene/Anserini
  words), Snowball English stemming through PyStemmer. Each is a setting: ``token_pattern``
  (e.g. ``\\w+`` to keep one-letter tokens), ``lowercase``, ``stopwords`` (``en``, ``none``
  or a list of words), ``stemmer`` (any PyStemmer algorithm or ``none``); the defaults are the
  pinned convention above.
- ``implementation: rank-bm25``: ``rank_bm25.BM25Okapi(k1=1.5, b=0.75, epsilon=0.25)``, the
  convention the bm25-benchmarks figures use (SciFact test nDCG@10 0.684 with this tokenisation).
  rank-bm25 gives a term found in more than half the documents an idf of ``epsilon`` x the
  average idf, and a term in exactly half an idf of 0 (tiny corpora need >= 3 documents for any
  term to score). About 12 ms a query on SciFact (5,183 documents): pure Python.
- ``implementation: bm25s``: ``bm25s.BM25(method=..., k1, b)``; ``method: lucene`` with k1 1.2,
  b 0.75 is the Anserini/Lucene convention (SciFact 0.679). ``method: atire`` with
  ``idf_method: robertson`` and k1 1.5 equals rank-bm25 except for terms in more than half the
  documents (0 instead of the epsilon floor). ~20-50x faster per query than rank-bm25.

Scores are BM25 similarities: higher is better, >= 0. Documents with score 0 (no query term
matched) are never returned: a row is padded with -1 / -inf instead, like Lucene does.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from retrieval.errors import ConfigError, DataError, param_error
from retrieval.params import Params

log = logging.getLogger(__name__)

Implementation = Literal["rank-bm25", "bm25s"]
#: bm25s' (and scikit-learn's) default token: two or more word characters
DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
Method = Literal["lucene", "robertson", "atire", "bm25l", "bm25+"]


class BM25Params(Params):
    """BM25 settings. ``k1`` > 0, ``b`` in [0, 1]; ``epsilon`` is rank-bm25's idf floor factor,
    ``method``/``idf_method`` are bm25s' scoring variants (each only valid for its library)."""

    implementation: Implementation = "rank-bm25"
    k1: float = Field(1.5, gt=0.0, le=10.0)
    b: float = Field(0.75, ge=0.0, le=1.0)
    epsilon: float | None = Field(None, ge=0.0, le=1.0)
    method: Method | None = None
    idf_method: Method | None = None
    #: regular expression of one token (Python ``re``); bm25s' default keeps tokens of >= 2
    #: word characters; ``\\w+`` keeps one-letter tokens too
    token_pattern: str = Field(DEFAULT_TOKEN_PATTERN, min_length=1)
    lowercase: bool = True
    #: ``en`` (bm25s' 33 Lucene words), ``none``, or an explicit list of words
    stopwords: Literal["en", "none"] | list[str] = "en"
    #: a PyStemmer (Snowball) algorithm, e.g. ``english``, or ``none``
    stemmer: str = "english"

    @field_validator("token_pattern")
    @classmethod
    def _pattern(cls, v: str) -> str:
        try:
            compiled = re.compile(v)
        except re.error as exc:
            raise ValueError(f"must be a valid regular expression ({exc})") from None
        if compiled.match(""):
            raise ValueError("must not match the empty string (every position would be a token)")
        return v

    @field_validator("stemmer")
    @classmethod
    def _stemmer(cls, v: str) -> str:
        if v == "none":
            return v
        import Stemmer

        algorithms = sorted(Stemmer.algorithms())
        if v not in algorithms:
            raise ValueError(f"must be 'none' or a PyStemmer algorithm ({', '.join(algorithms)})")
        return v

    @model_validator(mode="after")
    def _per_library(self) -> BM25Params:
        if self.implementation == "rank-bm25" and (self.method or self.idf_method):
            raise ValueError(
                "method/idf_method are bm25s options; with implementation 'rank-bm25' leave them "
                "unset (BM25Okapi is fixed)"
            )
        if self.implementation == "bm25s" and self.epsilon is not None:
            raise ValueError("epsilon is a rank-bm25 option; unset it for implementation 'bm25s'")
        return self

    @property
    def resolved_epsilon(self) -> float:
        return 0.25 if self.epsilon is None else self.epsilon

    @property
    def resolved_method(self) -> Method:
        return self.method or "lucene"

    def _tokenizer_note(self) -> str:
        if self.token_pattern == DEFAULT_TOKEN_PATTERN and self.lowercase:
            return "bm25s.tokenize (lowercase, (?u)\\b\\w\\w+\\b)"
        case = "lowercase" if self.lowercase else "case kept"
        return f"bm25s.tokenize ({case}, {self.token_pattern})"

    def _stopwords_note(self) -> str | list[str]:
        if self.stopwords == "en":
            return "bm25s english (33 Lucene words)"
        return "none" if self.stopwords == "none" else list(self.stopwords)

    def convention(self) -> dict[str, Any]:
        """Everything that changes the scores, as plain data (stored with results)."""
        out: dict[str, Any] = {
            "implementation": self.implementation,
            "k1": self.k1,
            "b": self.b,
            "tokenizer": self._tokenizer_note(),
            "token_pattern": self.token_pattern,
            "lowercase": self.lowercase,
            "stopwords": self._stopwords_note(),
            "stemmer": "none" if self.stemmer == "none" else f"PyStemmer snowball {self.stemmer}",
            "zero_score_docs": "dropped",
        }
        if self.implementation == "rank-bm25":
            out["variant"] = "rank_bm25.BM25Okapi"
            out["epsilon"] = self.resolved_epsilon
        else:
            out["method"] = self.resolved_method
            out["idf_method"] = self.idf_method or self.resolved_method
        return out


@dataclass(frozen=True)
class BM25Hits:
    """Top-k per query. ``doc_idx`` int64 (nq, k): positions in the indexed corpus, -1 = none;
    ``scores`` float32 (nq, k): BM25 similarity (higher is better), -inf where -1."""

    doc_idx: np.ndarray
    scores: np.ndarray


class BM25Index:
    """A BM25 index over a list of texts (positions are document indices)."""

    def __init__(self, params: BM25Params | None = None) -> None:
        self.params = params or BM25Params()
        self._model: Any = None
        self._n = 0
        self._stemmer: Any = None
        self.build_s = 0.0

    @property
    def n_docs(self) -> int:
        return self._n

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """Token lists under the pinned convention (see module docstring)."""
        import bm25s

        p = self.params
        if self._stemmer is None and p.stemmer != "none":
            import Stemmer

            self._stemmer = Stemmer.Stemmer(p.stemmer)
        stop: str | list[str] | None = (
            None if p.stopwords == "none" else p.stopwords if isinstance(p.stopwords, str)
            else list(p.stopwords))
        out = bm25s.tokenize(
            list(texts),
            lower=p.lowercase,
            token_pattern=p.token_pattern,
            stopwords=stop,
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )
        return [list(t) for t in out]

    def build(self, texts: Sequence[str]) -> BM25Index:
        """Index ``texts`` (>= 1; rank-bm25 needs >= 3 for idf to be positive anywhere)."""
        texts = _check_texts(texts, "BM25 corpus", allow_blank=True)
        t0 = time.perf_counter_ns()
        tokens = self.tokenize(texts)
        if self.params.implementation == "rank-bm25":
            from rank_bm25 import BM25Okapi

            if not any(tokens):
                raise DataError("BM25 corpus: no document has any token after tokenisation")
            # rank-bm25 divides by the average document length; empty docs are fine otherwise
            self._model = BM25Okapi(
                tokens, k1=self.params.k1, b=self.params.b, epsilon=self.params.resolved_epsilon
            )
        else:
            import bm25s

            model = bm25s.BM25(
                method=self.params.resolved_method,
                idf_method=self.params.idf_method,
                k1=self.params.k1,
                b=self.params.b,
            )
            model.index(tokens, show_progress=False)
            self._model = model
        self._n = len(texts)
        self.build_s = (time.perf_counter_ns() - t0) / 1e9
        log.info(
            "BM25 (%s) indexed %d docs in %.2f s",
            self.params.implementation, self._n, self.build_s,
        )
        return self

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for one query (float64 (n_docs,), >= 0)."""
        if self._model is None:
            raise ConfigError("BM25Index: scores()/search() called before build()")
        tokens = self.tokenize([query])[0]
        if not tokens:
            return np.zeros(self._n, dtype=np.float64)
        # both libraries expose get_scores(list of tokens) -> one score per document
        return np.asarray(self._model.get_scores(tokens), dtype=np.float64)

    def doc_weights(self) -> list[dict[int, float]]:
        """Each document's BM25 weight per term (term id -> bm25s' per-term score: idf, k1, b
        and the document's length folded in), so that the inner product with
        :meth:`query_terms` is :meth:`scores`. bm25s only."""
        if self._model is None:
            raise ConfigError("BM25Index: doc_weights() called before build()")
        if self.params.implementation != "bm25s":
            raise ConfigError("bm25.implementation: a sparse leg takes BM25 weights from "
                              f"'bm25s'; received '{self.params.implementation}'")
        m = self._model.scores
        data, indices, indptr = (np.asarray(m[k]) for k in ("data", "indices", "indptr"))
        docs: list[dict[int, float]] = [{} for _ in range(self._n)]
        for t in range(len(indptr) - 1):
            for j in range(int(indptr[t]), int(indptr[t + 1])):
                docs[int(indices[j])][t] = float(data[j])
        return docs

    def query_terms(self, queries: Sequence[str]) -> list[dict[int, float]]:
        """Each query's count of every indexed term (term id -> count; bm25s only)."""
        if self._model is None or self.params.implementation != "bm25s":
            self.doc_weights()  # the same one-line errors
        vocab = self._model.vocab_dict
        out: list[dict[int, float]] = []
        for toks in self.tokenize(queries):
            counts: dict[int, float] = {}
            for t in toks:
                if t in vocab:
                    counts[int(vocab[t])] = counts.get(int(vocab[t]), 0.0) + 1.0
            out.append(counts)
        return out

    def search(self, queries: Sequence[str], k: int) -> BM25Hits:
        """Top-``k`` documents per query, ties broken by document position (stable)."""
        queries = _check_texts(queries, "BM25 queries", allow_blank=True)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise param_error("k", "an integer >= 1", k, where="BM25Index.search")
        nq = len(queries)
        ids = np.full((nq, k), -1, dtype=np.int64)
        out = np.full((nq, k), -np.inf, dtype=np.float32)
        for i, q in enumerate(queries):
            s = self.scores(q)
            order = np.argsort(-s, kind="stable")[:k]
            order = order[s[order] > 0]
            ids[i, : len(order)] = order
            out[i, : len(order)] = s[order]
        return BM25Hits(doc_idx=ids, scores=out)


def _check_texts(texts: Sequence[str], where: str, *, allow_blank: bool = False) -> list[str]:
    if isinstance(texts, str | bytes):
        raise DataError(f"{where}: expected a sequence of strings, not a single string")
    items = list(texts)
    if not items:
        raise DataError(f"{where}: is empty; at least 1 text is required")
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise DataError(f"{where}: item {i} must be a str; received {type(t).__name__}")
        if not allow_blank and not t.strip():
            raise DataError(f"{where}: item {i} is empty or blank")
    return items


__all__ = ["BM25Hits", "BM25Index", "BM25Params"]
