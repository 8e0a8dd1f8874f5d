"""THE spec loader: every YAML file rwb reads (specs, dataset manifests, exported configs) and every
spec model it validates goes through here.

- :func:`read_yaml` is the one place YAML is parsed: safe loading, duplicate keys refused, a file
  that is not UTF-8 or not valid YAML named with its line and column;
- :func:`load_model` checks "a mapping" and validates into a pydantic model (errors in the rwb
  one-line format: file, field, allowed values, value received);
- :func:`with_overrides` applies command-line overrides *through validation* (``--threads 600``
  is refused exactly as ``threads: 600`` in the file is).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from retrieval.errors import ConfigError
from retrieval.params import format_validation_error

M = TypeVar("M", bound=BaseModel)


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml's safe loader, but a key given twice in one mapping is an error (not last-wins)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                dup = key in seen
            except TypeError:  # unhashable key: let the base class report it
                break
            if dup:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, source: str, *, invalid: str = "malformed YAML") -> Any:
    """Parsed YAML of ``text``; ConfigError naming ``source`` (and line/column for bad YAML,
    introduced by ``invalid``)."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except RecursionError:  # thousands of nested levels: the parser's stack runs out
        raise ConfigError(f"{source}: {invalid}: nested too deeply (more than Python's "
                          f"recursion limit of {sys.getrecursionlimit()} levels); a spec "
                          f"needs a few") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source}: {invalid}{loc}: {problem}") from None


def read_text(path: str | Path, *, what: str = "spec file") -> str:
    """UTF-8 text of ``path``; ConfigError naming the file if missing, unreadable or not UTF-8."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} '{p}' does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} '{p}' is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{p}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            f"save the {what} as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{what} '{p}' cannot be read ({exc.strerror})") from None


def read_yaml(
    path: str | Path, *, what: str = "spec file", invalid: str = "malformed YAML"
) -> Any:
    """Parsed YAML of the file ``path`` (see :func:`parse_yaml`, :func:`read_text`)."""
    return parse_yaml(read_text(path, what=what), str(path), invalid=invalid)


#: the former name, kept for callers outside rwb
read_yaml_file = read_yaml


def require_mapping(data: Any, source: str, what: str = "a spec") -> Mapping[str, Any]:
    """``data`` if it is a mapping; else ConfigError '<source>: <what> must be a YAML mapping'."""
    if not isinstance(data, Mapping):
        kind = type(data).__name__
        raise ConfigError(f"{source}: {what} must be a YAML mapping; received {kind}")
    return data


def validate_model(
    model: type[M], data: Mapping[str, Any], *, source: str, prefix: str = ""
) -> M:
    """``model`` validated from ``data``; a one-line ConfigError naming ``source`` on failure."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise format_validation_error(exc, model, where=source, prefix=prefix) from None


def load_model(
    src: str | Path | Mapping[str, Any] | Any,
    model: type[M],
    *,
    source: str | None = None,
    what: str = "a spec",
    extra: Mapping[str, Any] | None = None,
    check: Callable[[M], M] | None = None,
) -> M:
    """Read (a path) or take (parsed data) a spec, check it is a mapping, validate into ``model``.

    ``extra`` adds fields not written in the file (e.g. ``source``); ``check`` runs cross-field
    or cross-model validation once the model is built (its errors pass through unchanged).
    """
    if isinstance(src, str | Path):
        where = source or str(src)
        data = read_yaml(src)
    else:
        where = source or "<memory>"
        data = src
    mapping = require_mapping(data, where, what)
    spec = validate_model(model, {**mapping, **(extra or {})}, source=where)
    return check(spec) if check is not None else spec


def with_overrides(
    spec: M,
    *,
    source: str | None = None,
    check: Callable[[M], M] | None = None,
    **updates: Any,
) -> M:
    """A copy of ``spec`` with ``updates`` applied *and validated* (``None`` values are skipped).

    Unlike ``model_copy(update=)``, an override outside a field's range is refused with the same
    one-line error as the value written in the spec file.
    """
    given = {k: v for k, v in updates.items() if v is not None}
    if not given:
        return spec
    model = type(spec)
    data = {name: getattr(spec, name) for name in model.model_fields}
    where = source or str(getattr(spec, "source", "<memory>"))
    new = validate_model(model, {**data, **given}, source=f"{where} (command-line override)")
    return check(new) if check is not None else new


__all__ = [
    "load_model",
    "parse_yaml",
    "read_text",
    "read_yaml",
    "read_yaml_file",
    "require_mapping",
    "validate_model",
    "with_overrides",
]
