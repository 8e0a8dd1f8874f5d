"""The same odd labels (non-ASCII, leading/trailing and non-breaking / zero-width spaces, a
lone ``_``, quotes, backslashes, control characters) through every engine's own filter, against
the real engines: each filter returns exactly the rows holding the label, or the engine refuses
the label in one line before anything is measured (never a silent recall of 0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from retrieval.cli import main
from retrieval.errors import ConfigError, DataError
from retrieval.filtering.attrs import Attributes, LabelColumn
from retrieval.filtering.rows import bind
from retrieval.filtering.spec import Where
from retrieval.indexes import create_index

#: labels every engine answers exactly
ODD = ["日本", "ünïcødé", " lead", "trail ", "nb\u00a0sp", "zw\u200bsp", "_", 'q"uote',
       "back\\slash", "it's", "new\nline", "tab\tx", "emoji\U0001f600", "{x}", "$", "a,b",
       "a b", "\u00a0", "%", "*", "[a]", "\u3000w", "-neg", "@at"]

#: (backend, build params, search params): each exhaustive on this small set
ENGINES: list[tuple[str, dict[str, Any], dict[str, Any], Any]] = [
    ("faiss-flat", {}, {}, None),
    ("hnswlib", {"M": 16, "ef_construction": 200}, {"ef_search": 1000}, None),
    ("milvus", {"index_type": "FLAT"}, {}, pytest.mark.milvus),
    ("redis", {"algorithm": "FLAT"}, {}, pytest.mark.redis),
    ("pgvector-ivfflat", {"lists": 1}, {"probes": 1}, pytest.mark.pgvector),
    ("qdrant", {"m": 16}, {"hnsw_ef": 1000}, None),
]


def _attrs(labels: list[str], per: int = 6) -> Attributes:
    n = len(labels) * per
    rows = [[labels[i % len(labels)]] if i % 5 else [labels[i % len(labels)], "common"]
            for i in range(n)]
    return Attributes(n, {}, {"lab": LabelColumn.from_rows(rows)})


def _needs(backend: str, request: pytest.FixtureRequest) -> None:
    if backend == "redis":
        request.getfixturevalue("redis_env")
    elif backend.startswith("pgvector"):
        request.getfixturevalue("pg_url")
    elif backend == "milvus":
        pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")
    elif backend == "qdrant":
        pytest.importorskip("qdrant_edge", reason="qdrant-edge-py not installed")


@pytest.fixture()
def redis_env(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("REDIS_URL", redis_url)
    return redis_url


@pytest.mark.parametrize(("backend", "build", "search"),
                         [pytest.param(b, bp, sp, marks=m or (), id=b)
                          for b, bp, sp, m in ENGINES])
def test_odd_labels_filter_exactly(backend: str, build: dict[str, Any],
                                   search: dict[str, Any], tmp_path: Path,
                                   request: pytest.FixtureRequest) -> None:
    _needs(backend, request)
    attrs = _attrs(ODD)
    n = attrs.n
    x = np.random.default_rng(1).standard_normal((n, 8)).astype(np.float32)
    index = create_index(backend, 8, "l2", build, workdir=tmp_path)
    try:
        index.attach_attributes(attrs)
        index.build(x)
        if search:
            index.set_search_params(**search)
        for label in ODD:
            for where in (Where(attr="lab", eq=label),
                          Where.model_validate({"attr": "lab", "in": [label, "zz-none"]})):
                rf = bind(where, attrs, label="odd")
                res = index.filtered_search(x[:2], n, rf)
                for row in res.ids:
                    got = sorted(row[row >= 0].tolist())
                    assert got == rf.rows.tolist(), (backend, label, len(got), rf.count)
    finally:
        index.close()


def _npy_dataset(folder: Path, labels: list[list[str]]) -> dict[str, Any]:
    rng = np.random.default_rng(2)
    n = len(labels)
    np.save(folder / "base.npy", rng.standard_normal((n, 8)).astype(np.float32))
    np.save(folder / "queries.npy", rng.standard_normal((12, 8)).astype(np.float32))
    pd.DataFrame({"lab": labels}).to_parquet(folder / "attrs.parquet")
    return {"kind": "npy", "base": str(folder / "base.npy"),
            "queries": str(folder / "queries.npy"), "metric": "l2",
            "attributes": str(folder / "attrs.parquet")}


def _spec(folder: Path, dataset: dict[str, Any], index: dict[str, Any],
          fixed: dict[str, str]) -> str:
    spec = {"name": "odd-labels", "k": 5, "warmup": 0, "batch_repeats": 1, "target_recall": 0.9,
            "dataset": dataset, "indexes": [index],
            "filters": {"fixed": [{"name": name, "where": {"attr": "lab", "eq": label}}
                                  for name, label in fixed.items()],
                        "strategies": ["engine"]}}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    return str(path)


@pytest.mark.milvus
def test_milvus_filtered_eval_over_non_ascii_labels(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The whole eval failed ("unknown escape sequence \\u"); now a FLAT index finds every
    filtered neighbour (recall 1.0 in every bucket)."""
    pytest.importorskip("milvus_lite", reason="milvus-lite not installed (extra 'milvus')")
    names = ["日本", "ünïcødé", "nb\u00a0sp", "zw\u200bsp"]
    ds = _npy_dataset(tmp_path, [[names[i % 4]] for i in range(120)])
    spec = _spec(tmp_path, ds, {"backend": "milvus", "build": {"index_type": "FLAT"}},
                 {f"f{i}": v for i, v in enumerate(names)})
    code = main(["eval", spec, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 0, err
    import json

    rows = json.loads((tmp_path / "run" / "summary.json").read_text())["rows"]
    assert {r["bucket"] for r in rows} == {"f0", "f1", "f2", "f3"}
    assert all(r["recall"] == 1.0 for r in rows), [(r["bucket"], r["recall"]) for r in rows]


@pytest.mark.redis
@pytest.mark.parametrize(("labels", "asked", "why"), [
    (["lead", " lead", "x"], " lead", "are the same tag 'lead'"),
    (["x\x01y", "x"], "x\x01y", "control character U+0001"),
])
def test_redis_refuses_an_inexpressible_label_before_measuring(
        labels: list[str], asked: str, why: str, tmp_path: Path, redis_env: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A label Redis cannot filter on faithfully was measured as recall 0.000 (or matched a
    different label's rows): it is refused in one line naming the label, the engine and why,
    and nothing is measured."""
    ds = _npy_dataset(tmp_path, [[labels[i % len(labels)]] for i in range(90)])
    spec = _spec(tmp_path, ds, {"backend": "redis", "build": {"algorithm": "FLAT"}},
                 {"odd": asked})
    code = main(["eval", spec, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "backend 'redis'" in err and repr(asked) in err and why in err, err
    assert not (tmp_path / "run" / "measurements.parquet").exists()
    # the same label through the library call: refused, not searched
    attrs = Attributes.from_columns({"lab": [labels[i % len(labels)] for i in range(30)]})
    index = create_index("redis", 8, "l2", {"algorithm": "FLAT"})
    try:
        index.attach_attributes(attrs)
        index.build(np.zeros((30, 8), dtype=np.float32))
        with pytest.raises(ConfigError, match="cannot filter attribute 'lab'"):
            index.filtered_search(np.zeros((1, 8), dtype=np.float32), 5,
                                  bind(Where(attr="lab", eq=asked), attrs, label="t"))
    finally:
        index.close()


@pytest.mark.pgvector
def test_pgvector_refuses_a_nul_label_in_one_line(pg_url: str) -> None:
    """PostgreSQL text cannot hold U+0000: the COPY failed mid-build; now refused up front."""
    attrs = Attributes.from_columns({"lab": ["ok", "nul\0x"]})
    index = create_index("pgvector-ivfflat", 8, "l2", {"lists": 1})
    try:
        with pytest.raises(DataError, match=r"labels must not hold U\+0000"):
            index.attach_attributes(attrs)
    finally:
        index.close()
