"""Reading and writing exported config files (YAML by default, JSON for ``.json``); everything
written passes through :func:`retrieval.redact.scrub` so that no secret reaches the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from retrieval.errors import ConfigError
from retrieval.redact import scrub
from retrieval.specfile import parse_yaml, read_text
from retrieval.store import write_atomic

FORMAT_VERSION = 1


def write_config(path: Path | str, doc: dict[str, Any]) -> Path:
    """Write ``doc`` (scrubbed) atomically; the format follows the suffix."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out '{p}': folder cannot be created ({exc.strerror})") from None
    clean = scrub(doc)
    if p.suffix.lower() == ".json":
        text = json.dumps(clean, indent=2) + "\n"
    else:
        text = yaml.safe_dump(clean, sort_keys=False, allow_unicode=True)
    try:
        write_atomic(p, text)  # never through a link
    except OSError as exc:
        raise ConfigError(f"--out '{p}': cannot be written ({exc.strerror})") from None
    return p


def read_config(path: Path | str) -> dict[str, Any]:
    """Read an exported file (through the shared reader for YAML); errors name the file."""
    p = Path(path)
    text = read_text(p, what="config file")
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}: not valid JSON ({str(exc).splitlines()[0]})") from None
    else:
        data = parse_yaml(text, str(p))
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: an exported config must be a mapping; received "
                          f"{type(data).__name__}")
    return data
