"""An rwb study opens meaningfully in Optuna (and so in optuna-dashboard): the objective is named
with its unit, one unit per study, every measured trial carries its recall constraint, and an
infeasible trial is never among the best."""

from __future__ import annotations

import json
import textwrap

import optuna
import pytest
from optuna.study import StudyDirection
from optuna.trial import TrialState

import retrieval.testing.fake  # noqa: F401  (registers backend "fake")
from retrieval.cli import main
from retrieval.tune import trials as tr

pytestmark = pytest.mark.slow  # cost tier: docs/development.md

TARGET = 0.8

SPEC = textwrap.dedent(f"""\
    name: optuna-storage
    dataset: synthetic-small
    k: 10
    warmup: 2
    batch_repeats: 1
    target_recall: {TARGET}
    tune: {{search_range: {{ef_search: [1, 24]}}}}
    indexes:
      - backend: fake
        build: {{quality: [1.0, 0.5], half_ef: 4, us_per_ef: 0.0}}
        search: {{ef_search: [1, 2, 4, 8, 16, 24]}}
""")


def sweep(tmp_path, *args: str) -> tuple[dict, optuna.Study]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    assert main(["sweep", str(spec), "--out", str(out), "--json", *args]) == 0
    summary = json.loads((out / "summary.json").read_text())
    storage = summary["study"]["storage"]
    if storage.startswith("journal:"):
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        opened = JournalStorage(JournalFileBackend(storage.split(":", 1)[1]))
        study = optuna.load_study(study_name=summary["study"]["name"], storage=opened)
    else:
        study = optuna.load_study(study_name=summary["study"]["name"], storage=storage)
    return summary, study


