"""Parameter models of the Milvus backend: one pydantic model per index kind.

:class:`MilvusBuild` is the backend's ``BuildParams``. Validating a mapping against it dispatches
on ``index_type`` (a discriminated union) to the model of that kind, so
``MilvusBuild.model_validate({"index_type": "IVF_FLAT", "nlist": 256})`` returns an
:class:`IvfFlatBuild`; the same happens when ``MilvusBuild`` is a field of a larger spec model.
Every range is checked here, before anything reaches Milvus: Milvus Lite validates nothing
(HNSW ``M=-3`` exhausted the machine's memory, ``nprobe > nlist`` and ``ef < k`` are accepted,
unknown index types are stored and only fail, or get brute-forced, later).

Parameter names are Milvus's own (``M``, ``efConstruction``, ``nlist``, ``ef``, ``nprobe``), so an
exported config reads like a Milvus index definition. Not a backend module: nothing registers
here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from retrieval.errors import ConfigError, param_error
from retrieval.indexes.portable import Auto, Flat, Hnsw, Ivf, Portable
from retrieval.params import Params, validate_params

#: Largest efConstruction accepted (Milvus documents ef in [top_k, 32768] for HNSW).
EF_MAX = 32_768
#: Largest search ef accepted: rwb's cap, as for the other HNSW backends (recall saturates
#: long before; larger values only cost time).
EF_SEARCH_MAX = 4_096
#: Milvus's documented nlist range is [1, 65536].
NLIST_MAX = 65_536
#: Milvus's limit on top-k (``limit``) and on queries per search call.
TOPK_MAX = 16_384

#: Index types Milvus has but Milvus Lite 3.2 does not build (fails at load or silently
#: brute-forces), with the closest supported choice.
UNSUPPORTED_HINTS: dict[str, str] = {
    "IVF_PQ": "IVF_SQ8",
    "IVF_RABITQ": "IVF_SQ8",
    "HNSW_PQ": "HNSW_SQ",
    "HNSW_PRQ": "HNSW_SQ",
    "DISKANN": "HNSW",
    "SCANN": "IVF_FLAT",
    "GPU_CAGRA": "HNSW",
    "GPU_IVF_FLAT": "IVF_FLAT",
    "GPU_IVF_PQ": "IVF_SQ8",
    "GPU_BRUTE_FORCE": "FLAT",
    "BIN_FLAT": "FLAT",
    "BIN_IVF_FLAT": "IVF_FLAT",
    "BRUTE_FORCE": "FLAT",
}


def _field_error(field: str, value: Any, message: str, model: str) -> ValidationError:
    """A ValidationError on one field whose message rwb's formatter prints as is."""
    detail: InitErrorDetails = {
        "type": PydanticCustomError("value_error", "Value error, {msg}", {"msg": message}),
        "loc": (field,),
        "input": value,
    }
    return ValidationError.from_exception_data(model, [detail])


_IN_INIT: ContextVar[bool] = ContextVar("_milvus_build_in_init", default=False)


class MilvusBuild(Params):
    """Build params of the ``milvus`` backend: validating dispatches on ``index_type``.

    Construct a kind directly (``HnswBuild(M=32)``) or validate a mapping
    (``MilvusBuild.model_validate({...})``); ``MilvusBuild()`` alone means the default HNSW
    (resolve it with :func:`resolve_build`).
    """

    index_type: str = "HNSW"
    #: search knob of this kind along which recall is non-decreasing ("" when none)
    knob: ClassVar[str] = ""
    #: "hnsw" | "ivf" | "flat" (the family of this kind)
    family: ClassVar[str] = "hnsw"

    def __init__(self, **data: Any) -> None:
        token = _IN_INIT.set(True)  # pydantic cannot swap the instance created by __init__
        try:
            super().__init__(**data)
        finally:
            _IN_INIT.reset(token)

    @model_validator(mode="wrap")
    @classmethod
    def _dispatch(cls, data: Any, handler: Callable[[Any], Any]) -> Any:
        if cls is not MilvusBuild or not isinstance(data, dict):
            return handler(data)
        raw = data.get("index_type", "HNSW")
        if not isinstance(raw, str):
            raise _field_error(
                "index_type", raw, f"must be one of {', '.join(BUILD_KINDS)}", cls.__name__
            )
        index_type = raw.strip().upper()
        kind = BUILD_KINDS.get(index_type)
        if kind is None:
            raise _field_error("index_type", raw, _unknown_type_message(index_type), cls.__name__)
        if _IN_INIT.get():
            if set(data) <= {"index_type"} and index_type == "HNSW":
                return handler({"index_type": "HNSW"})  # MilvusBuild(): default HNSW
            raise _field_error(
                "index_type", raw, f"construct {kind.__name__}(...) or validate a mapping with "
                "MilvusBuild.model_validate({...}); MilvusBuild(...) cannot change kind",
                cls.__name__,
            )
        for key, value in data.items():
            if key not in kind.model_fields:
                raise _field_error(key, value, _unknown_param_message(key, kind), cls.__name__)
        return kind.model_validate({**data, "index_type": index_type})

    def milvus_params(self) -> dict[str, Any]:
        """The build params as Milvus expects them inside ``params={"params": {...}}``."""
        return self.model_dump(exclude={"index_type"})

    def most_accurate(self) -> dict[str, Any]:
        """Search params giving the highest recall this build allows."""
        return {}

    def knob_bounds(self, k: int) -> tuple[int, int]:
        raise ConfigError(f"milvus index_type {self.index_type} has no search knob")


