"""Inverted-file index from Faiss: IVF-Flat, IVF-SQ8 or IVF-PQ, with an optional exact refine.

The index is built from its factory string (:meth:`FaissIvfIndex.factory_string`, e.g.
``IVF256,PQ16x8np,RFlat``), so the exported string is exactly what was measured. k-means (coarse
quantizer and PQ codebooks) is seeded with ``seed`` and trained on ``train_size`` vectors drawn
with the same seed; with one build thread the build is reproducible (``build_threads`` is set
with ``faiss.omp_set_num_threads`` around the build, ``threads`` for searches). Search params
travel with each call (``SearchParametersIVF`` / ``IndexRefineSearchParameters``): no shared
mutable state.

``PQ..np`` disables Faiss's polysemous training, which only serves polysemous filtering (not used
here) and costs tens of seconds per build.

Snapshots are Faiss's own ``write_index`` file. Builds with the same data, ``nlist``, metric,
training sample and seed share one trained coarse quantizer whatever their encoding or refine
(:meth:`FaissIvfIndex.share_training`): the first build trains it, the others add its
centroids to their quantizer before ``train``, which Faiss then skips for the quantizer
(``IndexIVF::train``: a trained quantizer holding ``nlist`` centroids is not re-trained) and
spends only on the encoding.

Writes (:class:`~retrieval.indexes.base.SupportsWrites`): inserts are ``add_with_ids`` (into
the lists of the trained quantizer: the centroids do not move, so data that drifts away from
them costs recall), deletes ``remove_ids`` (the codes leave the lists at once: nothing to
maintain). A refined build (``IndexRefineFlat``) cannot remove vectors and refuses writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from retrieval.engines.faiss import common as fc
from retrieval.errors import ConfigError, param_error
from retrieval.filtering.rows import RowFilter
from retrieval.indexes.base import BuildInfo, MemoryClaim
from retrieval.indexes.filter_common import InProcessFilter
from retrieval.indexes.inprocess import SnapshotIndex, check_k, unknown_knob
from retrieval.indexes.portable import Ivf
from retrieval.indexes.registry import register
from retrieval.indexes.writes import SnapshotSlotWrites
from retrieval.params import Params

log = logging.getLogger(__name__)

NLIST_MAX = 1 << 20
K_FACTOR_MAX = 64
#: Faiss warns below this many training points per centroid
MIN_POINTS_PER_CENTROID = 39
#: default training sample: this many vectors per list (Faiss's own subsampling cap)
TRAIN_PER_LIST = 256


class IvfBuild(Params):
    """IVF build parameters.

    - ``nlist``: number of inverted lists (k-means centroids); must be <= the number of vectors.
    - ``encoding``: how vectors are stored in the lists: ``flat`` (float32, exact distances),
      ``sq8`` / ``sq4`` (8- / 4-bit scalar quantizer), ``pq`` (product quantizer, ``pq_m``
      sub-vectors of ``pq_nbits`` bits; ``pq_m`` must divide the dimension), ``rabitq``
      (Faiss 1.15 ``RaBitQ``: 1 bit per dimension plus two float factors per vector).
    - ``refine``: re-rank ``k * k_factor`` candidates with exact distances (``IndexRefineFlat``,
      keeps a float32 copy of the vectors).
    - ``train_size``: vectors used to train (default ``min(n, 256 * nlist)``).
    """

    nlist: int = Field(256, ge=1, le=NLIST_MAX)
    encoding: Literal["flat", "sq8", "sq4", "pq", "rabitq"] = "flat"
    pq_m: int | None = Field(None, ge=1, le=4096, validate_default=True)
    pq_nbits: int = Field(8, ge=1, le=16)
    refine: bool = False
    train_size: int | None = Field(None, ge=1)

    @field_validator("pq_m")
    @classmethod
    def _pq_m_needs_pq(cls, v: int | None, info: ValidationInfo) -> int | None:
        enc = info.data.get("encoding")
        if enc == "pq" and v is None:
            raise ValueError("must be given when encoding is 'pq' (sub-quantizers; divides dim)")
        if enc is not None and enc != "pq" and v is not None:
            raise ValueError(f"applies only when encoding is 'pq' (encoding is '{enc}')")
        return v

    @field_validator("pq_nbits")
    @classmethod
    def _pq_nbits_needs_pq(cls, v: int, info: ValidationInfo) -> int:
        enc = info.data.get("encoding")
        # the default (8) is accepted for any encoding so that a dumped config validates again
        if enc is not None and enc != "pq" and v != 8:
            raise ValueError(f"applies only when encoding is 'pq' (encoding is '{enc}')")
        return v


class IvfSearch(Params):
    """``nprobe``: lists visited per query (1..nlist); ``k_factor``: with ``refine``, the base
    index returns ``k * k_factor`` candidates re-ranked exactly (must stay 1 without refine)."""

    nprobe: int = Field(1, ge=1, le=NLIST_MAX)
    k_factor: int = Field(1, ge=1, le=K_FACTOR_MAX)


#: Faiss factory code of each encoding (pq: ``PQ{m}x{nbits}np``)
ENCODING_CODES = {"flat": "Flat", "sq8": "SQ8", "sq4": "SQ4", "rabitq": "RaBitQ"}
#: codes whose lists hold exact vectors: recall at nprobe is fixed by the coarse partition
PARTITION_CODES = ("Flat",)


def code_bytes(build: IvfBuild, dim: int) -> float:
    """Bytes of one vector's code in the inverted lists (what the encoding claims)."""
    if build.encoding == "flat":
        return 4.0 * dim
    if build.encoding == "sq8":
        return float(dim)
    if build.encoding == "sq4":
        return (dim + 1) // 2
    if build.encoding == "rabitq":
        return (dim + 7) // 8 + 8.0  # sign bits + two float32 factors (Faiss RaBitQ, 1 bit)
    assert build.pq_m is not None
    return (build.pq_m * build.pq_nbits + 7) // 8


