"""`rwb eval` end to end through the real CLI entry point (all five backends, small data)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from retrieval.cli import main

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

SMALL = textwrap.dedent("""\
    name: small
    dataset: synthetic-small
    k: 10
    warmup: 4
    batch_repeats: 1
    indexes:
      - backend: faiss-flat
      - backend: hnswlib
        build: {M: 8, ef_construction: 40}
        search: {ef_search: [10, 80]}
      - backend: faiss-hnsw
        build: {M: 8, ef_construction: 40}
        search: {ef_search: [10, 80]}
      - backend: faiss-ivf
        build: {nlist: 32}
        search: {nprobe: [1, 32]}
      - backend: milvus
        build: {index_type: HNSW, M: 8, efConstruction: 40}
        search: {ef: [10, 80]}
""")


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.milvus
def test_eval_json_writes_run_directory_for_all_backends(tmp_path, capsys):
    spec = write(tmp_path, SMALL)
    out = tmp_path / "run"
    assert main(["eval", str(spec), "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    on_disk = json.loads((out / "summary.json").read_text())
    assert printed == on_disk
    assert printed["dataset"] == "synthetic-small" and printed["k"] == 10
    backends = {r["backend"] for r in printed["rows"]}
    assert backends == {"faiss-flat", "hnswlib", "faiss-hnsw", "faiss-ivf", "milvus"}
    assert len(printed["rows"]) == 9
    for row in printed["rows"]:
        for key in ("recall", "recall_p5", "p50_ms", "p95_ms", "p99_ms", "qps", "build_s",
                    "memory_bytes", "build", "search"):
            assert key in row, key
        assert row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
        assert row["memory_bytes"] > 0
    # recall moves with the knob on every approximate backend, and is ~1 at the top setting
    for b in ("hnswlib", "faiss-hnsw", "faiss-ivf", "milvus"):
        rs = sorted(r["recall"] for r in printed["rows"] if r["backend"] == b)
        assert rs[-1] >= 0.99 and rs[0] < rs[-1], (b, rs)
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("packages", "git", "cpu", "threads", "seeds", "dataset"):
        assert key in manifest
    assert manifest["dataset"]["fingerprint"] == printed["dataset_fingerprint"]
    assert "faiss-cpu" in manifest["packages"] and manifest["cpu"]["logical_cpus"]
    import pandas as pd

    df = pd.read_parquet(out / "measurements.parquet")
    assert len(df) == 18 and set(df["mode"]) == {"single", "batch"}
    assert (out / "spec.yaml").exists() and not (out / "work").exists()


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rwb: error:")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_cli_bad_inputs_exit_2_with_one_line(tmp_path):
    flat = "name: t\ndataset: synthetic-small\nindexes:\n  - backend: faiss-flat\n"
    cases = [
        ("dataset: [unclosed\n", ["malformed YAML", "line"]),
        (flat.replace("name: t", "name: t\nk: ten"), ["field 'k'", "integer", "'ten'"]),
        (flat.replace("faiss-flat", "faiss-flot"), ["unknown backend 'faiss-flot'",
                                                   "faiss-flat"]),
        (flat + "    search: {ef: 3}\n", ["unknown", "'ef'"]),
        (flat.replace("faiss-flat", "hnswlib\n    search: {ef_search: 5}"), ["ef_search",
                                                                          "received 5"]),
        (flat.replace("faiss-flat", "faiss-ivf\n    build: {nlist: 8}\n    search: {nprobe: 9}"),
         ["nprobe", "received 9"]),
        (flat.replace("synthetic-small", "synthetic-smal"), ["synthetic-small"]),
        (flat.replace("synthetic-small", "{kind: synthetic, n: 50, dim: 8, n_queries: 5}")
         .replace("name: t", "name: t\nk: 100"), ["'k'", "(50)", "received 100"]),
    ]
    for i, (text, needles) in enumerate(cases):
        spec = write(tmp_path, text, f"s{i}.yaml")
        proc = run_cli("eval", str(spec), "--out", str(tmp_path / f"o{i}"))
        assert_one_line_error(proc, str(spec) if i < 6 else "", *needles)


def test_cli_missing_dataset_files_and_corrupt_hdf5(tmp_path):
    spec = write(tmp_path, "dataset: {kind: hdf5, path: nothere.hdf5}\n"
                           "indexes:\n  - backend: faiss-flat\n")
    proc = run_cli("eval", str(spec), "--out", str(tmp_path / "o"))
    # data that is not here: exit 3, one line (issue 34; docs/exit-codes.md)
    assert proc.returncode == 3, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rwb: not measurable here:")]
    assert len(lines) == 1 and "nothere.hdf5" in lines[0] and "Traceback" not in proc.stderr
    bad = tmp_path / "corrupt.hdf5"
    bad.write_bytes(b"this is not an HDF5 file" * 10)
    spec = write(tmp_path, f"dataset: {{kind: hdf5, path: {bad}}}\n"
                           "indexes:\n  - backend: faiss-flat\n", "s2.yaml")
    proc = run_cli("eval", str(spec), "--out", str(tmp_path / "o2"))
    assert_one_line_error(proc, "corrupt.hdf5")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; tested via a file path")
def test_cli_unwritable_output_dir_non_root(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    spec = write(tmp_path, "dataset: synthetic-small\nindexes:\n  - backend: faiss-flat\n")
    assert_one_line_error(run_cli("eval", str(spec), "--out", str(ro / "x")), "not writable")


def test_cli_unwritable_output_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory must go")
    spec = write(tmp_path, "dataset: synthetic-small\nindexes:\n  - backend: faiss-flat\n")
    assert_one_line_error(run_cli("eval", str(spec), "--out", str(blocker / "run")),
                          "not writable", str(blocker / "run"))


@pytest.mark.milvus
def test_cli_unreachable_milvus_uri_fails_fast(tmp_path):
    spec = write(tmp_path, "dataset: synthetic-small\nindexes:\n  - backend: milvus\n"
                           "    build: {index_type: FLAT}\n")
    proc = run_cli("eval", str(spec), "--out", str(tmp_path / "o"),
                   env={"RWB_MILVUS_URI": "http://127.0.0.1:1"})
    assert proc.returncode == 3, proc.stderr  # nothing answering there: not measurable here
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rwb: not measurable here:")]
    assert len(lines) == 1 and "127.0.0.1:1" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_backends_and_datasets_commands():
    proc = run_cli("backends", "--json")
    assert proc.returncode == 0
    names = {b["name"] for b in json.loads(proc.stdout) if b["available"]}
    assert {"faiss-flat", "hnswlib", "faiss-hnsw", "faiss-ivf", "milvus"} <= names
    proc = run_cli("datasets")
    assert proc.returncode == 0 and "synthetic-20k" in proc.stdout


@pytest.mark.parametrize("command", ["eval", "sweep"])
def test_cli_threads_override_is_validated_like_the_spec(tmp_path, command):
    """--threads goes through the spec's own validation (threads <= 512), as if written there."""
    spec = write(tmp_path, "dataset: synthetic-small\nindexes:\n  - backend: faiss-flat\n")
    proc = run_cli(command, str(spec), "--threads", "600", "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, str(spec), "field 'threads'", "<= 512", "600")
    assert not (tmp_path / "o").exists()


def test_cli_threads_zero_is_refused_like_the_spec(tmp_path):
    spec = write(tmp_path, "dataset: synthetic-small\nindexes:\n  - backend: faiss-flat\n")
    proc = run_cli("eval", str(spec), "--threads", "0", "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, str(spec), "field 'threads'", ">= 1", "received 0")
    assert not (tmp_path / "o").exists()


def test_cli_non_utf8_spec_and_nested_and_missing_fields(tmp_path):
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes(b"name: caf\xe9\ndataset: synthetic-small\nindexes:\n"
                      b"  - backend: faiss-flat\n")
    assert_one_line_error(run_cli("eval", str(latin)), str(latin), "not UTF-8", "0xe9")
    nested = write(tmp_path, "dataset: synthetic-small\nindexes:\n  - backend: faiss-flat\n"
                             "tune:\n  strategi: grid\n", "nested.yaml")
    proc = run_cli("eval", str(nested))
    assert_one_line_error(proc, "unknown parameter 'strategi' (field 'tune.strategi')",
                          "strategy", "Did you mean 'strategy'?")
    assert "allowed: none" not in proc.stderr
    missing = write(tmp_path, "k: 10\nindexes:\n  - backend: faiss-flat\n", "missing.yaml")
    proc = run_cli("eval", str(missing))
    assert_one_line_error(proc, str(missing), "field 'dataset' must be given")
    assert "source" not in proc.stderr and "received" not in proc.stderr


def test_cli_bad_rwb_data_dir_names_the_variable(tmp_path):
    proc = run_cli("datasets", env={"RWB_DATA_DIR": str(tmp_path / "absent")})
    assert_one_line_error(proc, "RWB_DATA_DIR", str(tmp_path / "absent"), "does not exist")
    a_file = write(tmp_path, "not a folder", "file.txt")
    proc = run_cli("datasets", env={"RWB_DATA_DIR": str(a_file)})
    assert_one_line_error(proc, "RWB_DATA_DIR", "is not a folder")
    proc = run_cli("datasets", env={"RWB_DATA_DIR": str(tmp_path)})  # an existing folder is fine
    assert proc.returncode == 0 and "synthetic-small" in proc.stdout, proc.stderr


def test_cli_closed_stdout_exits_quietly():
    """`rwb backends --json | head -1`: the reader is gone before rwb writes; no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "retrieval", "backends", "--json"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141, proc.stderr  # 128 + SIGPIPE, as a shell reports it
    assert proc.stderr == ""


def _export(tmp_path: Path, **changes: object) -> Path:
    doc: dict = {
        "rwb_export": 1, "kind": "ann-index", "engine": "hnswlib",
        "source": {"backend": "hnswlib", "dataset": "synthetic-small", "k": 10,
                   "build": {"M": 8}, "search": {"ef_search": 10}},
        "evidence": {"target_recall": 0.9, "confidence": {"level": 0.95}},
    }
    for dotted, value in changes.items():
        block, key = dotted.split("__")
        doc[block][key] = value
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("change", "needles"), [
    ({"evidence__target_recall": "high"},
     ["field 'evidence.target_recall' must be a number", "received 'high'"]),
    ({"evidence__target_recall": [0.9]}, ["field 'evidence.target_recall' must be a number"]),
    ({"evidence__target_recall": 1.5}, ["field 'evidence.target_recall' must be a number <= 1",
                                        "received 1.5"]),
    ({"source__k": "10"}, ["field 'source.k' must be an integer", "received '10'"]),
    ({"source__k": 2.5}, ["field 'source.k' must be an integer", "received 2.5"]),
    ({"evidence__confidence": {"level": "high"}},
     ["field 'evidence.confidence.level' must be a number", "received 'high'"]),
    ({"evidence__confidence": {"level": 0.2}}, ["evidence.confidence.level", ">= 0.5"]),
    ({"evidence__confidence": 0.95}, ["field 'evidence.confidence' must be a mapping"]),
])
def test_cli_verify_wrong_types_in_an_exported_file(tmp_path, change, needles):
    path = _export(tmp_path, **change)
    assert_one_line_error(run_cli("verify", str(path)), str(path), *needles)


@pytest.mark.parametrize("threads", ["0", "4"])
def test_cli_threads_on_a_rag_study_is_refused_not_ignored(tmp_path, threads):
    proc = run_cli("sweep", "sweeps/rag-end-to-end.yaml", "--threads", threads,
                   "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, "sweeps/rag-end-to-end.yaml", "--threads applies to index "
                          "sweeps, not to a rag-study", f"received {threads}")
    assert not (tmp_path / "o").exists()