def _unknown_param_message(key: str, kind: type[MilvusBuild]) -> str:
    known = list(kind.model_fields)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    hint = f". Did you mean '{close[0]}'?" if close else ""
    itype = kind.model_fields["index_type"].default
    return f"unknown parameter for milvus index_type {itype}; allowed: {', '.join(known)}{hint}"


def _unknown_type_message(index_type: str) -> str:
    allowed = ", ".join(BUILD_KINDS)
    if index_type in UNSUPPORTED_HINTS:
        return (
            f"index type {index_type!r} is not supported by rwb's milvus backend (Milvus Lite "
            f"3.2 does not build it: it fails at load or is silently brute-forced); allowed: "
            f"{allowed}. Did you mean '{UNSUPPORTED_HINTS[index_type]}'?"
        )
    close = difflib.get_close_matches(index_type, list(BUILD_KINDS), n=1, cutoff=0.5)
    hint = f". Did you mean '{close[0]}'?" if close else ""
    return f"unknown milvus index type {index_type!r}; allowed: {allowed}{hint}"


class HnswBuild(MilvusBuild):
    """HNSW graph (faiss IndexHNSWFlat in Milvus Lite). Search knob: ``ef``."""

    index_type: Literal["HNSW"] = "HNSW"
    M: int = Field(16, ge=2, le=2048, description="graph degree (links per node)")
    efConstruction: int = Field(200, ge=1, le=EF_MAX, description="build-time beam width")
    knob: ClassVar[str] = "ef"

    def most_accurate(self) -> dict[str, Any]:
        return {"ef": EF_SEARCH_MAX}

    def knob_bounds(self, k: int) -> tuple[int, int]:
        if k > EF_SEARCH_MAX:
            raise ConfigError(
                f"backend 'milvus': field 'k' must be <= {EF_SEARCH_MAX} (the largest ef) for "
                f"index_type {self.index_type}; received {k}"
            )
        return (k, EF_SEARCH_MAX)


class HnswSqBuild(HnswBuild):
    """HNSW over 8-bit scalar-quantised vectors. Milvus Lite 3.2 implements SQ8 only (it would
    silently ignore another ``sq_type``), so only SQ8 is accepted."""

    index_type: Literal["HNSW_SQ"] = "HNSW_SQ"  # type: ignore[assignment]
    sq_type: Literal["SQ8"] = "SQ8"


class IvfFlatBuild(MilvusBuild):
    """Inverted file over k-means cells, exact vectors. Search knob: ``nprobe`` (<= nlist)."""

    index_type: Literal["IVF_FLAT"] = "IVF_FLAT"
    nlist: int = Field(128, ge=1, le=NLIST_MAX, description="number of k-means cells")
    knob: ClassVar[str] = "nprobe"
    family: ClassVar[str] = "ivf"

    def most_accurate(self) -> dict[str, Any]:
        return {"nprobe": self.nlist}

    def knob_bounds(self, k: int) -> tuple[int, int]:
        return (1, self.nlist)


class IvfSq8Build(IvfFlatBuild):
    """Inverted file over 8-bit scalar-quantised vectors. Search knob: ``nprobe``."""

    index_type: Literal["IVF_SQ8"] = "IVF_SQ8"  # type: ignore[assignment]


class FlatBuild(MilvusBuild):
    """Exact search (Milvus Lite's BruteForceIndex). No search params."""

    index_type: Literal["FLAT"] = "FLAT"
    family: ClassVar[str] = "flat"


class AutoBuild(MilvusBuild):
    """Milvus chooses (Milvus Lite 3.2: faiss HNSW, M 16, efConstruction 200, ef 64). rwb exposes
    no search params for it, as Milvus intends."""

    index_type: Literal["AUTOINDEX"] = "AUTOINDEX"


BUILD_KINDS: dict[str, type[MilvusBuild]] = {
    "HNSW": HnswBuild,
    "HNSW_SQ": HnswSqBuild,
    "IVF_FLAT": IvfFlatBuild,
    "IVF_SQ8": IvfSq8Build,
    "FLAT": FlatBuild,
    "AUTOINDEX": AutoBuild,
}

#: The same shape as a plain pydantic discriminated union (for specs that prefer one).
MilvusBuildUnion = Annotated[
    HnswBuild | HnswSqBuild | IvfFlatBuild | IvfSq8Build | FlatBuild | AutoBuild,
    Field(discriminator="index_type"),
]


