"""``rwb sweep`` of a live spec on LanceDB, Milvus, Redis and Qdrant: bad input is one line and
exit 2, an engine that is not reachable from here exit 3 ("not measurable here"), before any
run folder is written, and no password reaches the output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from retrieval.cli import main
from tests.helpers import dead_port

DIM = 8



@pytest.fixture(scope="module")
def lance_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import lancedb
    import pyarrow as pa

    folder = tmp_path_factory.mktemp("lance") / "db"
    x = np.random.default_rng(0).standard_normal((300, DIM)).astype(np.float32)
    lancedb.connect(str(folder)).create_table("items", pa.table({
        "id": pa.array(1_000_000 + 7 * np.arange(300)),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), DIM)}))
    return folder


def _sweep(tmp_path: Path, live: dict[str, Any], capsys: pytest.CaptureFixture[str]
           ) -> tuple[int, str]:
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"live": live, "queries": {"sample": 5}, "k": 5}))
    code = main(["sweep", str(spec), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert not (tmp_path / "run" / "summary.json").exists()
    return code, err


@pytest.mark.parametrize(("over", "field"), [
    ({"table": "nope"}, "live.table"), ({"vector_column": "emb"}, "live.vector_column"),
    ({"dim": DIM + 1}, "live.dim"), ({"colour": "red"}, "colour")])
def test_lancedb_bad_input_exit_2(lance_db: Path, tmp_path: Path, over: dict[str, Any],
                                  field: str, capsys: pytest.CaptureFixture[str]) -> None:
    live = {"engine": "lancedb", "uri": str(lance_db), "table": "items",
            "vector_column": "vector", **over}
    code, err = _sweep(tmp_path, live, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and field in err, err


def test_unreachable_engines_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    port = dead_port()
    for live in ({"engine": "lancedb", "uri": str(tmp_path / "gone"), "table": "t",
                  "vector_column": "v"},
                 {"engine": "milvus", "uri": f"http://127.0.0.1:{port}", "collection": "c",
                  "vector_field": "v", "id_field": "id"},
                 {"engine": "redis", "url": f"redis://:pw-s3cret@127.0.0.1:{port}",
                  "index": "i"},
                 {"engine": "qdrant", "path": str(tmp_path / "gone"), "collection": "c"}):
        code, err = _sweep(tmp_path, live, capsys)
        assert code == 3 and "not measurable here" in err, (live["engine"], err)
        assert "pw-s3cret" not in err
    assert not (tmp_path / "gone").exists()  # rwb created nothing
