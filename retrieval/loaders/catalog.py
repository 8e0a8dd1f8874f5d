"""Named datasets: one YAML manifest per dataset in the folders of
:func:`retrieval.paths.manifests_dirs` ($RWB_DATASETS_DIR's folders first, then the built-in ones).

A manifest is a mapping with a ``kind`` (``synthetic``, ``hdf5``, ``texmex``, ``npy``, ``text``)
and that kind's fields (see ``datasets/README.md``); its name is the file stem. Relative file
paths are resolved against the manifest's folder (inline specs: against ``base_dir`` or the
current directory). Unknown fields, kinds and names are ConfigErrors naming the file and field.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from retrieval.data import Metric, TextCollection, VectorDataset
from retrieval.errors import ConfigError, DataError, param_error, unknown_name_error
from retrieval.loaders.beir import load_beir
from retrieval.loaders.embedded import TextDataset, embed_collection
from retrieval.loaders.shared import (
    SCIFACT_SPLITS,
    load_cranfield,
    load_qqp_questions,
    load_reuters_paragraphs,
    load_scifact,
)
from retrieval.loaders.synthetic import make_synthetic
from retrieval.loaders.vectors import load_hdf5, load_texmex
from retrieval.params import Params, validate_params
from retrieval.paths import data_dir_candidates, manifests_dirs
from retrieval.specfile import read_yaml, require_mapping

log = logging.getLogger(__name__)

#: collection name -> shared data sub-folder and the files it needs
SHARED_COLLECTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "scifact": ("scifact", ("scifact.zip",)),
    "cranfield": ("cranfield", ("cran.all.1400", "cran.qry", "cranqrel")),
    "reuters": ("reuters21578", tuple(f"reut2-{i:03d}.sgm" for i in range(22))),
    "qqp-questions": ("gptcache_qqp", ("similiar_qqp_full.json.gz",)),
}
CORPUS_ONLY = ("reuters", "qqp-questions")
COLLECTIONS_HELP = "one of scifact, cranfield, reuters, qqp-questions, beir:<folder>"


class _Spec(Params):
    description: str = ""
    name: str | None = None


class SyntheticSpec(_Spec):
    """Arguments of :func:`retrieval.loaders.synthetic.make_synthetic`."""

    kind: Literal["synthetic"]
    n: int = Field(20_000, ge=1)
    dim: int = Field(96, ge=2)
    n_queries: int = Field(500, ge=1)
    n_clusters: int = Field(64, ge=1)
    decay: float = Field(0.3, ge=0.0, le=3.0)
    cluster_spread: float = Field(1.5, gt=0.0)
    metric: Metric = "l2"
    seed: int = 0
    attributes: bool = False  # per-vector attributes for filtered search (see make_synthetic)
    correlation: float = Field(1.0, ge=0.0, le=1.0)
    #: generate the base in chunks of this many rows into a memory-mapped cache file
    #: (default: whole when n <= 2,000,000, else 1,048,576-row chunks)
    chunk_rows: int | None = Field(None, ge=1)


class Hdf5Spec(_Spec):
    """An ann-benchmarks HDF5 file; ``metric`` overrides its ``distance`` attribute."""

    kind: Literal["hdf5"]
    path: str
    metric: Metric | None = None
    #: name of a 1-d dataset in the file holding the caller's base ids (int64 >= 0 or
    #: strings); ``neighbors`` then holds those ids
    ids: str | None = None
    #: name of a 1-d dataset in the file holding the caller's query ids
    query_ids: str | None = None
    #: .parquet / structured .npy attributes (keyed by ``id_column`` when ``ids`` is given)
    attributes: str | None = None
    id_column: str = Field("id", min_length=1)


class TexmexSpec(_Spec):
    """TEXMEX ``.fvecs``/``.bvecs`` base and queries, optional ``.ivecs`` ground truth."""

    kind: Literal["texmex"]
    base: str
    queries: str
    groundtruth: str | None = None
    metric: Metric = "l2"


class NpySpec(_Spec):
    """NumPy ``.npy`` matrices; optional ground-truth ids ``.npy``."""

    kind: Literal["npy"]
    base: str
    queries: str
    groundtruth: str | None = None
    metric: Metric
    #: .parquet / structured .npy: one row per base vector (in the base's order, or keyed by
    #: ``id_column`` when ``ids`` is given)
    attributes: str | None = None
    #: .npy of the caller's base ids (int64 >= 0, or strings; one per base vector, distinct):
    #: results, saved ids and ``groundtruth`` are in these ids
    ids: str | None = None
    #: .npy of the caller's query ids (int64 or strings; one per query)
    query_ids: str | None = None
    #: the column of ``attributes`` holding the base ids (with ``ids``)
    id_column: str = Field("id", min_length=1)


class TextSpec(_Spec):
    """A text collection embedded into vectors (see :func:`embed_collection`)."""

    kind: Literal["text"]
    collection: str
    split: str = "test"
    model: str | None = None
    n_base: int | None = Field(None, ge=1)
    n_queries: int | None = Field(None, ge=1, validate_default=True)
    seed: int = 0
    metric: Metric = "cosine"
    dedupe: bool = True
    batch_size: int = Field(32, ge=1)
    #: per-vector attribute fields: reuters topics/places, or BEIR corpus metadata fields
    attributes: list[str] = Field(default_factory=list)

    @field_validator("collection")
    @classmethod
    def _known_collection(cls, v: str) -> str:
        if v.startswith("beir:") and len(v) > 5:
            return v
        if v not in SHARED_COLLECTIONS:
            close = difflib.get_close_matches(v, list(SHARED_COLLECTIONS), n=1, cutoff=0.5)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ValueError(f"must be {COLLECTIONS_HELP}{hint}")
        return v

    @field_validator("split")
    @classmethod
    def _known_split(cls, v: str, info: ValidationInfo) -> str:
        collection = info.data.get("collection", "")
        if collection == "scifact" and v not in SCIFACT_SPLITS:
            raise ValueError(f"one of {', '.join(SCIFACT_SPLITS)} for scifact")
        if collection in ("cranfield", "reuters", "qqp-questions") and v != "test":
            raise ValueError(f"'test' (collection '{collection}' has no splits)")
        return v


    @field_validator("attributes")
    @classmethod
    def _attributes_exist(cls, v: list[str], info: ValidationInfo) -> list[str]:
        collection = info.data.get("collection", "")
        if v and collection == "reuters" and not set(v) <= {"topics", "places"}:
            raise ValueError(f"a subset of topics, places for reuters; received {v}")
        if v and collection != "reuters" and not collection.startswith("beir:"):
            raise ValueError(f"empty for collection '{collection}' (attribute fields exist for "
                             f"reuters: topics, places; and beir:<folder> metadata fields)")
        return v

    @field_validator("n_queries")
    @classmethod
    def _queries_for_corpus_only(cls, v: int | None, info: ValidationInfo) -> int | None:
        collection = info.data.get("collection", "")
        if v is None and collection in CORPUS_ONLY:
            raise ValueError(
                f"an integer >= 1 for collection '{collection}' (corpus only: n_queries "
                f"corpus texts are held out as queries)"
            )
        return v


DatasetSpec = Annotated[
    SyntheticSpec | Hdf5Spec | TexmexSpec | NpySpec | TextSpec, Field(discriminator="kind")
]
SPEC_MODELS: dict[str, type[_Spec]] = {
    "synthetic": SyntheticSpec,
    "hdf5": Hdf5Spec,
    "texmex": TexmexSpec,
    "npy": NpySpec,
    "text": TextSpec,
}


@dataclass(frozen=True)
class FileStatus:
    """A file or folder a dataset needs, where it is looked for, and whether it is there."""

    role: str
    path: str
    present: bool


@dataclass(frozen=True)
class DatasetEntry:
    """One manifest, as ``rwb datasets`` lists it. ``error`` is set for an invalid manifest."""

    name: str
    kind: str
    description: str
    manifest: str
    files: tuple[FileStatus, ...] = ()
    error: str | None = None

    @property
    def available(self) -> bool:
        return self.error is None and all(f.present for f in self.files)

    @property
    def disk_bytes(self) -> int | None:
        """Bytes on disk of the files present (None when there are no files, e.g. synthetic)."""
        sizes = []
        for f in self.files:
            p = Path(f.path)
            if f.present and p.is_file():
                sizes.append(p.stat().st_size)
        return sum(sizes) if sizes else None


# --------------------------------------------------------------------------- manifests


def manifest_paths() -> dict[str, Path]:
    """Dataset name -> manifest file (``*.yaml``/``*.yml``) over every manifests folder in
    search order (:func:`retrieval.paths.manifests_dirs`): the first file of a name wins."""
    out: dict[str, Path] = {}
    for folder in manifests_dirs():
        if not folder.is_dir():
            continue
        for p in sorted(folder.iterdir()):
            if p.suffix in (".yaml", ".yml") and p.is_file():
                out.setdefault(p.stem, p)
    return out


def read_manifest(path: Path) -> dict[str, Any]:
    """The raw mapping of a manifest file (ConfigError naming the file if it is not one)."""
    data = read_yaml(path, what="dataset manifest", invalid="invalid YAML")
    return dict(require_mapping(data, str(path), "a dataset manifest"))


def parse_spec(data: Mapping[str, Any], *, where: str) -> DatasetSpec:
    """Validate a spec mapping into the model of its ``kind``."""
    kind = data.get("kind")
    if kind is None:
        raise param_error("kind", f"one of {', '.join(SPEC_MODELS)}", None, where=where)
    if not isinstance(kind, str) or kind not in SPEC_MODELS:
        raise unknown_name_error("dataset kind", str(kind), SPEC_MODELS, where=where)
    spec = validate_params(SPEC_MODELS[kind], data, where=where)
    return spec  # type: ignore[return-value]


def load_manifest(path: Path) -> DatasetSpec:
    spec = parse_spec(read_manifest(path), where=str(path))
    if spec.name is not None and spec.name != path.stem:
        raise param_error("name", f"the file stem '{path.stem}' (or absent)", spec.name,
                          where=str(path))
    return spec


# --------------------------------------------------------------------------- files


def _resolve(path: str, base_dir: Path) -> Path:
    """``path`` (``~`` expanded) relative to ``base_dir``; ConfigError for a path that cannot be
    one (a NUL byte, ``~user`` of an unknown user)."""
    if "\x00" in path:
        raise param_error("path", "a file path without NUL bytes", path)
    try:
        p = Path(path).expanduser()
    except RuntimeError as exc:  # ~user of no such user / no home directory
        raise param_error("path", f"a path whose '~' can be expanded ({exc})", path) from None
    return p if p.is_absolute() else (base_dir / p)


def _shared_status(collection: str) -> tuple[FileStatus, ...]:
    sub, files = SHARED_COLLECTIONS[collection]
    for cand in data_dir_candidates():
        folder = cand / sub
        if folder.is_dir():
            return tuple(FileStatus(f, str(folder / f), (folder / f).is_file()) for f in files)
    return tuple(FileStatus(sub, str(c / sub), False) for c in data_dir_candidates())


def spec_files(spec: DatasetSpec, base_dir: Path) -> tuple[FileStatus, ...]:
    """The files a spec reads, resolved, with presence."""
    def st(role: str, path: str | None) -> list[FileStatus]:
        if path is None:
            return []
        p = _resolve(path, base_dir)
        return [FileStatus(role, str(p), p.exists())]

    if isinstance(spec, Hdf5Spec):
        return tuple(st("hdf5", spec.path) + st("attributes", spec.attributes))
    if isinstance(spec, NpySpec):
        return tuple(st("base", spec.base) + st("queries", spec.queries)
                     + st("groundtruth", spec.groundtruth) + st("ids", spec.ids)
                     + st("query_ids", spec.query_ids) + st("attributes", spec.attributes))
    if isinstance(spec, TexmexSpec):
        return tuple(st("base", spec.base) + st("queries", spec.queries)
                     + st("groundtruth", spec.groundtruth))
    if isinstance(spec, TextSpec):
        if spec.collection.startswith("beir:"):
            return tuple(st("beir folder", spec.collection[5:]))
        return _shared_status(spec.collection)
    return ()


def list_datasets() -> list[DatasetEntry]:
    """Every manifest: name, kind, description, the files it needs and whether they exist.

    An invalid manifest (not UTF-8, bad YAML, a field out of range, a path that cannot be
    resolved) is listed with ``error`` set, never stopping the listing of the others. A bad
    $RWB_DATA_DIR concerns them all: its ConfigError is raised."""
    data_dir_candidates()
    out = []
    for name, path in manifest_paths().items():
        try:
            spec = load_manifest(path)
        except ConfigError as exc:
            out.append(DatasetEntry(name, "invalid", "", str(path), error=str(exc)))
            continue
        try:
            files = spec_files(spec, path.parent)
        except (ConfigError, DataError, OSError, ValueError) as exc:  # a path the OS refuses
            out.append(DatasetEntry(name, "invalid", "", str(path), error=f"{path}: {exc}"))
            continue
        out.append(
            DatasetEntry(
                name=name,
                kind=spec.kind,
                description=spec.description,
                manifest=str(path),
                files=files,
            )
        )
    return out


# --------------------------------------------------------------------------- collections


def _collection(spec_collection: str, split: str, base_dir: Path) -> TextCollection:
    if spec_collection.startswith("beir:"):
        return load_beir(_resolve(spec_collection[5:], base_dir), split=split)
    if spec_collection == "scifact":
        return load_scifact(split)
    if spec_collection == "cranfield":
        return load_cranfield()
    if spec_collection == "reuters":
        return load_reuters_paragraphs()
    if spec_collection == "qqp-questions":
        return load_qqp_questions()
    raise unknown_name_error("text collection", spec_collection, SHARED_COLLECTIONS)


def load_text_collection(
    name: str, *, split: str = "test", base_dir: Path | None = None
) -> TextCollection:
    """A text collection by name (scifact, cranfield, reuters, qqp-questions, beir:<folder>),
    or the collection behind a ``text`` dataset manifest (with that manifest's split)."""
    if name in SHARED_COLLECTIONS or (name.startswith("beir:") and len(name) > 5):
        return _collection(name, split, base_dir or Path.cwd())
    paths = manifest_paths()
    if name in paths:
        spec = load_manifest(paths[name])
        if isinstance(spec, TextSpec):
            return _collection(spec.collection, spec.split, paths[name].parent)
    known = list(SHARED_COLLECTIONS) + ["beir:<folder>"] + [
        n for n, p in paths.items() if _is_text_manifest(p)
    ]
    raise unknown_name_error("text collection", name, known)


def _is_text_manifest(path: Path) -> bool:
    try:
        return read_manifest(path).get("kind") == "text"
    except ConfigError:
        return False


# --------------------------------------------------------------------------- resolve


def _build_synthetic(spec: SyntheticSpec, name: str, base_dir: Path) -> VectorDataset:
    args = spec.model_dump(exclude={"kind", "description", "name"})
    ds = make_synthetic(name=name, **args)
    ds.info["description"] = spec.description
    return ds


def _build_hdf5(spec: Hdf5Spec, name: str, base_dir: Path) -> VectorDataset:
    ds = load_hdf5(_resolve(spec.path, base_dir), name=name, metric=spec.metric, ids=spec.ids,
                   query_ids=spec.query_ids)
    if spec.attributes is None:
        return ds
    from retrieval.loaders.attributes import read_attribute_file

    attrs = read_attribute_file(_resolve(spec.attributes, base_dir), ds.n_base,
                                ids=ds.base_ids, id_column=spec.id_column)
    return dataclasses.replace(ds, attributes=attrs)


def _build_texmex(spec: TexmexSpec, name: str, base_dir: Path) -> VectorDataset:
    gt = None if spec.groundtruth is None else _resolve(spec.groundtruth, base_dir)
    return load_texmex(_resolve(spec.base, base_dir), _resolve(spec.queries, base_dir), gt,
                       spec.metric, name=name)


def _build_npy(spec: NpySpec, name: str, base_dir: Path) -> VectorDataset:
    from retrieval.loaders.npyfiles import NpyFiles, build_npy

    def opt(path: str | None) -> Path | None:
        return None if path is None else _resolve(path, base_dir)

    return build_npy(NpyFiles(_resolve(spec.base, base_dir), _resolve(spec.queries, base_dir),
                              opt(spec.groundtruth), opt(spec.ids), opt(spec.query_ids),
                              opt(spec.attributes)),
                     spec.metric, name=name, id_column=spec.id_column)


def _build_text(spec: TextSpec, name: str, base_dir: Path, where: str) -> TextDataset:
    coll = _collection(spec.collection, spec.split, base_dir)
    model = spec.model
    if model is not None and not Path(model).expanduser().is_absolute():
        candidate = base_dir / Path(model).expanduser()
        if candidate.exists():
            model = str(candidate)
    td = embed_collection(
        coll,
        name=name,
        n_queries=spec.n_queries,
        n_base=spec.n_base,
        metric=spec.metric,
        seed=spec.seed,
        dedupe=spec.dedupe,
        model=model,
        batch_size=spec.batch_size,
        where=where,
    )
    if not spec.attributes:
        return td
    from retrieval.loaders.attributes import beir_attributes, reuters_attributes
    from retrieval.loaders.shared import shared_folder

    if spec.collection == "reuters":
        attrs = reuters_attributes(shared_folder("reuters21578"), td.base_ids, spec.attributes)
    else:  # beir:<folder> (the only other collection with attribute fields, see TextSpec)
        attrs = beir_attributes(_resolve(spec.collection[5:], base_dir), td.base_ids,
                                spec.attributes)
    return dataclasses.replace(td, dataset=dataclasses.replace(td.dataset, attributes=attrs))


_BUILDERS: dict[str, Callable[[Any, str, Path], VectorDataset]] = {
    "synthetic": _build_synthetic,
    "hdf5": _build_hdf5,
    "texmex": _build_texmex,
    "npy": _build_npy,
}


def _spec_from(
    spec: str | Mapping[str, Any], where: str, base_dir: Path | None
) -> tuple[DatasetSpec, str, Path, str]:
    """-> (spec, dataset name, folder for relative paths, where-label for errors)."""
    paths = manifest_paths()
    if isinstance(spec, str):
        if spec in paths:
            path = paths[spec]
            return load_manifest(path), spec, path.parent, str(path)
        p = Path(spec).expanduser()
        if p.suffix in (".yaml", ".yml") and p.is_file():
            return load_manifest(p), p.stem, p.parent, str(p)
        if p.suffix in (".hdf5", ".h5") and p.is_file():
            hd = parse_spec({"kind": "hdf5", "path": str(p.resolve())}, where=where)
            return hd, p.stem, p.parent, where
        raise unknown_name_error("dataset", spec, paths, where=where)
    if not isinstance(spec, Mapping):
        raise param_error("dataset", "a dataset name or a mapping", spec, where=where)
    data = dict(spec)
    folder = base_dir or Path.cwd()
    if "kind" not in data and "name" in data:
        # a named manifest with overrides, e.g. {"name": "synthetic-20k", "n_queries": 100}
        named = str(data.pop("name"))
        if named not in paths:
            raise unknown_name_error("dataset", named, paths, where=where)
        path = paths[named]
        merged = {**read_manifest(path), **data}
        label = f"{where} (manifest {path} with overrides)" if data else str(path)
        parsed = parse_spec(merged, where=label)
        suffix = ",".join(f"{k}={v}" for k, v in sorted(data.items()))
        return parsed, f"{named}[{suffix}]" if suffix else named, path.parent, label
    parsed = parse_spec(data, where=where)
    return parsed, parsed.name or f"inline-{parsed.kind}", folder, where


#: the fields of each dataset kind that name a file or folder (relative: to the base folder)
_PATH_FIELDS = ("path", "base", "queries", "groundtruth", "attributes", "ids", "query_ids")


def dataset_ref(spec: str | Mapping[str, Any], base_dir: Path | None = None
                ) -> str | dict[str, Any]:
    """``spec`` (a sweep's ``dataset``) as a reference that resolves the same from any folder:
    a manifest name stays a name; a manifest / HDF5 path, and the file fields of an inline
    mapping (``path``, ``base``, ``queries``, ``groundtruth``, ``attributes``, a ``beir:`` folder,
    a local ``model`` folder), become absolute against ``base_dir`` (default: the current
    directory, where :func:`resolve_dataset` resolves them)."""
    folder = (base_dir or Path.cwd()).resolve()

    def absolute(value: str) -> str:
        p = Path(value).expanduser()
        return str(p if p.is_absolute() else (folder / p).resolve())

    if isinstance(spec, str):
        if spec in manifest_paths():
            return spec
        p = Path(spec).expanduser()
        return absolute(spec) if p.suffix in (".yaml", ".yml", ".hdf5", ".h5") else spec
    out = dict(spec)
    if "kind" not in out:  # a named manifest + overrides: its paths are the manifest's own
        return out
    for key in _PATH_FIELDS:
        if out.get("kind") == "hdf5" and key in ("ids", "query_ids"):
            continue  # names of datasets inside the file
        if isinstance(out.get(key), str):
            out[key] = absolute(out[key])
    coll = out.get("collection")
    if isinstance(coll, str) and coll.startswith("beir:"):
        out["collection"] = "beir:" + absolute(coll[5:])
    model = out.get("model")
    if isinstance(model, str) and (folder / Path(model).expanduser()).exists():
        out["model"] = absolute(model)
    return out


def dataset_spec(spec: str | Mapping[str, Any], *, where: str = "dataset",
                 base_dir: Path | None = None) -> DatasetSpec:
    """The parsed manifest of the dataset ``spec`` names (its ``kind``, ...; nothing loaded)."""
    return _spec_from(spec, where, base_dir)[0]


def resolve_text_dataset(
    spec: str | Mapping[str, Any], *, where: str = "dataset", base_dir: Path | None = None
) -> TextDataset:
    """Like :func:`resolve_dataset` for ``text`` datasets, keeping the text ids of every row."""
    parsed, name, folder, label = _spec_from(spec, where, base_dir)
    if not isinstance(parsed, TextSpec):
        raise param_error("kind", "text", parsed.kind, where=label)
    return _build_text(parsed, name, folder, label)


def resolve_dataset(
    spec: str | Mapping[str, Any], *, where: str = "dataset", base_dir: Path | None = None
) -> VectorDataset:
    """A :class:`VectorDataset` from a manifest name, a manifest/HDF5 path, or an inline mapping.

    An inline mapping has a ``kind`` and that kind's fields, or a ``name`` of a manifest plus
    fields that override it. Relative paths resolve against the manifest's folder (inline:
    ``base_dir`` or the current directory). ``where`` prefixes error messages.
    """
    parsed, name, folder, label = _spec_from(spec, where, base_dir)
    if isinstance(parsed, TextSpec):
        return _build_text(parsed, name, folder, label).dataset
    return _BUILDERS[parsed.kind](parsed, name, folder)


__all__ = [
    "SPEC_MODELS",
    "DatasetEntry",
    "DatasetSpec",
    "FileStatus",
    "Hdf5Spec",
    "NpySpec",
    "SyntheticSpec",
    "TexmexSpec",
    "TextDataset",
    "TextSpec",
    "dataset_ref",
    "dataset_spec",
    "list_datasets",
    "load_manifest",
    "load_text_collection",
    "manifest_paths",
    "parse_spec",
    "resolve_dataset",
    "resolve_text_dataset",
]