def _build_where(name: str) -> str:
    return f"backend '{name}' build params"


@register
class FaissIvfIndex(fc.MappedOpen, SnapshotSlotWrites, InProcessFilter, SnapshotIndex):
    reads_chunks = True  # a mapped base is fed through base_chunks
    name = "faiss-ivf"
    bench_defaults = ({"nlist": 128}, {"nprobe": 16})
    snapshot_format = "faiss write_index"
    #: where trained coarse quantizers are shared (see :meth:`share_training`)
    _trained: Any = None
    export_engine = "faiss"
    _params: Any = None
    _ivf_params: Any = None
    _params_for: Any = None
    family = "ivf"
    BuildParams = IvfBuild
    SearchParams = IvfSearch
    monotone_knobs = ("nprobe", "k_factor")
    requires = ("faiss",)

    _index: Any = None

    @classmethod
    def library_version(cls) -> str:
        return fc.version()

    @classmethod
    def portable(cls, build: Mapping[str, Any], search: Mapping[str, Any]) -> Ivf:
        """Export mapping: lists, probes, encoding and refine as Faiss built them."""
        b, s = build, search
        return Ivf(
            nlist=int(b["nlist"]),
            nprobe=int(s.get("nprobe", 1)),
            encoding=str(b.get("encoding", "flat")),
            pq_m=b.get("pq_m"),
            pq_nbits=int(b.get("pq_nbits", 8)),
            refine=bool(b.get("refine", False)),
            k_factor=int(s.get("k_factor", 1)),
        )

    # --- class-level checks ----------------------------------------------------------------
    @classmethod
    def check_build_params(cls, build: Params, dim: int) -> None:
        assert isinstance(build, IvfBuild)
        if build.encoding == "pq" and build.pq_m is not None and dim % build.pq_m:
            raise param_error("pq_m", f"a divisor of the dimension {dim}", build.pq_m,
                              where=_build_where(cls.name))

    @classmethod
    def check_combination(cls, build: Params, search: Params, k: int) -> None:
        """``nprobe <= nlist`` (Faiss would clamp silently); ``k_factor == 1`` unless refine."""
        assert isinstance(build, IvfBuild) and isinstance(search, IvfSearch)
        where = f"backend '{cls.name}' search params"
        check_k(k, where)
        if search.nprobe > build.nlist:
            raise param_error("nprobe", f"in [1, nlist={build.nlist}]", search.nprobe,
                              where=where)
        if search.k_factor != 1 and not build.refine:
            raise param_error("k_factor", "1 when build param refine is false", search.k_factor,
                              where=where)

    @classmethod
    def most_accurate_search(cls, build: Params) -> dict[str, Any]:
        assert isinstance(build, IvfBuild)
        return {"nprobe": build.nlist, "k_factor": K_FACTOR_MAX if build.refine else 1}

    @classmethod
    def knob_range(cls, knob: str, build: Params, k: int) -> tuple[int, int]:
        """nprobe in [1, nlist]; k_factor in [1, 64] with refine, else [1, 1]."""
        assert isinstance(build, IvfBuild)
        check_k(k, f"backend '{cls.name}' knob_range")
        if knob == "nprobe":
            return 1, build.nlist
        if knob == "k_factor":
            return 1, K_FACTOR_MAX if build.refine else 1
        raise unknown_knob(cls, knob)

    # --- export ------------------------------------------------------------------------------
    @classmethod
    def factory_string(cls, build: Params) -> str:
        """Faiss ``index_factory`` string, e.g. ``IVF1024,SQ8`` or ``IVF256,PQ16x8np,RFlat``
        (the metric is passed to the factory separately)."""
        assert isinstance(build, IvfBuild)
        code = ENCODING_CODES.get(build.encoding)
        if code is None:
            code = f"PQ{build.pq_m}x{build.pq_nbits}np"
        return f"IVF{build.nlist},{code}" + (",RFlat" if build.refine else "")

    @classmethod
    def parameter_space_string(cls, search: Params, build: Params | None = None) -> str:
        """Faiss ``ParameterSpace`` string, e.g. ``nprobe=16`` or ``nprobe=16,k_factor_rf=4``
        (``k_factor_rf`` is Faiss's name for the refine factor of ``IndexRefine``)."""
        assert isinstance(search, IvfSearch)
        text = f"nprobe={search.nprobe}"
        if isinstance(build, IvfBuild) and build.refine:
            text += f",k_factor_rf={search.k_factor}"
        return text

    # --- build / search ----------------------------------------------------------------------
    def _train_rows(self, n: int) -> np.ndarray | None:
        """Row numbers of the training sample (None = all rows); checks the sample is enough."""
        p = self.build_params
        assert isinstance(p, IvfBuild)
        where = _build_where(self.name)
        if p.nlist > n:
            raise param_error("nlist", f"<= the number of vectors ({n})", p.nlist, where=where)
        wanted = p.train_size if p.train_size is not None else TRAIN_PER_LIST * p.nlist
        if wanted > n:
            if p.train_size is not None:
                log.info("%s: train_size %d > n=%d; training on all vectors", self.name, wanted, n)
            wanted = n
        if wanted < p.nlist:
            raise param_error("train_size", f">= nlist ({p.nlist})", wanted, where=where)
        if p.encoding == "pq" and wanted < 2**p.pq_nbits:
            raise ConfigError(
                f"{where}: field 'train_size' must be >= 2**pq_nbits = {2**p.pq_nbits} to train "
                f"the PQ codebooks; received {wanted} (training vectors available)"
            )
        if wanted < MIN_POINTS_PER_CENTROID * p.nlist:
            log.warning("%s: %d training vectors for nlist=%d (faiss advises >= %d per list)",
                        self.name, wanted, p.nlist, MIN_POINTS_PER_CENTROID)
        if wanted == n:
            return None
        rng = np.random.default_rng(self.seed)
        return np.sort(rng.choice(n, size=wanted, replace=False))

    def share_training(self, store: Any) -> None:
        """Take and give trained coarse quantizers through ``store`` (a
        :class:`retrieval.indexes.buildcache.TrainedStore`: ``get(key)`` -> centroids or None,
        ``put(key, centroids)``)."""
        self._trained = store

    def _quantizer_key(self, rows: np.ndarray | None, n: int) -> dict[str, Any]:
        p = self.build_params
        assert isinstance(p, IvfBuild)
        return {
            "kind": "faiss-ivf coarse quantizer", "library_version": fc.version(), "dim": self.dim,
            "metric": self.metric, "n": n, "nlist": p.nlist, "seed": self.seed,
            "train_rows": "all" if rows is None else int(rows.shape[0]),
        }

    def _new_index(self) -> tuple[Any, Any]:
        """The untrained Faiss index of the build params and its ``IndexIVF`` (k-means seeded
        with ``seed``; Faiss's points-per-centroid advice logged by rwb, not on stderr)."""
        faiss = fc.faiss_module()
        p = self.build_params
        assert isinstance(p, IvfBuild)
        index = faiss.index_factory(self.dim, self.factory_string(p), fc.faiss_metric(self.metric))
        ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
        ivf.cp.seed = self.seed
        ivf.cp.min_points_per_centroid = 1  # we log the advice instead of faiss's stderr
        if p.encoding == "pq":
            ivf.pq.cp.seed = self.seed
            ivf.pq.cp.min_points_per_centroid = 1
        return index, ivf

    @classmethod
    def partition_codes(cls) -> tuple[str, ...]:
        """The Faiss codes whose lists hold exact vectors (the partition model covers them)."""
        return PARTITION_CODES

    def partition_gap(self, knob: str) -> str | None:
        """None when recall at ``nprobe`` is fixed by the coarse partition (encoding ``flat``:
        exact distances inside the probed lists; refine changes nothing then); else why not."""
        p = self.build_params
        assert isinstance(p, IvfBuild)
        if knob != "nprobe":
            return f"the knob is {knob}, not nprobe"
        code = ENCODING_CODES.get(p.encoding) or f"PQ{p.pq_m}x{p.pq_nbits}"
        if code not in PARTITION_CODES:
            return (f"encoding {p.encoding} ({code}) stores approximate codes: recall at a "
                    f"given nprobe also depends on the code's distance error (covered: "
                    f"{', '.join(PARTITION_CODES)})")
        return None

    def coarse_partition(self, train: np.ndarray) -> Any:
        """The coarse quantizer trained on ``train`` as :meth:`_build` trains it (the same
        training subsample rule, seed and metric handling), lists left empty
        (:class:`~retrieval.engines.faiss.partition.FaissPartition`). With a store from
        :meth:`share_training`, a quantizer trained on the same rows is taken from it, and
        one trained here is given to it (a later build of those rows skips its k-means)."""
        from retrieval.engines.faiss.partition import FaissPartition

        p = self.build_params
        assert isinstance(p, IvfBuild)
        n = int(train.shape[0])
        rows = self._train_rows(n)
        index, ivf = self._new_index()
        qkey, shared = self._take_quantizer(ivf, rows, n)
        if not shared:  # not trained yet by a build or a partition of the same rows
            xt = fc.train_rows(train, rows, self.metric)
            with fc.omp_threads(self.build_threads, after=self.threads):
                ivf.train(xt)  # the quantizer (and codes)
            self._keep_quantizer(qkey, ivf)  # a build of the same rows takes it
        used = n if rows is None else int(rows.shape[0])
        return FaissPartition(ivf.quantizer, p.nlist, self.metric, index, used)

    def _take_quantizer(self, ivf: Any, rows: np.ndarray | None, n: int) -> tuple[Any, bool]:
        """The key this build's quantizer is shared under (None without a store from
        :meth:`share_training`) and whether one trained on the same rows was taken from the
        store into ``ivf`` (its k-means then skipped)."""
        qkey = self._quantizer_key(rows, n) if self._trained is not None else None
        shared = self._trained.get(qkey) if qkey is not None else None
        if shared is not None:
            ivf.quantizer.add(np.ascontiguousarray(shared, dtype=np.float32))
        return qkey, shared is not None

    def _keep_quantizer(self, qkey: Any, ivf: Any) -> None:
        """Give ``ivf``'s trained quantizer to the store under ``qkey`` (no store: nothing)."""
        if qkey is not None and self._trained is not None:
            self._trained.put(qkey, ivf.quantizer.reconstruct_n(0, ivf.nlist))

    def _build(self, x: np.ndarray) -> dict[str, Any]:
        p = self.build_params
        assert isinstance(p, IvfBuild)
        rows = self._train_rows(x.shape[0])
        factory = self.factory_string(p)
        index, ivf = self._new_index()
        xt = fc.train_rows(x, rows, self.metric)
        qkey, shared = self._take_quantizer(ivf, rows, x.shape[0])
        with fc.omp_threads(self.build_threads, after=self.threads):
            index.train(xt)  # with a shared quantizer: only the encoding is trained
            fc.add_rows(index, x, self.metric)
        if not shared:
            self._keep_quantizer(qkey, ivf)
        self._index = index
        self._ivf = ivf
        return {
            "factory": factory,
            "train_size": int(xt.shape[0]),
            "imbalance_factor": float(ivf.invlists.imbalance_factor()),
            "shared_quantizer": shared,
        }

    @classmethod
    def derived_param(cls) -> str:
        """A smaller ``nlist`` is derived from a built larger one (other params equal)."""
        return "nlist"

    def derive_from(self, source: Any, base: Any = None) -> BuildInfo:
        """This build (``nlist`` smaller than ``source``'s, every other param equal) derived
        from a built :class:`FaissIvfIndex` by hierarchical merging: the source's centroids
        clustered into ``nlist`` by k-means weighted by list size, then every row of ``base``
        (the vectors the source was built on) reassigned to the merged lists; the encoding is
        trained as in a build (:mod:`retrieval.engines.faiss.derive_ivf`). ``build_s``: the
        whole derivation's seconds (merge, encoding training and reassignment)."""
        import time

        from retrieval.engines.faiss.derive_ivf import derive_ivf

        self._check_open()
        p, q = self.build_params, getattr(source, "build_params", None)
        assert isinstance(p, IvfBuild)
        same = (isinstance(q, IvfBuild)
                and q.model_dump(exclude={"nlist"}) == p.model_dump(exclude={"nlist"}))
        if (not isinstance(source, FaissIvfIndex) or source._index is None or not same
                or not isinstance(q, IvfBuild) or q.nlist < p.nlist or base is None):
            raise ConfigError(f"{self._where()}: a derived build needs a built {self.name} "
                              f"with nlist >= {p.nlist}, the same other build params, and "
                              f"its base vectors")
        if self._built:
            self._release()
        t0 = time.perf_counter()
        rows = self._train_rows(int(base.shape[0]))
        index, ivf = self._new_index()
        with fc.omp_threads(self.build_threads, after=self.threads):
            merge_s = derive_ivf(source._ivf, index, ivf, p.nlist, self.metric, self.seed)
            index.train(fc.train_rows(base, rows, self.metric))  # the encoding only
            fc.add_rows(index, base, self.metric)
        self._index, self._ivf = index, ivf
        return self._adopt(int(base.shape[0]), time.perf_counter() - t0, {
            "factory": self.factory_string(p), "merge_s": merge_s,
            "imbalance_factor": float(ivf.invlists.imbalance_factor()),
            "derived_from": {"nlist": q.nlist}})

    def _save_files(self, folder: Path) -> list[str]:
        return fc.write_index(self._index, folder)

    def _load_files(self, folder: Path, n: int) -> None:
        faiss = fc.faiss_module()
        index = fc.read_index(folder, n, self.dim, self.metric, self._where(),
                                   mmap=self._mmap)
        self._index = index
        self._ivf = faiss.downcast_index(faiss.extract_index_ivf(index))

    def _search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        p, sp = self.build_params, self.search_params
        if self._params_for is not sp:  # one SWIG params object per search config, not per call
            faiss = fc.faiss_module()
            assert isinstance(p, IvfBuild) and isinstance(sp, IvfSearch)
            faiss.omp_set_num_threads(self.threads)
            # keep ivf_params alive: the refine params hold only a raw pointer to it
            self._ivf_params = faiss.SearchParametersIVF(nprobe=sp.nprobe)
            self._params = self._ivf_params
            if p.refine:
                self._params = faiss.IndexRefineSearchParameters(
                    k_factor=float(sp.k_factor), base_index_params=self._ivf_params
                )
            self._params_for = sp
        d, i = self._index.search(fc.prepare(x, self.metric), k, params=self._params)
        res = fc.to_result(d, i, self.metric)
        return res.distances, res.ids

    def _filtered(self, x: np.ndarray, k: int, flt: RowFilter) -> tuple[np.ndarray, np.ndarray]:
        """``SearchParametersIVF(nprobe, sel=IDSelectorBitmap)`` (under the refine params when
        the build refines): the lists visited are scanned for matching ids only."""
        p, sp = self.build_params, self.search_params
        assert isinstance(p, IvfBuild) and isinstance(sp, IvfSearch)
        faiss = fc.faiss_module()
        sel = fc.faiss_selector(flt)  # kept alive for the call
        ivf_params = faiss.SearchParametersIVF(nprobe=sp.nprobe, sel=sel)
        params = ivf_params
        if p.refine:
            params = faiss.IndexRefineSearchParameters(
                k_factor=float(sp.k_factor), base_index_params=ivf_params)
        d, i = self._index.search(fc.prepare(x, self.metric), k, params=params)
        res = fc.to_result(d, i, self.metric)
        return res.distances, res.ids

    def _hot(
        self, k: int
    ) -> tuple[Callable[[np.ndarray], Any], Callable[[Any], tuple[np.ndarray, np.ndarray]]]:
        self._search(np.zeros((1, self.dim), dtype=np.float32), k)  # caches the params object
        return fc.hot_call(self._index, self._params, k, self.metric)

    def memory_claim(self) -> MemoryClaim:
        """Code bytes + an int64 id per vector, + the float32 refine copy (in RAM) with refine."""
        p = self.build_params
        assert isinstance(p, IvfBuild)
        per = code_bytes(p, self.dim) + 8.0 + (4.0 * self.dim if p.refine else 0.0)
        name = ENCODING_CODES.get(p.encoding) or f"PQ{p.pq_m}x{p.pq_nbits}"
        return MemoryClaim(per, name + (" + RFlat" if p.refine else ""),
                           "ram" if p.refine else None)

    def memory_bytes(self) -> int:
        """Size in bytes of the serialized index (``faiss.serialize_index``): centroids, codes,
        ids and, with refine, the float32 copy; measured from the built structure."""
        return 0 if self._index is None else fc.serialized_bytes(self._index)

    def _release(self) -> None:
        self._index = None
        self._ivf = None

    # --- writes (SlotWrites hooks) -------------------------------------------------------------
    def cannot_write(self) -> str | None:
        p = self.build_params
        assert isinstance(p, IvfBuild)
        if p.refine:
            return ("Faiss IndexRefineFlat (refine: true) cannot remove vectors; build without "
                    "refine")
        return None

    def _built_count(self) -> int:
        return self._n

    def _check_writable(self) -> None:
        self._check_open()
        if not self._built:
            raise ConfigError(f"{self._where()}: insert/delete called before build()")

    def _after_writes(self, live: int) -> None:
        self._n = live

    def _insert_rows(self, x: np.ndarray, slots: np.ndarray) -> None:
        with fc.omp_threads(self.build_threads, after=self.threads):
            self._index.add_with_ids(fc.prepare(x, self.metric), slots)

    def _delete_rows(self, slots: np.ndarray) -> None:
        removed = int(self._index.remove_ids(np.ascontiguousarray(slots, dtype=np.int64)))
        if removed != slots.shape[0]:
            raise RuntimeError(f"{self._where()}: removed {removed} of {slots.shape[0]} vectors")
