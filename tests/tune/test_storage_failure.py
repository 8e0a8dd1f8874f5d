"""Only a connection error raised inside Optuna's storage code is "the storage stopped
answering"; the same error from elsewhere (an index backend's server) is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.tune.storage import StorageLost, storage_failure, storage_lost


def test_a_connection_error_outside_optuna_is_not_the_storage() -> None:
    try:
        raise ConnectionError("index server gone")
    except ConnectionError as exc:
        assert storage_failure(exc) is None


def test_a_dead_sqlite_storage_is_found_behind_optunas_wrapper(tmp_path: Path) -> None:
    import optuna
    import sqlalchemy.exc

    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 's.db'}")
    study = optuna.create_study(storage=storage, study_name="s")
    (tmp_path / "s.db").unlink()  # the database gone: the driver fails every statement
    storage.engine.dispose()
    with pytest.raises(optuna.exceptions.StorageInternalError) as info:
        study.set_user_attr("x", 1)
    cause = storage_failure(info.value)
    assert isinstance(cause, sqlalchemy.exc.OperationalError)
    lost = storage_lost("postgresql://***@db/x", cause, tmp_path)
    assert isinstance(lost, StorageLost) and lost.run_path == tmp_path
    text = str(lost)
    assert "\n" not in text and text.startswith("--storage 'postgresql://***@db/x' stopped")
    assert "OperationalError" in text and "exceeding max length" not in text
