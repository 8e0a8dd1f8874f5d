"""Read a YAML spec file: one place for the file/parse errors every spec loader reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from retrieval.errors import ConfigError


def read_yaml_file(path: str | Path) -> Any:
    """Parsed YAML of ``path``; ConfigError naming the file (and line/column for bad YAML)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"spec file '{p}' does not exist") from None
    except OSError as exc:
        raise ConfigError(f"spec file '{p}' cannot be read ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{p}: malformed YAML{loc}: {problem}") from None
