"""``rwb sweep`` with a target: the default strategy is ``target`` (a spec that sets
``tune.strategy`` keeps it), the header says which strategy ran, a miss prints a hint, and
``--strict`` exits 1 when a backend has no config meeting the target (issue 25 item 5).
Runs the seeded FakeIndex on synthetic-small: seconds."""

from __future__ import annotations

import pytest
import yaml

import retrieval
import retrieval.testing.fake  # registers backend "fake"
from retrieval.cli import main
from retrieval.tune.spec import parse_spec
from retrieval.tune.sweep import apply_overrides

pytestmark = pytest.mark.slow  # cost tier: docs/development.md


def spec_dict(target: float | None = 0.8, search: tuple[int, ...] = (16, 36),
              **tune: object) -> dict[str, object]:
    d: dict[str, object] = {
        "name": "defaults", "dataset": "synthetic-small", "k": 10, "warmup": 2,
        "batch_repeats": 1,
        "indexes": [{"backend": "fake",
                     "build": {"quality": 1.0, "half_ef": 4, "us_per_ef": 0.0},
                     "search": {"ef_search": list(search)}}],
        "tune": {"search_range": {"ef_search": [1, 64]}, **tune},
    }
    if target is not None:
        d["target_recall"] = target
    return d


def test_a_target_makes_target_the_default_strategy():
    assert parse_spec(spec_dict()).tune.strategy == "target"
    assert parse_spec(spec_dict(target=None)).tune.strategy == "grid"
    # explicit in the spec: kept
    assert parse_spec(spec_dict(strategy="grid")).tune.strategy == "grid"
    # a target given as an override (API keyword = --target-recall) also selects target ...
    assert apply_overrides(parse_spec(spec_dict(target=None)), target=0.8).tune.strategy == \
        "target"
    # ... an explicit override wins, and another tune override keeps the default resolution
    spec = parse_spec(spec_dict())
    assert apply_overrides(spec, strategy="grid").tune.strategy == "grid"
    assert apply_overrides(spec, n_trials=3).tune.strategy == "target"


def test_the_api_runs_target_without_a_strategy(tmp_path):
    run = retrieval.sweep(spec_dict(), out=tmp_path / "run")
    assert run.summary.strategy == "target"


def test_cli_header_names_the_strategy_and_strict_exits_1_on_a_miss(tmp_path, capsys):
    path = tmp_path / "miss.yaml"  # recall 0.9 at most below ef 64: 0.99 is out of reach
    path.write_text(yaml.safe_dump(spec_dict(target=0.99, search=(4, 8), strategy="grid")))
    assert main(["sweep", str(path), "--out", str(tmp_path / "a")]) == 0  # reported only
    out = capsys.readouterr().out
    assert "strategy grid (every listed value)" in out
    assert "fake: no config meets the target: best measured: ef_search=8" in out
    assert "list larger search values, or run --strategy target" in out
    assert main(["sweep", str(path), "--out", str(tmp_path / "b"), "--strict"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rwb sweep: --strict: no config meets target 0.99 for fake")
    # target search reaching the top of its range: suggests a wider tune.search_range
    path.write_text(yaml.safe_dump(spec_dict(target=0.99, search=(4,),
                                             search_range={"ef_search": [1, 8]})))
    assert main(["sweep", str(path), "--out", str(tmp_path / "c"), "--strict"]) == 1
    out = capsys.readouterr().out
    assert "strategy target (smallest knob value meeting the target)" in out
    assert "ef_search [1, 8]" in out and "widen tune.search_range" in out


def test_quickstart_without_milvus_loads_with_a_warning(tmp_path, caplog):
    """sweeps/quickstart.yaml invites dropping Milvus; its tune.search_range.ef then names a
    knob no remaining backend has: warned and ignored, a typo is still refused."""
    import logging
    from pathlib import Path

    import pytest

    from retrieval.errors import ConfigError
    from retrieval.tune.units import check_ranges_used

    data = yaml.safe_load(Path("sweeps/quickstart.yaml").read_text())
    data["indexes"] = [e for e in data["indexes"] if e["backend"] != "milvus"]
    with caplog.at_level(logging.WARNING):
        check_ranges_used(parse_spec(data, source="quickstart.yaml"))
    assert "tune.search_range.ef' ignored" in caplog.text
    data["tune"]["search_range"]["ef_serach"] = [10, 20]
    with pytest.raises(ConfigError, match=r"tune\.search_range\.ef_serach"):
        check_ranges_used(parse_spec(data, source="quickstart.yaml"))


def test_byo_examples_go_to_the_current_folder(tmp_path, monkeypatch):
    import runpy
    from pathlib import Path

    script = Path("scripts/make_byo_examples.py").resolve()
    mod = runpy.run_path(str(script), run_name="byo")
    monkeypatch.chdir(tmp_path)
    assert mod["default_out"]() == tmp_path / "runs" / "byo-data"
