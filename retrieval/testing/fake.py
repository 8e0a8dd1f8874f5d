"""A fake index whose recall and latency follow a known curve: for testing tuners exactly.

Importing this module registers backend ``"fake"`` (it lives outside ``retrieval.indexes`` so it
is never discovered by default).

Recall. For every query the index computes the exact top-k by brute force (Faiss ``IndexFlat``,
the same way ground truth is computed) and keeps the first ``hits`` of them, where::

    hits(ef) = min(k, floor(k * quality * ef / (ef + half_ef)))

computed in exact rational arithmetic (``fractions.Fraction`` of the float ``quality``). The
other ``k - hits`` slots get the farthest base vectors from the query (never true neighbours),
so every query has recall@k exactly ``hits / k`` = :func:`fake_recall` ``(ef, quality, k,
half_ef)`` (and the mean over queries equals it up to float summation, ~1e-15): a non-decreasing
step function of ``ef`` (steps of 1/k), reaching 1.0 only when ``quality > 1``. "Exactly" assumes
``k <= n`` and no floating-point tie between a query's k-th and (k+1)-th true neighbour.

Per-query spread (build param ``spread``, default 0: the exact curve above). With ``spread = s >
0`` queries differ: each query keeps ``hits + s`` or ``hits - s`` true neighbours (clipped to
``[0, k]``), decided by a fair coin per query that is a pure function of the query vector and
``seed`` (a keyed BLAKE2b hash of its bytes rounded to 3 decimals, :func:`fake_coins`), so
single-query and batch searches agree and a query set's recall is known in advance
(:func:`fake_query_recall`).
Where ``s <= hits <= k - s`` the expected recall is still :func:`fake_recall` while each query's
is ``(hits +- s) / k``: lower confidence bounds fall below the mean, and a tuning and a held-out
split of the queries can disagree (about half of the queries of each are "hard").

Latency. After answering, each ``search`` call busy-waits ``nq * ef_search * us_per_ef``
microseconds (:func:`fake_latency_us`), so latency grows with ef (on top of the brute-force cost,
which does not depend on ef).
"""

from __future__ import annotations

import hashlib
import math
import time
from fractions import Fraction
from typing import Any

import numpy as np
from pydantic import Field

from retrieval.engines.faiss import common as fc
from retrieval.indexes.inprocess import InProcessIndex, check_k, unknown_knob
from retrieval.indexes.registry import register
from retrieval.params import Params

EF_MAX = 4096
_CHUNK = 256  # queries per chunk when computing distances to every base vector


def fake_hits(ef: int, quality: float, k: int, half_ef: int = 16) -> int:
    """True neighbours kept per query: ``min(k, floor(k * quality * ef / (ef + half_ef)))``."""
    value = Fraction(k) * Fraction(quality) * Fraction(ef, ef + half_ef)
    return max(0, min(k, math.floor(value)))


def fake_recall(ef: int, quality: float, k: int, half_ef: int = 16) -> float:
    """Exact mean recall@k the fake index returns at ``ef_search = ef`` (see module doc)."""
    return fake_hits(ef, quality, k, half_ef) / k


def fake_coins(queries: np.ndarray, seed: int = 0) -> np.ndarray:
    """+1 ("easy") or -1 ("hard") per query row: a fair coin that depends only on the row's
    bytes (rounded to 3 decimals, so the same on every CPU) and ``seed`` (the first bit of a
    BLAKE2b hash keyed with the seed)."""
    # rounded first: the last bits of generated or normalised floats differ between CPUs (AVX2 vs
    # AVX-512 code paths), and the coin must not
    x = np.ascontiguousarray(np.round(np.atleast_2d(queries).astype(np.float64), 3))
    key = int(seed).to_bytes(8, "little", signed=True)
    bits = [hashlib.blake2b(row.tobytes(), digest_size=1, key=key).digest()[0] & 1 for row in x]
    return np.where(np.asarray(bits, dtype=np.int64) == 1, 1, -1).astype(np.int64)


def fake_query_hits(
    queries: np.ndarray, ef: int, quality: float, k: int, half_ef: int = 16, spread: int = 0,
    seed: int = 0,
) -> np.ndarray:
    """True neighbours the fake keeps for each query row: ``fake_hits + coin * spread`` in
    ``[0, k]`` (every query gets :func:`fake_hits` when ``spread`` is 0)."""
    hits = fake_hits(ef, quality, k, half_ef)
    n = np.atleast_2d(queries).shape[0]
    if spread == 0:
        return np.full(n, hits, dtype=np.int64)
    return np.clip(hits + fake_coins(queries, seed) * spread, 0, k)


def fake_query_recall(
    queries: np.ndarray, ef: int, quality: float, k: int, half_ef: int = 16, spread: int = 0,
    seed: int = 0,
) -> np.ndarray:
    """Recall@k the fake returns for each query row (see :func:`fake_query_hits`)."""
    return fake_query_hits(queries, ef, quality, k, half_ef, spread, seed) / k


def fake_half_ef(half_ef: int, per_1k: float, n: int) -> int:
    """The ``half_ef`` of a build on ``n`` base vectors: ``half_ef``, or with ``per_1k`` > 0
    ``max(1, round(per_1k * n / 1000))``."""
    return int(half_ef) if per_1k <= 0 else max(1, round(per_1k * n / 1000))