def resolve_build(build: Params | None) -> MilvusBuild:
    """The kind model for ``build`` (``None`` and a bare ``MilvusBuild()`` mean default HNSW)."""
    if build is None:
        return HnswBuild()
    if type(build) is MilvusBuild:
        return HnswBuild()
    if isinstance(build, MilvusBuild):
        return build
    raise ConfigError(
        f"backend 'milvus': build params must be a milvus build model "
        f"({', '.join(m.__name__ for m in BUILD_KINDS.values())}); received "
        f"{type(build).__name__}"
    )


# --- search params -----------------------------------------------------------------------------
class MilvusSearch(Params):
    """Every search knob of the backend (``SearchParams``); which one applies depends on the
    index type: ``ef`` for HNSW/HNSW_SQ, ``nprobe`` for IVF_FLAT/IVF_SQ8, none for FLAT and
    AUTOINDEX. An instance validates against :class:`HnswSearch` / :class:`IvfSearch` /
    :class:`NoSearch` once the build is known."""

    ef: int | None = Field(None, ge=1, le=EF_SEARCH_MAX, description="HNSW beam width (>= k)")
    nprobe: int | None = Field(None, ge=1, le=NLIST_MAX, description="IVF cells probed")

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dump only the knobs that are set (``{"ef": 64}``, not ``{"ef": 64, "nprobe": None}``)."""
        return {k: v for k, v in handler(self).items() if v is not None}


class HnswSearch(Params):
    ef: int = Field(64, ge=1, le=EF_SEARCH_MAX, description="HNSW beam width; must be >= k")


class IvfSearch(Params):
    nprobe: int = Field(8, ge=1, le=NLIST_MAX, description="IVF cells probed; <= nlist")


class NoSearch(Params):
    pass


def search_model_for(build: MilvusBuild) -> type[Params]:
    if build.knob == "ef":
        return HnswSearch
    if build.knob == "nprobe":
        return IvfSearch
    return NoSearch


def default_search(build: MilvusBuild) -> Params:
    """Default search params of a kind (ef 64 as Milvus; nprobe min(8, nlist))."""
    if isinstance(build, IvfFlatBuild):
        return IvfSearch(nprobe=min(8, build.nlist))
    return search_model_for(build)()


def check_search(build: Params, search: Params, k: int) -> None:
    """The backend's ``check_combination``: ``k`` within Milvus's top-k limit, the search params
    of the build's kind, ``ef >= k`` and ``nprobe <= nlist``."""
    kind = resolve_build(build)
    where = f"backend 'milvus' search params (index_type {kind.index_type})"
    if not isinstance(k, int | np.integer) or not 1 <= int(k) <= TOPK_MAX:
        raise param_error("k", f"an integer in [1, {TOPK_MAX}]", k, where=where)
    values = {key: v for key, v in search.model_dump().items() if v is not None}
    sp = validate_params(search_model_for(kind), values, where=where)
    ef = getattr(sp, "ef", None)
    if ef is not None and ef < k:
        note = "" if "ef" in values else " (the default ef; set ef explicitly)"
        raise param_error("ef", f">= k ({k}){note}", ef, where=where)
    nprobe = getattr(sp, "nprobe", None)
    if nprobe is not None and isinstance(kind, IvfFlatBuild) and nprobe > kind.nlist:
        raise param_error("nprobe", f"<= nlist ({kind.nlist})", nprobe, where=where)


def merge_search(kind: MilvusBuild, current: Params, params: Mapping[str, Any]) -> Params:
    """The backend's ``set_search_params``: ``params`` (``None`` values ignored) over ``current``,
    validated against the knobs of ``kind`` (``ef`` / ``nprobe`` / none; ``nprobe <= nlist``)."""
    where = f"backend 'milvus' search params (index_type {kind.index_type})"
    given = {key: v for key, v in params.items() if v is not None}  # MilvusSearch's Nones
    if given and not kind.knob:
        raise ConfigError(
            f"{where}: index_type {kind.index_type} takes no search params (allowed: none); "
            f"received {sorted(given)}"
        )
    merged = {**current.model_dump(), **given}
    sp = validate_params(search_model_for(kind), merged, where=where)
    nprobe = getattr(sp, "nprobe", None)
    if isinstance(kind, IvfFlatBuild) and nprobe is not None and nprobe > kind.nlist:
        raise param_error("nprobe", f"<= nlist ({kind.nlist})", nprobe, where=where)
    return sp


def portable_of(build: Mapping[str, Any], search: Mapping[str, Any]) -> Portable | None:
    """The neutral form of a Milvus index (HNSW, HNSW_SQ, IVF_FLAT, IVF_SQ8, FLAT, AUTOINDEX);
    None for an index type without one."""
    b, s = build, search
    kind = str(b.get("index_type", "HNSW")).upper()
    if kind in ("HNSW", "HNSW_SQ"):
        quant = "SQ8" if kind == "HNSW_SQ" else None
        return Hnsw(int(b["M"]), int(b["efConstruction"]), int(s["ef"]), quant)
    if kind in ("IVF_FLAT", "IVF_SQ8"):
        enc = "sq8" if kind == "IVF_SQ8" else "flat"
        return Ivf(int(b["nlist"]), int(s["nprobe"]), enc)
    if kind == "FLAT":
        return Flat()
    if kind == "AUTOINDEX":
        return Auto()
    return None
