"""Run directories are safe to write: no secret from the command line lands in any file of a run,
its report or its export; --out never overwrites a non-empty folder (except the sweep being
resumed, or --force) and never writes through a symbolic link; a failed or killed run says so in
its manifest and is not exported."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.cli import main
from tests.helpers import rwb

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

SECRET = "Pl4ntedS3cretXyz"
SPEC = {
    "name": "safety",
    "dataset": "synthetic-small",
    "k": 10,
    "warmup": 2,
    "batch_repeats": 1,
    "target_recall": 0.8,
    "indexes": [{
        "backend": "fake",
        "build": {"quality": 1.0, "half_ef": 4, "us_per_ef": 0.0},
        "search": {"ef_search": [8, 16]},
    }],
    "tune": {"strategy": "target", "search_range": {"ef_search": [1, 24]}},
}


def spec_file(tmp_path: Path, **changes: object) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **changes}))
    return path


def files_holding(root: Path, secret: str) -> list[str]:
    """Every file under ``root`` whose bytes (or, for parquet, whose decoded cells) hold
    ``secret``."""
    found = []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        in_cells = f.suffix == ".parquet" and secret in pd.read_parquet(f).to_csv()
        if secret.encode() in f.read_bytes() or in_cells:
            found.append(str(f))
    return found



REAL = {**SPEC, "indexes": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
                             "search": {"ef_search": [10, 20]}}],
        "tune": {"strategy": "target", "search_range": {"ef_search": [10, 64]}}}


# --- 1. secrets ----------------------------------------------------------------------------------
@pytest.mark.redis
def test_a_password_in_storage_reaches_no_file(redis_url: str, tmp_path: Path) -> None:
    host = redis_url.split("://", 1)[1].split("@")[-1]
    storage = f"redis://default:{SECRET}@{host}"  # Redis accepts any password for 'default'
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(REAL))
    run, study = tmp_path / "sweep", f"safety-{tmp_path.name}"
    env = {"RWB_TEST_API_TOKEN": SECRET + "env"}  # a secret-named variable: masked too
    done = rwb("sweep", str(spec), "--storage", storage, "--study", study, "--out", str(run),
               env=env)
    assert done.returncode == 0, done.stderr
    report = rwb("report", str(run))
    assert report.returncode == 0, report.stderr
    export = tmp_path / "exported" / "hnsw.yaml"
    exported = rwb("export", str(run), "--engine", "hnswlib", "--out", str(export))
    assert exported.returncode == 0, exported.stderr
    for proc in (done, report, exported):
        assert SECRET not in proc.stdout + proc.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    assert storage in done.args and f"redis://***@{host}" in manifest["command"]
    assert manifest["study"]["storage"] == f"redis://***@{host}"
    assert manifest["status"] == "complete"
    assert (run / "report.html").is_file() and list(run.glob("report_*.png"))
    for folder in ("sweep", "exported"):
        assert files_holding(tmp_path / folder, SECRET) == [], folder
    # the password really was used: the study lives in that Redis
    import optuna
    from optuna.storages.journal import JournalRedisBackend

    opened = optuna.load_study(study_name=study,
                               storage=optuna.storages.JournalStorage(JournalRedisBackend(storage)))
    assert opened.trials and SECRET not in json.dumps(opened.user_attrs)


@pytest.mark.redis
def test_a_password_in_redis_url_reaches_no_file(redis_url: str, tmp_path: Path) -> None:
    from retrieval.paths import data_dir

    if not (data_dir() / "gptcache_qqp").is_dir():
        pytest.skip(f"shared data folder {data_dir() / 'gptcache_qqp'} is absent")
    host = redis_url.split("://", 1)[1].split("@")[-1]
    url = f"redis://default:{SECRET}@{host}"
    spec = tmp_path / "cache.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "tiny-cache", "pairs": {"limit": 300, "seed": 0},
        "cache": {"name": f"rwb-safety-{os.getpid()}"},
        "latency": {"sizes": [200], "queries": 20, "warmup": 2},
        "tuning": {"max_false_hit": 0.2}}))
    run = tmp_path / "run"
    done = rwb("tune", "cache", str(spec), "--redis-url", url, "--out", str(run), "--json")
    assert done.returncode == 0, done.stderr
    report = rwb("report", str(run))
    assert report.returncode == 0, report.stderr
    exported = rwb("export", str(run), "--engine", "redisvl",
                   "--out", str(tmp_path / "exported" / "cache.yaml"))
    assert exported.returncode in (0, 1), exported.stderr  # 1: no threshold meets the cap
    for proc in (done, report, exported):
        assert SECRET not in proc.stdout + proc.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    assert f"redis://***@{host}" in manifest["command"] and manifest["status"] == "complete"
    assert (run / "report.html").is_file()
    for folder in ("run", "exported"):
        assert files_holding(tmp_path / folder, SECRET) == [], folder


def test_recorded_command_lines_are_masked() -> None:
    from retrieval.redact import redact_argv

    argv = ["rwb", "tune", "cache", "--redis-url", f"redis://:{SECRET}@h:1/0", "--password",
            SECRET, f"--api-key={SECRET}", "--tokenizer", "bert", f"postgresql://u:{SECRET}@db/x"]
    masked = redact_argv(argv)
    assert SECRET not in " ".join(masked)
    assert masked[4] == "redis://***@h:1/0" and masked[6] == "***"
    assert masked[7] == "--api-key=***" and masked[9] == "bert"  # not secret-named


def test_run_files_mask_secrets_but_keep_counts(tmp_path: Path) -> None:
    from retrieval.runs import RunDir

    run = RunDir.create(tmp_path / "r", "masking")
    run.write_json("x.json", {"uri": f"http://u:{SECRET}@h/", "token": SECRET, "tokens": 7})
    run.write_yaml("x.yaml", {"milvus": {"token": SECRET, "uri": "http://h:19530"}})
    assert files_holding(tmp_path, SECRET) == []
    assert json.loads(run.file("x.json").read_text())["tokens"] == 7
    assert yaml.safe_load(run.file("x.yaml").read_text())["milvus"]["uri"] == "http://h:19530"


# --- 2. run names ----------------------------------------------------------------------------
BAD_NAMES = ["../../../escaped", "/abs/name", "nul\x00byte", "..", ".hidden", "x" * 101]
SPEC_KINDS = {  # spec kind -> (example spec that names a run, its parser)
    "sweep/eval": ("quickstart", "retrieval.tune.spec:parse_spec"),
    "cache": ("qqp-cache", "retrieval.cache.spec:parse_cache_spec"),
    "rerank": ("scifact-rerank", "retrieval.rerank.spec:parse_rerank_spec"),
    "rag-study": ("rag-end-to-end", "retrieval.study.spec:parse_study_spec"),
    "bench fanout": ("fanout-3-collections", "retrieval.bench.fanout.spec:parse_fanout_spec"),
}


@pytest.mark.parametrize("kind", sorted(SPEC_KINDS))
@pytest.mark.parametrize("bad", BAD_NAMES, ids=["dotdot", "abs", "nul", "parent", "dot", "long"])
def test_every_spec_kind_checks_its_name(kind: str, bad: str) -> None:
    import importlib

    from retrieval.errors import ConfigError
    from retrieval.paths import REPO_ROOT
    from retrieval.specfile import read_yaml

    example, parser = SPEC_KINDS[kind]
    module, func = parser.split(":")
    parse = getattr(importlib.import_module(module), func)
    data = read_yaml(REPO_ROOT / "sweeps" / f"{example}.yaml")
    assert parse({**data, "name": "fine-name_1.v2"}).name == "fine-name_1.v2"
    with pytest.raises(ConfigError) as err:
        parse({**data, "name": bad}, source="x.yaml")
    text = str(err.value)
    assert "\n" not in text and text.startswith("x.yaml: field 'name'")
    assert "one path component" in text and repr(bad)[:60] in text


def test_a_bad_name_writes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    spec = tmp_path / "s.yaml"
    spec.write_text('name: "../escaped"\n' + yaml.safe_dump({k: v for k, v in SPEC.items()
                                                             if k != "name"}))
    assert main(["eval", str(spec)]) == 2
    assert "field 'name'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "s.yaml"]
    assert list((tmp_path / "runs").iterdir()) == []


# --- 3. existing folders -----------------------------------------------------------------------
def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sweep-run")
    spec = spec_file(folder)
    assert main(["sweep", str(spec), "--out", str(folder / "run"), "--json"]) == 0
    return folder / "run"


def test_eval_onto_a_sweep_run_is_refused(sweep_run: Path, tmp_path: Path, capsys) -> None:
    before = snapshot(sweep_run)
    assert {"summary.json", "study.db", "trials.parquet", "manifest.json"} <= set(before)
    capsys.readouterr()
    assert main(["eval", str(spec_file(tmp_path)), "--out", str(sweep_run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "non-empty folder" in err and "--force" in err
    assert "rwb sweep run" in err  # says what it would have destroyed
    assert snapshot(sweep_run) == before


def test_a_non_empty_folder_needs_force(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    spec = spec_file(tmp_path)
    assert main(["eval", str(spec), "--out", str(out)]) == 2
    assert "non-empty folder" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert main(["eval", str(spec), "--out", str(out), "--force", "--json"]) == 0
    assert (out / "notes.txt").read_text() == "keep me"
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["eval", str(spec), "--out", str(empty), "--json"]) == 0  # empty: fine


def test_no_write_follows_a_planted_link(tmp_path: Path, capsys) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    out = tmp_path / "run"
    out.mkdir()
    (out / "spec.yaml").symlink_to(outside)
    spec = spec_file(tmp_path)
    assert main(["eval", str(spec), "--out", str(out), "--force"]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "spec.yaml" in err
    assert outside.read_text() == "precious"
    # a link in place of a temporary name is not followed either (fresh temp files)
    (out / "spec.yaml").unlink()
    (out / "manifest.json.tmp").symlink_to(outside)
    (out / "work").mkdir()
    assert main(["eval", str(spec), "--out", str(out), "--force", "--json"]) == 0
    assert outside.read_text() == "precious" and (out / "manifest.json.tmp").is_symlink()


def test_resuming_the_same_sweep_still_works(sweep_run: Path, tmp_path: Path, capsys) -> None:
    summary = json.loads((sweep_run / "summary.json").read_text())
    spec = spec_file(tmp_path)
    assert main(["sweep", str(spec), "--out", str(sweep_run), "--json"]) == 0  # resumed
    again = json.loads(capsys.readouterr().out)
    assert again["evaluations"] == summary["evaluations"]  # nothing measured twice
    assert json.loads((sweep_run / "manifest.json").read_text())["status"] == "complete"
    # another study into the same folder is not a resume
    assert main(["sweep", str(spec), "--out", str(sweep_run), "--study", "other"]) == 2
    assert "non-empty folder" in capsys.readouterr().err
    # the same study from another spec: refused by the study check, nothing overwritten
    before = snapshot(sweep_run)
    assert main(["sweep", str(spec_file(tmp_path, k=5)), "--out", str(sweep_run)]) == 2
    assert "different spec" in capsys.readouterr().err
    assert snapshot(sweep_run) == before


# --- 5. failed and killed runs ------------------------------------------------------------------
def test_a_failed_eval_says_so_and_is_not_exported(tmp_path: Path, capsys) -> None:
    spec = spec_file(tmp_path, k=100, dataset={"kind": "synthetic", "n": 50, "n_queries": 10,
                                                "dim": 8, "n_clusters": 2})
    out = tmp_path / "run"
    assert main(["eval", str(spec), "--out", str(out)]) == 2
    assert "number of base vectors" in capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "number of base vectors (50)" in manifest["error"]
    assert not (out / "work").exists() and not (out / "summary.json").exists()
    assert main(["export", str(out), "--engine", "faiss", "--out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "failed" in err and "nothing to export" in err
    assert not (tmp_path / "x.yaml").exists()


def test_a_run_failing_before_its_manifest_leaves_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "new" / "run"
    spec = spec_file(tmp_path, dataset={"kind": "npy", "metric": "l2",
                                        "base": str(tmp_path / "none.npy"),
                                        "queries": str(tmp_path / "none.npy")})
    assert main(["eval", str(spec), "--out", str(out)]) == 3  # the data is not here (exit 3)
    err = capsys.readouterr().err
    assert err.startswith("rwb: not measurable here:") and "none.npy" in err, err
    assert not out.exists()


@pytest.mark.parametrize("manifest", [
    {"kind": "sweep", "status": "running", "run_id": "killed"},  # killed mid-way
    {"run_id": "old-killed"},  # a killed sweep of an rwb without status: no kind, no summary
])
def test_a_killed_sweep_is_not_exported_as_eval(manifest: dict[str, str], tmp_path: Path,
                                                capsys) -> None:
    run = tmp_path / "killed"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "spec.yaml").write_text(yaml.safe_dump(SPEC))
    assert main(["export", str(run), "--engine", "faiss", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "incomplete" in err and "killed" in err
    assert "eval" not in err


def test_export_and_report_do_not_replace_foreign_files(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "real.yaml"
    spec.write_text(yaml.safe_dump(REAL))
    sweep_run = tmp_path / "run"
    assert main(["sweep", str(spec), "--out", str(sweep_run), "--json"]) == 0
    foreign = tmp_path / "config.yaml"
    foreign.write_text("my: own config\n")
    export = ["export", str(sweep_run), "--engine", "hnswlib", "--out", str(foreign)]
    assert main(export) == 2
    assert "not written by rwb" in capsys.readouterr().err
    assert foreign.read_text() == "my: own config\n"
    assert main([*export, "--force"]) == 0  # replaced on request
    assert "my: own" not in foreign.read_text()
    assert main(export) == 0  # an rwb export may be rewritten
    page = tmp_path / "page.html"
    page.write_text("<html>mine</html>")
    assert main(["report", str(sweep_run), "--out", str(page)]) == 2
    assert page.read_text() == "<html>mine</html>"
    assert main(["report", str(sweep_run), "--out", str(page), "--force"]) == 0
    assert main(["report", str(sweep_run), "--out", str(page)]) == 0  # rwb's own page
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    link = tmp_path / "link.yaml"
    link.symlink_to(outside)
    assert main(["export", str(sweep_run), "--engine", "hnswlib", "--out", str(link),
                 "--force"]) == 2
    assert "symbolic link" in capsys.readouterr().err and outside.read_text() == "precious"


def test_a_sweep_does_not_open_a_planted_study_db(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    outside = tmp_path / "outside.db"
    outside.write_bytes(b"precious")
    (run / "study.db").symlink_to(outside)
    assert main(["sweep", str(spec_file(tmp_path)), "--out", str(run), "--force"]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert outside.read_bytes() == b"precious"


def test_an_interrupted_run_is_marked_failed(tmp_path: Path) -> None:
    from retrieval.runs import RunDir

    run = RunDir.create(tmp_path / "r", "interrupted")
    with pytest.raises(KeyboardInterrupt), run.recording():
        run.write_manifest(kind="eval")
        (run.work_dir() / "milvus-0").write_text("index")
        raise KeyboardInterrupt
    manifest = json.loads(run.file("manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["error"] == "interrupted"
    assert not run.file("work").exists()


def test_force_keeps_a_work_folder_the_user_had(tmp_path: Path, capsys) -> None:
    """Issue 34 HIGH 1: ``--force`` into a folder holding the user's ``work/``: the run's
    scratch goes elsewhere (rwb's marker inside) and the user's folder is kept, byte for byte."""
    out = tmp_path / "r"
    (out / "work").mkdir(parents=True)
    (out / "work" / "t.txt").write_text("thesis")
    assert main(["eval", str(spec_file(tmp_path)), "--out", str(out), "--force", "--json"]) == 0
    capsys.readouterr()
    assert (out / "work" / "t.txt").read_text() == "thesis"
    assert sorted(p.name for p in (out / "work").iterdir()) == ["t.txt"]
    assert not list(out.glob(".rwb-work-*"))  # rwb's own scratch removed at the end


def test_force_keeps_a_file_named_work(tmp_path: Path, capsys) -> None:
    """Issue 34 LOW: ``--out DIR --force`` where ``DIR/work`` is a file: kept, the run works."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "work").write_text("notes")
    assert main(["eval", str(spec_file(tmp_path)), "--out", str(out), "--force", "--json"]) == 0
    capsys.readouterr()
    assert (out / "work").read_text() == "notes" and not list(out.glob(".rwb-work-*"))


def test_a_failed_run_keeps_a_work_folder_the_user_had(tmp_path: Path) -> None:
    from retrieval.runs import RunDir

    run = RunDir.create(tmp_path / "r", "failing")
    (run.file("work")).mkdir()
    (run.file("work") / "t.txt").write_text("thesis")
    with pytest.raises(RuntimeError), run.recording():
        run.write_manifest(kind="eval")
        scratch = run.work_dir()
        assert scratch != run.file("work") and (scratch / ".rwb-scratch").is_file()
        raise RuntimeError("boom")
    assert (run.file("work") / "t.txt").read_text() == "thesis" and not scratch.exists()


def test_export_does_not_replace_a_run_directory_record(tmp_path: Path, capsys) -> None:
    """A run's manifest.json holds rwb's own marks (``rwb_version``, ``kind``): an export pointed
    at it is still refused without --force, and the run stays intact."""
    spec = tmp_path / "real.yaml"
    spec.write_text(yaml.safe_dump(REAL))
    sweep_run = tmp_path / "run"
    assert main(["sweep", str(spec), "--out", str(sweep_run), "--json"]) == 0
    other = tmp_path / "other"
    assert main(["eval", str(spec), "--out", str(other), "--json"]) == 0
    capsys.readouterr()
    target = other / "manifest.json"
    before = target.read_text()
    assert main(["export", str(sweep_run), "--engine", "hnswlib", "--out", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not written by rwb" in err
    assert target.read_text() == before


def test_every_manifest_records_the_machine_load(tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 34 new user 7: the load average (and CPU steal where readable) beside latencies,
    at the start and the end of the run, and whether the machine was busy."""
    import os as _os

    monkeypatch.setattr(_os, "getloadavg", lambda: (64.0, 32.0, 16.0))
    out = tmp_path / "r"
    assert main(["eval", str(spec_file(tmp_path)), "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    load = json.loads((out / "manifest.json").read_text())["machine_load"]
    assert load["start"]["load_average"] == [64.0, 32.0, 16.0]
    assert load["end"]["cpus"] == _os.cpu_count() and "steal_fraction" in load["end"]
    assert load["busy"] is True
