"""Parameter models: pydantic v2, ``extra="forbid"``, errors in the rwb format."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from retrieval.errors import ConfigError, short_repr

M = TypeVar("M", bound=BaseModel)


class Params(BaseModel):
    """Base of every build/search parameter model: unknown keys are errors; values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _describe_expected(err: Mapping[str, Any]) -> str:
    ctx = err.get("ctx") or {}
    kind = err.get("type", "")
    if kind.startswith("greater_than_equal"):
        return f">= {ctx.get('ge')}"
    if kind.startswith("greater_than"):
        return f"> {ctx.get('gt')}"
    if kind.startswith("less_than_equal"):
        return f"<= {ctx.get('le')}"
    if kind.startswith("less_than"):
        return f"< {ctx.get('lt')}"
    if kind == "literal_error":
        return str(ctx.get("expected", "one of the allowed values"))
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "an integer"
    if kind in ("float_parsing", "float_type"):
        return "a number"
    if kind in ("bool_parsing", "bool_type"):
        return "true or false"
    if kind in ("string_type",):
        return "a string"
    if kind in ("list_type",):
        return "a list"
    if kind in ("dict_type", "model_type"):
        return "a mapping"
    if kind == "missing":
        return "given (it is required)"
    if kind == "finite_number":
        return "a finite number"
    if kind in ("too_short", "too_long"):
        n = ctx.get("min_length" if kind == "too_short" else "max_length")
        got = err.get("input")
        what = ("a list" if isinstance(got, list) else "a mapping" if isinstance(got, dict)
                else "a collection")
        least = "at least" if kind == "too_short" else "at most"
        return f"{what} of {least} {n} item{'s' * (n != 1)}"
    if kind in ("string_too_short", "string_too_long"):
        n = ctx.get("min_length" if kind == "string_too_short" else "max_length")
        least = "at least" if kind == "string_too_short" else "at most"
        return f"a string of {least} {n} character{'s' * (n != 1)}"
    # pydantic's own sentence ("Input should be a valid URL"), as what it must be
    msg = str(err.get("msg", "valid"))
    for lead in ("Input should be ", "Value should be "):
        if msg.startswith(lead):
            return msg.removeprefix(lead)
    return msg


def _public_fields(model: type[BaseModel]) -> list[str]:
    """The names a user may write for ``model`` (aliases where set; excluded/internal fields,
    like a spec's ``source``, left out)."""
    return sorted((f.alias or name) for name, f in model.model_fields.items()
                  if not f.exclude and not name.startswith("_"))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``annotation`` (itself, or inside Optional/list/dict/Union)."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _model_at(model: type[BaseModel], path: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that validates the mapping at ``path`` (field names; list indexes and dict
    keys skipped) inside ``model``; None when the path reaches a field that is no model."""
    current: type[BaseModel] | None = model
    for part in path:
        if current is None:
            return None
        fields = {(f.alias or n): f for n, f in current.model_fields.items()}
        field = fields.get(part) if isinstance(part, str) else None
        if field is None:
            continue  # a list index or a dict key: the same model
        current = _model_in(field.annotation)
    return current


def _strip_internal(value: Any, model: type[BaseModel] | None) -> Any:
    """``value`` without the keys of excluded/internal fields (never shown in messages)."""
    if not isinstance(value, dict) or model is None:
        return value
    hidden = {n for n, f in model.model_fields.items() if f.exclude}
    return {k: v for k, v in value.items() if k not in hidden}


#: the longest "received" value an error line shows (characters)
RECEIVED_MAX = 200


def format_validation_error(
    exc: ValidationError, model: type[BaseModel], *, where: str | None, prefix: str = ""
) -> ConfigError:
    """Turn the first pydantic error into one rwb ConfigError line naming field/allowed/received.

    An unknown key lists the fields of the block it is in (nested blocks too); a missing field
    shows no "received" (pydantic's input there is the whole enclosing mapping); excluded
    internal fields (a spec's ``source``) are never shown.
    """
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.get("loc", ()))
    loc = loc.removeprefix(".")  # indexes[0].build, the same form rwb's own checks use
    field = f"{prefix}{loc}" if prefix and loc else (prefix.rstrip(".") or loc)
    if err.get("type") == "extra_forbidden":
        import difflib

        name = str(err["loc"][-1])
        block = _model_at(model, tuple(err["loc"][:-1]))
        known = _public_fields(block) if block is not None else []
        allowed = ", ".join(known) if known else "none"
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
        if not close:
            close = [k for k in known if k.lower() == name.lower() or k.startswith(name)][:1]
        hint = f" Did you mean '{close[0]}'?" if close else ""
        text = f"unknown parameter '{name}' (field '{field}'); allowed: {allowed}.{hint}"
        return ConfigError(f"{where}: {text}" if where else text)
    received = _strip_internal(err.get("input"), _model_at(model, tuple(err["loc"][:-1])))
    if err.get("type") == "missing":
        text = f"field '{field}' must be {_describe_expected(err)}"
        return ConfigError(f"{where}: {text}" if where else text)
    shown = short_repr(received, RECEIVED_MAX)  # cut, as a YAML alias bomb can be huge
    text = f"field '{field}' must be {_describe_expected(err)}; received {shown}"
    if err.get("type") == "value_error":
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        if len(msg) > 2 * RECEIVED_MAX:
            msg = msg[: 2 * RECEIVED_MAX - 3] + "..."
        text = f"field '{field}': {msg}"
        if received is not None and not isinstance(received, dict) and "received" not in text:
            text += f"; received {shown}"  # unless the validator said it already
    return ConfigError(f"{where}: {text}" if where else text)


def validate_params(
    model: type[M], data: Mapping[str, Any] | None, *, where: str | None = None, prefix: str = ""
) -> M:
    """Validate ``data`` against ``model``; raise a one-line ConfigError on failure."""
    try:
        return model.model_validate(dict(data or {}))
    except ValidationError as exc:
        raise format_validation_error(exc, model, where=where, prefix=prefix) from None


# --- run names -------------------------------------------------------------------------------
#: a spec ``name`` becomes a folder name (``runs/<name>-<stamp>``): one path component
RUN_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
RUN_NAME_MAX = 100
RUN_NAME_ALLOWED = (
    f"one path component: a letter or digit, then letters, digits, '_', '.', '-' "
    f"(at most {RUN_NAME_MAX} characters)"
)


def check_run_name(value: Any) -> str:
    """``value`` if it is a safe run name (see :data:`RUN_NAME_ALLOWED`), else ValueError."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string: {RUN_NAME_ALLOWED}")
    if len(value) > RUN_NAME_MAX or not re.fullmatch(RUN_NAME_PATTERN, value):
        raise ValueError(f"must be {RUN_NAME_ALLOWED}")
    return value


#: the type of every spec field that names a run (sweep/eval, cache, rerank, study, bench)
RunName = Annotated[str, AfterValidator(check_run_name)]

#: the largest seed every seeded library takes (numpy's legacy seeding, Optuna: 0 .. 2**32 - 1)
SEED_MAX = 2**32 - 1
#: a spec's ``seed``: an integer in [0, 2**32 - 1], refused in one line otherwise
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
