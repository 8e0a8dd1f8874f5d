"""Write the reference pages under docs/reference/ from the code, so they cannot drift:

- one page per spec kind, from its pydantic model (every field: name, type, default, what it is,
  nested models as their own tables);
- one page for the command line, from the argparse parser (every command and option).

    python scripts/gen_docs.py          write the pages
    python scripts/gen_docs.py --check  exit 1 when a page differs from what the code says
                                        (tests/project/test_docs_reference.py runs this)
"""

from __future__ import annotations

import argparse
import importlib
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference"

#: spec kind -> (page name, "module:Model", what the file is for)
SPECS: dict[str, tuple[str, str, str]] = {
    "sweep": ("sweep-spec", "retrieval.tune.spec:SweepSpec",
              "`rwb eval` / `rwb sweep` on an index spec (sweeps/*.yaml): the dataset, the "
              "indexes with their build and search grids, the target and how to tune."),
    "filters": ("filters-spec", "retrieval.filtering.spec:FilterSpec",
                "the `filters:` section of a sweep spec: filtered search workloads."),
    "load": ("load-spec", "retrieval.bench.load.spec:LoadSpec",
             "`rwb bench load`: latency under load (open / closed loop, SLOs)."),
    "fanout": ("fanout-spec", "retrieval.bench.fanout.spec:FanoutSpec",
               "`rwb bench fanout`: parallel retrieval over several collections with fusion."),
    "rerank": ("rerank-spec", "retrieval.rerank.spec:RerankSweepSpec",
               "`rwb tune rerank`: rerank depth and the BM25 fallback router."),
    "fusion": ("fusion-spec", "retrieval.fusion_tune.spec:FusionTuneSpec",
               "`rwb tune fusion`: hybrid fusion (dense + BM25) tuned on a dev split, judged "
               "on the test split with a paired significance test."),
    "cache": ("cache-spec", "retrieval.cache.spec:CacheTuneSpec",
              "`rwb tune cache`: semantic-cache thresholds on a real Redis."),
    "rag-study": ("rag-study-spec", "retrieval.study.spec:StudySpec",
                  "`rwb sweep` on a `kind: rag-study` spec: the cross-layer study."),
}
OPTIONAL_SPECS: dict[str, tuple[str, str, str]] = {
    "churn": ("churn-spec", "retrieval.churn.spec:ChurnSpec",
              "`rwb bench churn`: recall under inserts and deletes (runbooks)."),
    "profile": ("profile-spec", "retrieval.profiling.spec:ProfileSpec",
                "`rwb profile`: the retrieval pipeline traced stage by stage."),
}


def _load(target: str) -> type[BaseModel] | None:
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]
    except (ImportError, AttributeError):
        return None


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is None:
        return getattr(tp, "__name__", str(tp)).replace("NoneType", "null")
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return " \\| ".join(repr(a) for a in args)
    name = getattr(origin, "__name__", str(origin))
    if name in ("Union", "UnionType"):
        return " \\| ".join(_type_name(a) for a in args)
    if name == "Annotated":
        return _type_name(args[0])
    inner = ", ".join(_type_name(a) for a in args)
    return f"{name}[{inner}]"


def _default(field: Any) -> str:
    if field.default is not PydanticUndefined:
        value = field.default
    elif field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "(computed)"
    else:
        return "**required**"
    if isinstance(value, BaseModel):
        return "(its defaults, below)"
    text = repr(value)
    return "`" + (text if len(text) <= 60 else text[:57] + "...") + "`"


def _models_in(tp: Any) -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    for arg in typing.get_args(tp):
        out += _models_in(arg)
    return out


def _source_notes(model: type[BaseModel]) -> dict[str, str]:
    """Field notes written in the class body: ``#:`` comment lines above a field, or a trailing
    ``# ...`` comment on its line (many models say it there rather than in ``description``)."""
    import inspect
    import re

    try:
        src = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    notes: dict[str, str] = {}
    above: list[str] = []
    for line in src:
        stripped = line.strip()
        if stripped.startswith("#:"):
            above.append(stripped[2:].strip())
            continue
        m = re.match(r"\s+(\w+)\s*:\s*[^=]+?(?:=.*)?$", line)
        if m and m.group(1) in model.model_fields:
            inline = line.split("  # ", 1)[1].strip() if "  # " in line else ""
            text = " ".join([*above, inline]).strip()
            if text:
                notes[m.group(1)] = text
        above = []
    return notes


def _doc(text: str | None) -> str:
    return " ".join((text or "").split())


def model_page(title: str, model: type[BaseModel], intro: str) -> str:
    lines = [f"# {title}", "", intro, "",
             f"Generated from `{model.__module__}.{model.__name__}` by `scripts/gen_docs.py`; "
             f"unknown keys are refused (one line naming the file and field, exit 2).", ""]
    seen: set[type[BaseModel]] = set()
    todo: list[tuple[str, type[BaseModel]]] = [("", model)]
    while todo:
        prefix, m = todo.pop(0)
        if m in seen:
            continue
        seen.add(m)
        head = f"`{prefix}`" if prefix else "top level"
        lines += [f"## {head} ({m.__name__})", ""]
        if _doc(m.__doc__):
            lines += [_doc(m.__doc__), ""]
        lines += ["| field | type | default | description |", "|---|---|---|---|"]
        notes = _source_notes(m)
        for name, field in m.model_fields.items():
            if field.exclude:
                continue
            desc = _doc(field.description or notes.get(name)).replace("|", "\\|")
            lines.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | "
                         f"{desc} |")
            for sub in _models_in(field.annotation):
                todo.append((f"{prefix}.{name}" if prefix else name, sub))
        lines.append("")
    return "\n".join(lines)


def cli_page() -> str:
    from retrieval.cli import build_parser

    parser = build_parser()
    lines = ["# Command line", "",
             "Every `rwb` command and option, generated from the parser by "
             "`scripts/gen_docs.py`. Exit codes: [exit-codes.md](../exit-codes.md).", ""]

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if path:
            lines.extend([f"## `{path}`", "", (p.description or "").strip(), "", "```text",
                          p.format_usage().strip(), "```", ""])
            opts = [a for a in p._actions
                    if not isinstance(a, argparse._SubParsersAction | argparse._HelpAction)]
            if opts:
                lines.extend(["| option | help |", "|---|---|"])
                for a in opts:
                    flag = ", ".join(a.option_strings) or a.dest
                    text = _doc(a.help).replace("|", "\\|")
                    lines.append(f"| `{flag}` | {text} |")
                lines.append("")
        for sp in subs:
            for name, child in sp.choices.items():
                walk(child, f"{path} {name}".strip() if path else f"rwb {name}")

    walk(parser, "")
    return "\n".join(lines)


def pages() -> dict[str, str]:
    out = {"cli.md": cli_page()}
    index = ["# Reference", "", "Generated by `scripts/gen_docs.py` (a test fails when a page "
             "is out of date).", "", "- [Command line](cli.md)"]
    for kind, (page, target, intro) in {**SPECS, **OPTIONAL_SPECS}.items():
        model = _load(target)
        if model is None:
            continue
        out[f"{page}.md"] = model_page(f"{kind} spec", model, intro)
        index.append(f"- [{kind} spec]({page}.md): {intro}")
    out["README.md"] = "\n".join(index) + "\n"
    return {name: text.rstrip() + "\n" for name, text in out.items()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        path = OUT / name
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"docs/reference is out of date ({', '.join(stale)}): run "
              f"python scripts/gen_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
