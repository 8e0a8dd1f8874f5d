"""The suite never touches the developer's own caches: the session fixture in tests/conftest.py
points every cache variable rwb reads at the session's tmp folder."""

from __future__ import annotations

import os
from pathlib import Path

from retrieval.indexes.buildcache import default_root
from retrieval.paths import cache_dir


def test_caches_are_the_sessions_own(_private_caches: Path) -> None:
    home = Path.home() / ".cache"
    for path in (cache_dir(), default_root(), Path(os.environ["HF_HOME"]),
                 Path(os.environ["TORCH_HOME"])):
        assert path.is_relative_to(_private_caches), path
        assert not path.is_relative_to(home), path
    assert cache_dir() == _private_caches / "rwb"