def fake_latency_us(ef: int, us_per_ef: float, nq: int = 1) -> float:
    """Busy-wait (microseconds) one search call of ``nq`` queries adds at ``ef_search = ef``."""
    return nq * ef * us_per_ef


class FakeBuild(Params):
    """``quality``: scale of the recall curve (> 1 lets recall reach 1.0); ``half_ef``: the ef at
    which the curve is at half of ``quality``; ``us_per_ef``: busy-wait per query per unit of
    ef, microseconds; ``spread``: per-query offset of the true neighbours kept (+- spread by a
    seeded coin per query, see the module doc; 0 = every query on the curve); ``seed``: the
    coin's key; ``half_ef_per_1k`` > 0: ``half_ef`` is instead this much per 1,000 base
    vectors (rounded, at least 1): the knob the target needs then grows in proportion to the
    base size N (a scale study's fixture; 0 = ``half_ef`` at every N)."""

    quality: float = Field(1.0, gt=0.0, le=2.0)
    half_ef: int = Field(16, ge=1, le=1_000_000)
    half_ef_per_1k: float = Field(0.0, ge=0.0, le=1_000_000.0)
    us_per_ef: float = Field(1.0, ge=0.0, le=1000.0)
    spread: int = Field(0, ge=0, le=1000)
    seed: int = Field(0, ge=0, le=2**31 - 1)


class FakeSearch(Params):
    ef_search: int = Field(64, ge=1, le=EF_MAX)


def _busy_wait_ns(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


@register
class FakeIndex(InProcessIndex):
    name = "fake"
    family = "fake"
    BuildParams = FakeBuild
    SearchParams = FakeSearch
    monotone_knobs = ("ef_search",)
    requires = ("faiss",)

    _flat: Any = None
    _base: np.ndarray | None = None
    _half_ef: int = 16

    @classmethod
    def library_version(cls) -> str:
        return f"fake (faiss {fc.version()})"

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        check_k(k, f"backend '{cls.name}' search params")

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        return {"ef_search": EF_MAX}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """ef_search in [1, 4096] (the fake accepts ef_search < k)."""
        if knob != "ef_search":
            raise unknown_knob(cls, knob)
        check_k(k, f"backend '{cls.name}' knob_range")
        return 1, EF_MAX

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        faiss = fc.faiss_module()
        base = fc.prepare(x, self.metric)
        flat = faiss.IndexFlatL2(self.dim) if self.metric == "l2" else faiss.IndexFlatIP(self.dim)
        flat.add(base)
        self._flat, self._base = flat, base
        p = self.build_params
        assert isinstance(p, FakeBuild)
        self._half_ef = fake_half_ef(p.half_ef, p.half_ef_per_1k, base.shape[0])
        return {}

    def _far(self, q: np.ndarray, near: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``m`` farthest base rows per query (excluding ``near``), ascending; rwb distances."""
        base = self._base
        assert base is not None
        n, nq = base.shape[0], q.shape[0]
        m_avail = max(0, min(m, n - near.shape[1]))
        ids = np.full((nq, m), -1, dtype=np.int64)
        dist = np.full((nq, m), np.inf, dtype=np.float32)
        if m_avail == 0:
            return dist, ids
        b64 = base.astype(np.float64)
        for s in range(0, nq, _CHUNK):
            qc = q[s:s + _CHUNK].astype(np.float64)
            ip = qc @ b64.T
            if self.metric == "l2":
                d = (b64**2).sum(1)[None, :] - 2 * ip + (qc**2).sum(1)[:, None]
            else:
                d = -ip if self.metric == "ip" else 1.0 - ip
            np.put_along_axis(d, np.maximum(near[s:s + _CHUNK], 0), -np.inf, axis=1)
            top = np.argpartition(-d, m_avail - 1, axis=1)[:, :m_avail]
            td = np.take_along_axis(d, top, axis=1)
            order = np.argsort(td, axis=1, kind="stable")
            ids[s:s + _CHUNK, :m_avail] = np.take_along_axis(top, order, axis=1)
            dist[s:s + _CHUNK, :m_avail] = np.take_along_axis(td, order, axis=1)
        return dist, ids

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        p, sp = self.build_params, self.search_params
        assert isinstance(p, FakeBuild) and isinstance(sp, FakeSearch)
        q = fc.prepare(x, self.metric)
        d, i = self._flat.search(q, k)
        res = fc.to_result(d, i, self.metric)
        hits = fake_query_hits(x, sp.ef_search, p.quality, k, self._half_ef, p.spread, p.seed)
        dist, ids = res.distances.copy(), res.ids.copy()
        low = int(hits.min()) if hits.size else k
        if low < k:
            far_d, far_i = self._far(q, res.ids, k - low)
            # slot j >= hits[row] of a row takes its (j - hits[row])-th farthest vector
            pos = np.arange(k)[None, :] - hits[:, None]
            miss = pos >= 0
            src = np.clip(pos, 0, k - low - 1)
            dist = np.where(miss, np.take_along_axis(far_d, src, axis=1), dist)
            ids = np.where(miss, np.take_along_axis(far_i, src, axis=1), ids)
        _busy_wait_ns(int(fake_latency_us(sp.ef_search, p.us_per_ef, q.shape[0]) * 1000))
        return dist, ids

    def memory_bytes(self) -> int:
        """Serialized size (bytes) of the brute-force Faiss index it holds."""
        return 0 if self._flat is None else fc.serialized_bytes(self._flat)

    def _release(self) -> None:
        self._flat, self._base = None, None
