"""Which text collection a rerank (or study) spec names, and what the records say about it.

A spec's ``dataset`` is one of:

- a built-in collection: ``scifact`` (BEIR test/train claims, binary qrels) or ``cranfield``
  (gain = 5 - grade);
- the name of a dataset manifest of kind ``text`` (``$RWB_DATASETS_DIR`` folders first, then the
  built-in ones), read with that manifest's collection and split;
- ``beir:<folder>``: a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``,
  graded qrels kept: nDCG uses the grade as gain, grade >= 1 is relevant). A relative folder is
  resolved against the spec file's folder (the current directory for an in-memory spec) and
  recorded absolute, so an export verifies from anywhere.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from retrieval.data import TextCollection
from retrieval.errors import param_error
from retrieval.paths import resolve_spec_path as resolve_path

BUILTIN = ("scifact", "cranfield")
ALLOWED = ("'scifact' or 'cranfield' (built-in), the name of a dataset manifest of kind text, "
           "or beir:<folder>")


def check_dataset(value: str, split: str, source: str, field: str = "dataset") -> str:
    """The dataset value, normalised (a BEIR folder made absolute); ConfigError naming the file,
    the field, what is allowed and the value received otherwise."""
    from retrieval.loaders.catalog import manifest_paths, read_manifest

    if value in BUILTIN:
        if value == "cranfield" and split != "test":
            raise param_error("split", "test (cranfield has one query set)", split, where=source)
        if value == "scifact" and split not in ("test", "train"):
            raise param_error("split", "test or train (scifact's query sets)", split,
                              where=source)
        return value
    if value.startswith("beir:"):
        folder = value[5:].strip()
        if not folder:
            raise param_error(field, f"{ALLOWED} (beir: needs a folder)", value, where=source)
        return "beir:" + resolve_path(folder, source)
    paths = manifest_paths()
    if value in paths:
        kind = read_manifest(paths[value]).get("kind")
        if kind != "text":
            raise param_error(field, f"{ALLOWED}; manifest {paths[value]} has kind {kind!r}",
                              value, where=source)
        return value
    raise param_error(field, ALLOWED, value, where=source)


def load_dataset(dataset: str, split: str) -> TextCollection:
    """The collection a checked ``dataset`` value names (see the module docstring)."""
    from retrieval.loaders.catalog import load_text_collection
    from retrieval.loaders.shared import load_cranfield, load_scifact

    if dataset == "scifact":
        return load_scifact(split)
    if dataset == "cranfield":
        return load_cranfield(relevance="gain")
    coll = load_text_collection(dataset, split=split)
    if coll.info.get("collection") == "cranfield":  # a manifest naming it: graded as gain too
        return load_cranfield(relevance="gain")
    return coll


def dataset_path(coll: TextCollection) -> str:
    """The file or folder the collection was read from (its ``source`` after the prefix)."""
    return coll.source.split(":", 1)[1] if ":" in coll.source else coll.source


def relevance_note(dataset: str, coll: TextCollection) -> str:
    """What the qrels actually read say: counts of each grade, which grades count as relevant."""
    if dataset == "cranfield":
        return "Cranfield grades mapped to gain = 5 - grade (4 best); grades 1-4 all relevant"
    if dataset == "scifact":
        return "SciFact BEIR qrels: grade 1 for each cited doc"
    grades = Counter(g for docs in coll.qrels.values() for g in docs.values())
    counts = ", ".join(f"grade {g}: {n}" for g, n in sorted(grades.items()))
    split = coll.info.get("split", "?")
    graded = len([g for g in grades if g >= 1]) > 1
    return (f"{coll.name} qrels/{split}.tsv: {sum(grades.values())} judgments over "
            f"{len(coll.qrels)} queries ({counts}); grade >= 1 relevant, "
            f"{'graded: gain = grade' if graded else 'binary'} in nDCG")


def dataset_record(dataset: str, coll: TextCollection) -> dict[str, Any]:
    """What a run records about its collection (summary, manifest, export)."""
    unknown = coll.unknown_qrels()
    return {
        "name": coll.name,
        "spec": dataset,
        "path": dataset_path(coll),
        "source": coll.source,
        "fingerprint": coll.fingerprint,
        "split": coll.info.get("split"),
        "n_docs": len(coll.corpus),
        "n_queries": len(coll.queries),
        "n_qrels": sum(len(v) for v in coll.qrels.values()),
        "qrels_unknown_docs": sum(len(v) for v in unknown.values()),
    }


__all__ = ["ALLOWED", "BUILTIN", "check_dataset", "dataset_path", "dataset_record",
           "load_dataset", "relevance_note", "resolve_path"]
