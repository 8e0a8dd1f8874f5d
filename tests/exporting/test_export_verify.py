"""What an ANN export says equals what the sweep chose, for every engine; and `rwb verify` fails
when the data changed since the export (its fingerprint), even if the recall still holds.

The sweep runs on ``.npy`` files in a temp folder, so a test can change the data under an
exported file the way a user would (one vector rewritten)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import yaml

from retrieval.cli import main
from retrieval.exporting.ann import full_search
from retrieval.exporting.engines import ANN_ENGINES
from retrieval.exporting.files import read_config
from retrieval.exporting.portable import Hnsw, Ivf, Portable, portable
from retrieval.indexes.registry import get_backend
from retrieval.loaders.synthetic import make_synthetic
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import run_sweep
from tests.helpers import export_cli

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

KNOB = {"hnswlib": "ef_search", "faiss-hnsw": "ef_search", "faiss-ivf": "nprobe"}


def _faiss_space(cfg: dict[str, Any]) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", cfg["parameter_space"])}


def _faiss(cfg: dict[str, Any]) -> dict[str, int]:
    space, out = _faiss_space(cfg), {}
    if m := re.fullmatch(r"HNSW(\d+)", cfg["index_factory"]):
        out = {"M": int(m[1]), "ef_construction": cfg["index_fields"]["hnsw.efConstruction"],
               "ef_search": space["efSearch"]}
    elif m := re.match(r"IVF(\d+),", cfg["index_factory"]):
        out = {"nlist": int(m[1]), "nprobe": space["nprobe"]}
    return out


def _milvus(cfg: dict[str, Any]) -> dict[str, int]:
    build, search = cfg["params"], cfg["search_params"]["params"]
    if "ef" in search:
        return {"M": build["M"], "ef_construction": build["efConstruction"],
                "ef_search": search["ef"]}
    if "nprobe" in search:
        return {"nlist": build["nlist"], "nprobe": search["nprobe"]}
    return {}


#: engine -> its file's values in neutral names (each reader uses only the engine's own names)
READERS: dict[str, Callable[[dict[str, Any]], dict[str, int]]] = {
    "milvus": _milvus,
    "faiss": _faiss,
    "hnswlib": lambda c: {"M": c["M"], "ef_construction": c["ef_construction"],
                          "ef_search": c["ef"]},
    "qdrant": lambda c: {"M": c["create_collection"]["hnsw_config"]["m"],
                         "ef_construction": c["create_collection"]["hnsw_config"][
                             "ef_construct"],
                         "ef_search": c["search"]["params"]["hnsw_ef"]},
    "pgvector": lambda c: ({"M": c["build_params"]["m"],
                            "ef_construction": c["build_params"]["ef_construction"],
                            "ef_search": c["search_params"]["ef_search"]} if c["method"] == "hnsw"
                           else {"nlist": c["build_params"]["lists"],
                                 "nprobe": c["search_params"]["probes"]}),
    "redis": lambda c: {"M": c["vector_field"]["attributes"]["M"],
                        "ef_construction": c["vector_field"]["attributes"]["EF_CONSTRUCTION"],
                        "ef_search": c["query_params"]["EF_RUNTIME"]},
    "lancedb": lambda c: ({"M": c["create_index"]["m"],
                           "ef_construction": c["create_index"]["ef_construction"],
                           "ef_search": c["query"]["ef"]}
                          if c["create_index"]["index_type"] == "IVF_HNSW_SQ"
                          else {"nlist": c["create_index"]["num_partitions"],
                                "nprobe": c["query"]["nprobes"]}),
    "weaviate": lambda c: {"M": c["vectorIndexConfig"]["maxConnections"],
                           "ef_construction": c["vectorIndexConfig"]["efConstruction"],
                           "ef_search": c["vectorIndexConfig"]["ef"]},
}
HNSW_LABELS = ("hnswlib", "faiss-hnsw")
#: engine -> the index labels of the sweep whose result it can express
CASES = {"milvus": (*HNSW_LABELS, "faiss-ivf"), "faiss": (*HNSW_LABELS, "faiss-ivf"),
         "hnswlib": HNSW_LABELS, "qdrant": HNSW_LABELS, "redis": HNSW_LABELS,
         "weaviate": HNSW_LABELS, "pgvector": (*HNSW_LABELS, "faiss-ivf"),
         # IVF_PQ and HNSW over SQ8 only (none of this sweep's): tests/engines/test_lancedb.py
         "lancedb": ()}


def neutral(p: Portable) -> dict[str, int]:
    if isinstance(p, Hnsw):
        return {"M": p.M, "ef_construction": p.ef_construction, "ef_search": p.ef_search}
    assert isinstance(p, Ivf)
    return {"nlist": p.nlist, "nprobe": p.nprobe}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verify")
    data = make_synthetic(3000, 16, 100, seed=2)
    folder = tmp / "data"
    folder.mkdir()
    np.save(folder / "vectors.npy", data.base)
    np.save(folder / "queries.npy", data.queries)
    spec = {
        "name": "verify-values",
        "dataset": {"kind": "npy", "base": str(folder / "vectors.npy"),
                    "queries": str(folder / "queries.npy"), "metric": "l2"},
        "k": 10, "warmup": 4, "batch_repeats": 1, "target_recall": 0.9,
        # one build thread: a rebuild on changed data must be the same graph but for the
        # change (several build threads insert in a varying order)
        "index_build": {"threads": 1},
        "indexes": [
            {"backend": "hnswlib", "build": {"M": 4, "ef_construction": 16},
             "search": {"ef_search": 10}},
            {"backend": "faiss-hnsw", "build": {"M": 6, "ef_construction": 30},
             "search": {"ef_search": 10}},
            {"backend": "faiss-ivf", "build": {"nlist": 48}, "search": {"nprobe": 1}},
        ],
        "tune": {"strategy": "target",
                 "search_range": {"ef_search": [10, 120], "nprobe": [1, 48]}},
    }
    out = tmp / "run"
    run_sweep(parse_spec(spec, source="verify.yaml"), out)
    return tmp, out, json.loads((out / "summary.json").read_text())


def test_a_reader_for_every_engine():
    assert set(READERS) == set(CASES) == set(ANN_ENGINES)


@pytest.mark.parametrize(("engine", "label"),
                         [(e, lb) for e, labels in CASES.items() for lb in labels])
def test_exported_values_are_the_chosen_ones(sweep, tmp_path, engine, label):
    _, run, summary = sweep
    chosen = summary["backends"][label]["chosen"]
    assert chosen is not None, label
    knob = KNOB[label]
    default = get_backend(label).SearchParams().model_dump()[knob]
    assert chosen["search"][knob] != default  # a file carrying the default would be caught
    path = tmp_path / f"{engine}.yaml"
    assert main(["export", str(run), "--engine", engine, "--backend", label,
                 "--out", str(path)]) == 0
    doc = read_config(path)
    in_file = READERS[engine](doc["config"])
    expect = neutral(portable(label, chosen["build_params"], full_search(label, chosen["search"])))
    assert in_file == expect
    assert in_file[knob] == chosen["search"][knob]  # the tuned value itself
    assert doc["source"]["search"][knob] == chosen["search"][knob]



def test_verify_fails_when_the_data_changed(sweep, tmp_path, capsys):
    tmp, run, _ = sweep
    path = export_cli(run, tmp_path, "hnswlib", "hnswlib", "h.yaml")
    capsys.readouterr()
    assert main(["verify", str(path), "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["holds"] and before["fingerprint_matches"]
    # the same files, one base vector rewritten, in another folder the file now points to
    moved = tmp_path / "data"
    shutil.copytree(tmp / "data", moved)
    base = np.load(moved / "vectors.npy")
    base[17] = base[18]
    np.save(moved / "vectors.npy", base)
    doc = yaml.safe_load(path.read_text())
    doc["source"]["dataset"].update(base=str(moved / "vectors.npy"),
                                    queries=str(moved / "queries.npy"))
    path.write_text(yaml.safe_dump(doc))
    assert main(["verify", str(path), "--json"]) == 1
    after = json.loads(capsys.readouterr().out)
    assert not after["holds"] and not after["fingerprint_matches"]
    assert after["fingerprint"] != before["fingerprint"] == doc["evidence"]["dataset"][
        "fingerprint"]
    # the recall alone would still hold: only the data change fails it
    assert after["measured"]["recall_lb"] >= after["target_recall"]
    assert main(["verify", str(path)]) == 1
    text = capsys.readouterr().out
    assert f"verify {path}: FAILS" in text
    assert (f"DATA CHANGED: fingerprint {before['fingerprint']} recorded, "
            f"{after['fingerprint']} now") in text
    assert re.search(r"lower bound \d\.\d+ >= target 0.9", text)


def test_verify_fails_without_a_recorded_fingerprint(sweep, tmp_path, capsys):
    _, run, _ = sweep
    path = export_cli(run, tmp_path, "hnswlib", "hnswlib", "h.yaml")
    doc = yaml.safe_load(path.read_text())
    del doc["evidence"]["dataset"]["fingerprint"]
    path.write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main(["verify", str(path)]) == 1
    text = capsys.readouterr().out
    assert "FAILS" in text and "NO FINGERPRINT recorded in the file" in text
