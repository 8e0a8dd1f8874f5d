"""Rename a module or package of ``retrieval`` and rewrite every reference to it (issue 19).

    python scripts/rename_module.py OLD NEW [--layer-token NEW_TOKEN | --drop-layer]

``OLD`` / ``NEW`` are dotted names below ``retrieval`` (``export`` -> ``exporting``,
``embedrt`` -> ``embed.runtimes``). The file or folder is moved with ``git mv``; in every tracked
text file, ``retrieval.OLD`` becomes ``retrieval.NEW`` where it names the module (followed by
``.``, ``:``, a quote, a backtick, whitespace or the end of the line: imports, logger names,
``module:function`` strings, ``:mod:`` roles), never where it names a verb of the package face
(``retrieval.export(...)``, ``:func:`retrieval.export```); ``retrieval/OLD/`` and
``retrieval/OLD.py`` paths follow. In pyproject.toml the packages list follows, and the layers
contract names the new top-level name (or drops the old one, ``--drop-layer``, when the module
moves inside another package of the contract). Mechanical by design: run it, review the diff,
commit it alone. Changed Python files get ruff's import sorting (``--select I --fix``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = (".py", ".pyi", ".md", ".toml", ".ipynb", ".sh", ".cfg", ".ini", ".yaml", ".yml",
        ".txt", "Makefile")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout


def move(old: str, new: str) -> None:
    src = ROOT / "retrieval" / Path(*old.split("."))
    dst = ROOT / "retrieval" / Path(*new.split("."))
    if not src.is_dir():
        src, dst = src.with_suffix(".py"), dst.with_suffix(".py")
    if not src.exists():
        sys.exit(f"rename_module: no module retrieval.{old}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    _git("mv", str(src), str(dst))


def rewrite(text: str, old: str, new: str) -> str:
    dotted = re.compile(
        r"(?<![\w.])(?<!:func:`)retrieval\." + re.escape(old) + r"(?=[.:\s\"'`]|$)",
        re.MULTILINE)
    text = dotted.sub(f"retrieval.{new}", text)
    path_old, path_new = "retrieval/" + old.replace(".", "/"), "retrieval/" + new.replace(".", "/")
    text = re.sub(r"(?<![\w/])" + re.escape(path_old) + r"(?=/|\.py\b)", path_new, text)
    return text


def rewrite_layers(text: str, old: str, token: str | None) -> str:
    """The bare top-level name in the layers list of the import-linter contract."""
    start = text.index("layers = [")
    end = text.index("]", start)
    block = text[start:end]
    name = re.escape(old)
    if token is None:  # drop it from its floor (`a : old : b`, `a | old`)
        block = re.sub(rf"\s*[:|]\s*{name}\b(?=[\s:|\"])", "", block)
        block = re.sub(rf"(?<=\"){name}\s*[:|]\s*", "", block)
    else:
        block = re.sub(rf"(?<=[\s\"]){name}(?=[\s\"])", token, block)
    return text[:start] + block + text[end:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--layer-token", help="the name in the layers contract (default NEW)")
    group.add_argument("--drop-layer", action="store_true")
    args = ap.parse_args()
    move(args.old, args.new)
    changed: list[str] = []
    for rel in _git("ls-files").splitlines():
        p = ROOT / rel
        if not p.is_file() or not rel.endswith(TEXT) or rel == "scripts/rename_module.py":
            continue
        text = p.read_text(encoding="utf-8")
        out = rewrite(text, args.old, args.new)
        if rel == "pyproject.toml" and "." not in args.old:
            token = None if args.drop_layer else (args.layer_token or args.new)
            out = rewrite_layers(out, args.old, token)
        if out != text:
            p.write_text(out, encoding="utf-8")
            changed.append(rel)
    py = [str(ROOT / rel) for rel in changed if rel.endswith((".py", ".pyi"))]
    if py:  # imports re-sorted and re-wrapped where a longer name moved them
        subprocess.run([sys.executable, "-m", "ruff", "check", "--quiet", "--select", "I",
                        "--fix", *py], cwd=ROOT, check=False)
    print(f"retrieval.{args.old} -> retrieval.{args.new}: {len(changed)} files rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
