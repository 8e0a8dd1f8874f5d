"""Issue 34, list 9 of the hostile pass (LOW): each case is one clear line (exit 2) or a hint
that says what is wrong, not a traceback or a misleading hint. Tiny in-memory data only."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from retrieval.cli import main
from retrieval.data import as_matrix
from retrieval.errors import DataError
from retrieval.tune.summary import miss_hint


def _spec(tmp_path: Path, base: str = "base.npy") -> Path:
    rng = np.random.default_rng(0)
    np.save(tmp_path / "base.npy", rng.standard_normal((200, 8)).astype(np.float32))
    np.save(tmp_path / "q.npy", rng.standard_normal((10, 8)).astype(np.float32))
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "low", "k": 5, "warmup": 1, "batch_repeats": 1,
        "dataset": {"kind": "npy", "base": str(tmp_path / base),
                    "queries": str(tmp_path / "q.npy"), "metric": "l2"},
        "indexes": [{"backend": "faiss-flat"}],
    }))
    return spec


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("rwb: error:"), err
    return err


def test_a_non_utf8_out_name_is_one_line_before_any_work(tmp_path, capsys):
    spec = _spec(tmp_path)
    out = os.fsdecode(os.fsencode(str(tmp_path)) + b"/run\xff")  # a byte name Linux allows
    assert main(["eval", str(spec), "--out", out]) == 2
    err = _one_error_line(capsys)
    assert "not valid UTF-8" in err and "--out" in err and "\\udcff" in err
    assert not Path(out).exists()  # refused before anything was written


def test_a_symlink_loop_data_path_is_one_line(tmp_path, capsys):
    spec = _spec(tmp_path, base="loop.npy")
    (tmp_path / "loop.npy").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop.npy")
    assert main(["eval", str(spec), "--out", str(tmp_path / "run")]) == 2
    err = _one_error_line(capsys)
    assert "symbolic link loop" in err and "loop.npy" in err


def test_out_dir_whose_work_is_a_file_keeps_the_file(tmp_path, capsys):
    spec = _spec(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / "work").write_text("the user's file\n")
    assert main(["eval", str(spec), "--out", str(out), "--force"]) == 0
    assert (out / "work").read_text() == "the user's file\n"


@pytest.mark.parametrize("scale", [1e37, 1e20])
def test_a_base_whose_distances_overflow_float32_is_refused(scale):
    x = np.random.default_rng(0).standard_normal((50, 8)) * scale
    with pytest.raises(DataError, match=r"overflow float32.*rescale the vectors"):
        as_matrix(x, "base")
    as_matrix(x / scale * 1e6, "base")  # large but safe magnitudes are fine


def test_a_tied_base_is_called_degenerate_not_widen_the_range():
    """All-zero base: every base vector is an exact neighbour (recall_tie 1.0) while recall by
    id is 0: the hint names the data, not the search range."""
    summary = {
        "target_recall": 0.9,
        "rows": [{"label": "hnswlib", "search": {"ef_search": 50}, "recall": 0.0,
                  "recall_lb": 0.0, "recall_tie": 1.0}],
        "builds": [{"label": "hnswlib", "method": "target", "knob": "ef_search",
                    "range": [10, 50]}],
    }
    hint = miss_hint(summary, "hnswlib")
    assert "degenerate" in hint and "widen" not in hint.split("(widening")[0], hint
    summary["rows"][0]["recall_tie"] = 0.05  # a real miss: the range hint as before
    assert "widen tune.search_range" in miss_hint(summary, "hnswlib")


# --- settings that cannot apply are warned, not silently ignored ------------------------------
def test_redis_flat_with_hnsw_params_is_warned(caplog):
    from retrieval.engines.redis.index import RedisBuild
    from retrieval.params import validate_params

    with caplog.at_level("WARNING"):
        validate_params(RedisBuild, {"algorithm": "FLAT", "M": 8})
    assert "M ignored: algorithm FLAT is an exact scan" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        validate_params(RedisBuild, {"algorithm": "HNSW", "M": 8})
        validate_params(RedisBuild, {"algorithm": "FLAT"})
    assert "ignored" not in caplog.text


def test_rescore_knob_on_a_build_without_refine_is_warned(caplog):
    from retrieval.indexes.registry import get_backend
    from retrieval.params import validate_params
    from retrieval.tune.config import TuneSpec
    from retrieval.tune.units import rescore_knob

    cls = get_backend("faiss-ivf")
    tune = TuneSpec(rescore_knobs={"faiss-ivf": "k_factor"})
    plain = validate_params(cls.BuildParams, {"nlist": 16})
    with caplog.at_level("WARNING"):
        assert rescore_knob(cls, plain, 10, tune, "faiss-ivf", "nprobe") == (None, ())
    assert "tune.rescore_knobs.faiss-ivf: 'k_factor' cannot apply" in caplog.text
    caplog.clear()
    refined = validate_params(cls.BuildParams, {"nlist": 16, "refine": True})
    with caplog.at_level("WARNING"):
        name, ladder = rescore_knob(cls, refined, 10, tune, "faiss-ivf", "nprobe")
    assert name == "k_factor" and len(ladder) > 1 and "cannot apply" not in caplog.text


def test_tune_cost_without_measured_bytes_is_warned(caplog):
    from retrieval.tune.config import CostSpec
    from retrieval.tune.cost import with_costs

    prices = CostSpec(ram_gb_month=5.0)
    backends = {"hnswlib": {"chosen": {"recall": 0.95}},  # no bytes_per_vector measured
                "faiss": {"chosen": {"bytes_per_vector": 600.0, "memory": {"n": 10}}}}
    with caplog.at_level("WARNING"):
        out = with_costs(backends, prices, 1_000_000)
    assert out["hnswlib"]["cost"] is None and out["faiss"]["cost"]["per_month"] > 0
    assert "tune.cost: no monthly cost for hnswlib" in caplog.text and "faiss," not in caplog.text


def test_storage_lost_promises_kept_trials_only_where_the_storage_persists():
    from retrieval.tune.storage import storage_lost

    cause = ConnectionError("Connection refused")
    redis = str(storage_lost("redis://127.0.0.1:6390/0", cause, None))
    assert "every trial finished before is kept" not in redis
    assert "kept only if that Redis persists its data" in redis and "\n" not in redis
    pg = str(storage_lost("postgresql+psycopg://***@127.0.0.1:5432/s", cause, None))
    assert "every trial finished before is kept there" in pg


def test_stale_temp_folders_of_a_killed_run_are_removed_and_no_other(tmp_path, monkeypatch):
    """kill -9 leaves rwb-gt-* / rwb-pr-* folders: the next run removes those carrying rwb's
    marker whose process is gone; a look-alike without the marker and a live one are kept."""
    import subprocess
    import sys
    import tempfile

    from retrieval.paths import TEMP_MARK, rwb_tempdir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / "rwb-gt-killed"
    stale.mkdir()
    (stale / TEMP_MARK).write_text(f"{dead}\n")
    (stale / "shard.npy").write_bytes(b"x")
    foreign = tmp_path / "rwb-gt-users-own"
    foreign.mkdir()
    live = tmp_path / "rwb-gt-live"
    live.mkdir()
    (live / TEMP_MARK).write_text(f"{os.getpid()}\n")
    with rwb_tempdir("rwb-gt-") as mine:
        assert (mine / TEMP_MARK).is_file() and mine.parent == tmp_path
        assert not stale.exists() and foreign.is_dir() and live.is_dir()
    assert not mine.exists()


def test_inline_paths_of_rerank_and_cache_specs_resolve_against_the_working_directory(
        tmp_path, monkeypatch, caplog):
    """One rule for every spec (as sweep / churn / load): relative to the working directory;
    the spec folder's file is still accepted, with a warning, where only it exists."""
    from retrieval.cache.spec import parse_cache_spec

    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "pairs.csv").write_text("a,b,1\n")
    (tmp_path / "pairs.csv").write_text("a,b,1\n")
    spec_file = tmp_path / "specs" / "c.yaml"
    spec_file.write_text("x: 1\n")  # parse_cache_spec takes the file as its source
    monkeypatch.chdir(tmp_path)
    doc = {"name": "c", "pairs": {"path": "pairs.csv"}}
    with caplog.at_level("WARNING"):
        got = parse_cache_spec(doc, source=str(spec_file))
    assert got.pairs.path == str(tmp_path / "pairs.csv") and "spec's folder" not in caplog.text
    (tmp_path / "pairs.csv").unlink()  # only the spec's folder has it: the old rule, warned
    with caplog.at_level("WARNING"):
        got = parse_cache_spec(doc, source=str(spec_file))
    assert got.pairs.path == str(tmp_path / "specs" / "pairs.csv")
    assert "found relative to the spec's folder" in caplog.text


def test_a_non_utf8_export_out_file_is_one_line(tmp_path, capsys):
    spec = _spec(tmp_path)
    assert main(["eval", str(spec), "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    out = os.fsdecode(os.fsencode(str(tmp_path)) + b"/cfg\xfe.yaml")
    assert main(["export", str(tmp_path / "run"), "--engine", "faiss", "--out", out]) == 2
    err = _one_error_line(capsys)
    assert "not valid UTF-8" in err and "\\udcfe" in err
