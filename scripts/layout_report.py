"""Print the figures the layout is held to: flat modules in retrieval/, largest file, longest
function, YAML parse call sites, imports of retrieval.cli from library code.

    python scripts/layout_report.py [ROOT]     (ROOT: a checkout; default this one)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    pkg = root / "retrieval"
    files = sorted(pkg.rglob("*.py"))
    flat = sorted(p for p in pkg.glob("*.py"))
    sizes = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in files}
    funcs: list[tuple[int, str]] = []
    yaml_sites: list[str] = []
    cli_imports: list[str] = []
    for p in files:
        rel = p.relative_to(root).as_posix()
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                end = node.end_lineno or node.lineno
                funcs.append((end - node.lineno + 1, f"{rel}:{node.name}"))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                f = node.func
                if isinstance(f.value, ast.Name) and f.value.id == "yaml" and f.attr in (
                    "safe_load", "load", "full_load", "unsafe_load", "safe_load_all",
                ):
                    yaml_sites.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("retrieval.cli"):
                if not rel.startswith("retrieval/cli/") and rel != "retrieval/__main__.py":
                    cli_imports.append(f"{rel}:{node.lineno}")
    in_flat = sum(sizes[p] for p in flat)
    total = sum(sizes.values())
    big = max(sizes.items(), key=lambda kv: kv[1])
    longest = max(funcs)
    print(f"flat modules in retrieval/: {len(flat)} ({in_flat} of {total} lines, "
          f"{100 * in_flat / total:.0f}%)")
    print(f"packages in retrieval/: {sum(1 for d in pkg.iterdir() if (d / '__init__.py').exists())}")
    print(f"largest file: {big[0].relative_to(root).as_posix()} ({big[1]} lines); "
          f"files over 600 lines: {sum(1 for n in sizes.values() if n > 600)}")
    print(f"longest function: {longest[1]} ({longest[0]} lines); functions over 120 lines: "
          f"{sum(1 for n, _ in funcs if n > 120)}")
    print(f"YAML parse call sites: {len(yaml_sites)} {yaml_sites}")
    print(f"imports of retrieval.cli outside it: {len(cli_imports)} {cli_imports}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