def check_constraints(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Every measured trial has its constraint (Optuna's named one and the list the dashboard
    reads) equal to target - recall lower bound; returns the infeasible ones."""
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert done
    infeasible = []
    for t in done:
        lb = t.user_attrs[tr.RESULT]["recall_lb"]
        assert t.constraints[tr.CONSTRAINT] == pytest.approx(TARGET - lb)
        assert t.system_attrs[tr.DASHBOARD_CONSTRAINTS] == [pytest.approx(TARGET - lb)]
        if TARGET - lb > 0:
            infeasible.append(t)
    return infeasible


def test_optuna_strategy_names_its_objective_and_constraint(tmp_path):
    _summary, study = sweep(tmp_path, "--strategy", "optuna", "--n-trials", "2")
    assert study.metric_names == ["batch_ms_per_query"]
    assert study.directions == [StudyDirection.MINIMIZE]
    assert "batch_ms_per_query" in study.user_attrs[tr.OBJECTIVE_ATTR]
    assert tr.CONSTRAINT in study.user_attrs[tr.CONSTRAINT_ATTR]
    done = study.get_trials(states=(TrialState.COMPLETE,))
    # one unit for the whole column: every value is 1000 / QPS of that trial's batch pass
    for t in done:
        assert t.value == pytest.approx(1000.0 / t.user_attrs[tr.RESULT]["qps"])
        assert t.user_attrs[tr.VALUE] == "batch_ms_per_query"
    infeasible = check_constraints(study)
    assert infeasible  # quality 0.5 never reaches the target; low ef misses it too
    best = study.best_trials
    assert best and all(max(t.constraints.values()) <= 0 for t in best)
    assert not {t.number for t in infeasible} & {t.number for t in best}
    assert study.best_trial.number in {t.number for t in best}


def test_grid_strategy_objective_is_p95_in_ms_in_a_journal_file(tmp_path):
    log = tmp_path / "study.log"
    _summary, study = sweep(tmp_path, "--strategy", "grid", "--storage", f"journal:{log}")
    assert study.metric_names == ["p95_ms"]
    assert study.directions == [StudyDirection.MINIMIZE]
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        assert t.value == pytest.approx(t.user_attrs[tr.RESULT]["p95_ms"])
    infeasible = check_constraints(study)
    assert infeasible
    assert not {t.number for t in infeasible} & {t.number for t in study.best_trials}
    threads = json.loads((tmp_path / "run" / "manifest.json").read_text())["threads"]
    assert threads["spec_threads"] == 1 and threads["faiss_omp_max_threads"] >= 1


def test_a_journal_file_rwb_did_not_create_is_refused(tmp_path, capsys):
    """Issue 34 MEDIUM 7: ``--storage notes.log`` never appends Optuna's journal to the user's
    file; a journal rwb wrote earlier is reopened (a resume)."""
    notes = tmp_path / "notes.log"
    notes.write_text("my notes\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "r1"), "--storage",
                 str(notes)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not an Optuna journal" in err, err
    assert notes.read_text() == "my notes\n"
    journal = tmp_path / "study.log"
    assert main(["sweep", str(spec), "--out", str(tmp_path / "r2"), "--strategy", "grid",
                 "--storage", str(journal), "--json"]) == 0
    capsys.readouterr()
    assert main(["sweep", str(spec), "--out", str(tmp_path / "r3"), "--strategy", "grid",
                 "--storage", str(journal), "--json"]) == 0  # rwb's journal: taken


def test_qps_objective_is_maximised_qps(tmp_path):
    spec = SPEC.replace("tune: {", "tune: {objective: qps, ")
    (tmp_path / "spec.yaml").write_text(spec)
    out = tmp_path / "run"
    assert main(["sweep", str(tmp_path / "spec.yaml"), "--strategy", "target", "--out",
                 str(out), "--json"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    study = optuna.load_study(study_name=summary["study"]["name"],
                              storage=summary["study"]["storage"])
    assert study.metric_names == ["qps"]
    assert study.directions == [StudyDirection.MAXIMIZE]
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        assert t.value == pytest.approx(t.user_attrs[tr.RESULT]["qps"])



@pytest.mark.pgvector
def test_study_in_postgresql_opens_in_optuna(tmp_path, pg_storage_url):
    """The same study in Optuna's RDBStorage on a real PostgreSQL (``postgresql+psycopg://``):
    a named objective, a recall constraint on every measured trial, no infeasible best; the
    recorded storage URL carries no credentials."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    out = tmp_path / "run"
    assert main(["sweep", str(spec), "--strategy", "target", "--storage", pg_storage_url,
                 "--out", str(out), "--json"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    recorded = summary["study"]["storage"]
    assert recorded.startswith("postgresql+psycopg://***@"), recorded
    study = optuna.load_study(study_name=summary["study"]["name"], storage=pg_storage_url)
    assert study.directions == [StudyDirection.MINIMIZE]
    infeasible = check_constraints(study)
    assert infeasible  # quality 0.5 never reaches the target
    assert not {t.number for t in infeasible} & {t.number for t in study.best_trials}


def _dashboard_get(app, path: str) -> dict:
    """GET ``path`` from optuna-dashboard's WSGI app (its own JSON API, no server)."""
    import io

    status: list[str] = []
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "",
               "SERVER_NAME": "localhost", "SERVER_PORT": "80", "wsgi.url_scheme": "http",
               "wsgi.input": io.BytesIO(), "wsgi.errors": io.StringIO(), "HTTP_ACCEPT": "*/*"}
    body = b"".join(app(environ, lambda s, h, *a: status.append(s)))
    assert status and status[0].startswith("200"), (status, body[:300])
    return json.loads(body)


def test_dashboard_shows_recall_and_latency_as_trial_columns(tmp_path):
    """optuna-dashboard's API lists recall, recall_lower, p95_ms and qps among the study's
    sortable (numeric) trial user attributes, with each measured trial's values."""
    od = pytest.importorskip("optuna_dashboard")
    _summary, study = sweep(tmp_path, "--strategy", "grid")
    app = od.wsgi(study._storage)
    studies = _dashboard_get(app, "/api/studies")["study_summaries"]
    sid = next(s["study_id"] for s in studies if s["study_name"] == study.study_name)
    detail = _dashboard_get(app, f"/api/studies/{sid}")
    columns = {a["key"]: a["sortable"] for a in detail["union_user_attrs"]}
    for key in tr.FLAT_ATTRS:
        assert columns.get(key) is True, (key, columns)
    done = [t for t in detail["trials"] if t["state"] == "Complete"]
    assert done
    for t in done:
        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
        result = json.loads(attrs[tr.RESULT])
        assert float(attrs["recall"]) == pytest.approx(result["recall"])
        assert float(attrs["recall_lower"]) == pytest.approx(result["recall_lb"])
        assert float(attrs["p95_ms"]) > 0 and float(attrs["qps"]) > 0
