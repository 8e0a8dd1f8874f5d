"""Print the figures the layout is held to: flat modules in retrieval/, largest file, longest
function, YAML parse call sites, imports of retrieval.cli from library code, imports of another
package's private module, and engine-name string literals outside retrieval/engines/ (string
constants equal to an engine or backend name, docstrings aside; library distribution names such
as ``faiss-cpu`` and URL schemes are counted too, and listed, so a reader can judge them).

Run kinds and workload shapes (issue 29): kind ``if``s outside the registries (a comparison whose
operand is a run kind: ``RunKind.X``, ``run.kind``, a ``*_KIND(S)`` name of a run kind,
``workload_kind(...)`` or a ``WORKLOAD_*`` shape), ``"scale" in`` probes and ``model_extra``
reads, measurers (classes named ``*Measurer``: recall + latency of a point) and, on their own
line, the load generator's point runners (``*PointRunner``: offered-load points, which measure
no recall of their own), own build / search / timing calls of the loop's consumers (the churn
runner, the scale study), ``eval`` bodies (functions of
``retrieval/tune/runner.py`` that write an eval run's manifest), files over 600 lines, functions
over 120 lines, and test helper functions defined in more than one test file (the same top-level
``def`` name in two or more files under ``tests/``, test functions and fixtures aside).

    python scripts/layout_report.py [ROOT]     (ROOT: a checkout; default this one)
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ENGINES = ("faiss", "hnswlib", "milvus", "pgvector", "qdrant", "redis", "weaviate", "lancedb")


def _engine_literal(value: str) -> bool:
    return any(value == e or value.startswith(e + "-") for e in ENGINES)


#: calls that look an engine or backend up by name
_LOOKUPS = {"create_index", "get_backend", "get_engine", "engine_of_backend", "local_server_of",
            "install_hint", "backend_for", "get"}
#: files where an engine's name is infrastructure, not an engine (Redis as an Optuna journal
#: storage and as the semantic cache's server; see docs/development.md)
_INFRASTRUCTURE = ("retrieval/tune/storage.py", "retrieval/cache/")


def _selects(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Whether a string literal selects an engine: compared (``== "faiss"``, ``in
    sys.modules``), used as a subscript, or passed to a lookup by name."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Compare | ast.Subscript):
        return True
    if isinstance(parent, ast.Call) and node in parent.args:
        f = parent.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        return name in _LOOKUPS
    return False


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(
                body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            ids.add(id(body[0].value))
    return ids


def _private_import(rel: str, module: str, names: list[str]) -> bool:
    """``module`` (+ imported names) reaches a private module of another package."""
    parts = module.split(".")
    own = rel.split("/")[1] if rel.count("/") > 1 else rel.split("/")[-1][:-3]
    other = parts[1] if len(parts) > 1 else ""
    if other == own:
        return False
    private = [p for p in parts[1:] if p.startswith("_") and p not in ("_version", "__main__")]
    private += [n for n in names if n.startswith("_") and not n.startswith("__")
                and len(parts) > 1 and (pathlib_mod_exists(module, n))]
    return bool(private)


_ROOT = Path(".")


def pathlib_mod_exists(module: str, name: str) -> bool:
    base = _ROOT / Path(*module.split("."))
    return (base / f"{name}.py").exists() or (base / name / "__init__.py").exists()


#: the modules that may tell run kinds and shapes apart: the registries themselves, and the
#: workload kinds' own modules (a kind's module names itself: retrieval/tune/kinds/)
REGISTRIES = ("retrieval/runs/kinds.py", "retrieval/reporting/registry.py",
              "retrieval/cli/printers.py", "retrieval/exporting/registry.py",
              "retrieval/tune/workloads.py")
REGISTRY_FOLDERS = ("retrieval/tune/kinds/",)
#: names that hold run kinds or a list of them (beside RunKind.X and workload_kind(...))
_KIND_NAMES = re.compile(r"^(INDEX_KINDS|RUN_KIND|[A-Z_]*RUN_KINDS?|WORKLOAD_[A-Z_]+)$")


def _is_kind(node: ast.AST) -> bool:
    """``node`` names a run kind or a workload shape."""
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "RunKind":
            return True  # RunKind.SWEEP
        if node.attr == "KIND":
            return True  # SweepSummary.KIND
        if node.attr == "kind" and isinstance(node.value, ast.Name) and node.value.id == "run":
            return True  # run.kind
    if isinstance(node, ast.Name) and _KIND_NAMES.match(node.id):
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "workload_kind")


def kind_lists(root: Path) -> list[str]:
    """Modules that list run kinds by hand: three or more distinct kinds named
    (``RunKind.X`` or ``<Summary>.KIND``) outside their own summary module, or an enum of them."""
    out = []
    for p in sorted((root / "retrieval").rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        own = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.AnnAssign | ast.Assign)
               and "KIND" in ast.unparse(n.targets[0] if isinstance(n, ast.Assign) else n.target)}
        named = {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                 and id(n) not in own and (
                     (isinstance(n.value, ast.Name) and n.value.id == "RunKind"
                      and n.attr.isupper() and n.attr != "KIND")
                     or (n.attr == "KIND" and isinstance(n.value, ast.Name)
                         and n.value.id[:1].isupper()))}
        enum = any(isinstance(n, ast.ClassDef) and n.name == "RunKind" and any(
            isinstance(b, ast.Assign) and not ast.unparse(b.targets[0]).startswith("__")
            for b in n.body) for n in ast.walk(tree))
        if len(named) >= 3 or enum:
            out.append(f"{p.relative_to(root).as_posix()} ({'enum' if enum else len(named)})")
    return out


def kind_checks(root: Path) -> tuple[list[str], list[str]]:
    """(kind ifs outside the registries, "scale" in probes and model_extra reads)."""
    ifs: list[str] = []
    probes: list[str] = []
    for p in sorted((root / "retrieval").rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        tree = ast.parse(p.read_text(encoding="utf-8"))
        lines: set[int] = set()
        for node in ast.walk(tree):
            if (isinstance(node, ast.Compare) and rel not in REGISTRIES
                    and not rel.startswith(REGISTRY_FOLDERS)):
                ops = [node.left, *node.comparators]
                if any(_is_kind(o) for o in ops) and any(
                        isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn | ast.Is
                                   | ast.IsNot) for op in node.ops):
                    lines.add(node.lineno)
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
                    and node.left.value == "scale"
                    and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
                    and rel != "retrieval/runs/kinds.py"):
                probes.append(f"{rel}:{node.lineno}: \"scale\" in")
            if isinstance(node, ast.Attribute) and node.attr == "model_extra":
                probes.append(f"{rel}:{node.lineno}: model_extra")
        ifs += [f"{rel}:{n}" for n in sorted(lines)]
    return ifs, probes


def _example_kinds(root: Path) -> dict[str, str]:
    """The workload kinds a test module defines (``WorkloadKindDef(NAME, ...)``, NAME a
    module-level string constant; a literal, as in a test that a built-in name is refused
    twice, is not an example): {name: test module}."""
    out: dict[str, str] = {}
    for p in sorted((root / "tests").rglob("*.py")):
        text = p.read_text(encoding="utf-8")
        if "register_workload(" not in text:
            continue
        tree = ast.parse(text)
        consts = {t.id: n.value.value for n in tree.body
                  if isinstance(n, ast.Assign | ast.AnnAssign)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                  for t in ([n.target] if isinstance(n, ast.AnnAssign) else n.targets)
                  if isinstance(t, ast.Name)}
        for c in ast.walk(tree):
            if not (isinstance(c, ast.Call) and getattr(c.func, "id", "") == "WorkloadKindDef"
                    and c.args):
                continue
            name = consts.get(getattr(c.args[0], "id", ""))
            if isinstance(name, str):
                out[name] = p.relative_to(root).as_posix()
    return out


def workload_kind_files(root: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Files touched to add a workload kind. (examples, built-in kinds):

    - an example kind a test registers: every file of retrieval/, tests/, docs/ and scripts/
      that names it (its name as a quoted string; at least the test module itself);
    - a built-in kind of the sweep (``WORKLOAD_<KIND>`` of retrieval/runs/kinds.py, the spec
      section of the same name): the files of retrieval/ that name its constant, read its spec
      section (``spec.<kind>``) or import its kind module."""
    examples: dict[str, list[str]] = {}
    found = _example_kinds(root)
    texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
             for d in ("retrieval", "tests", "docs", "scripts") for p in sorted(
                 (root / d).rglob("*")) if p.suffix in (".py", ".md", ".yaml", ".toml")}
    for name, module in found.items():
        examples[name] = sorted({rel for rel, t in texts.items()
                                 if f'"{name}"' in t or f"'{name}'" in t} | {module})
    builtin: dict[str, list[str]] = {}
    for kind in ("filtered", "scale", "tenants", "topology", "cold"):
        const = f"WORKLOAD_{kind.upper()}"
        where: set[str] = set()
        for p in sorted((root / "retrieval").rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            tree = ast.parse(p.read_text(encoding="utf-8"))
            for n in ast.walk(tree):
                if ((isinstance(n, ast.Name) and n.id == const)
                        or (isinstance(n, ast.alias) and n.name == const)
                        or (isinstance(n, ast.Attribute) and n.attr == kind
                            and ast.unparse(n.value).endswith("spec"))
                        or (isinstance(n, ast.ImportFrom)
                            and n.module == f"retrieval.tune.kinds.{kind}")):
                    where.add(rel)
                    break
        builtin[kind] = sorted(where - {"retrieval/runs/kinds.py", "retrieval/runs/__init__.py"})
    return examples, builtin


def _folders(files: list[str]) -> int:
    return len({f.rsplit("/", 1)[0] for f in files})


def measurers(root: Path) -> tuple[list[str], list[str]]:
    """(evaluation measurers: classes named ``*Measurer``, which measure a point's recall and
    latency; load point runners: classes named ``*PointRunner``, which run offered-load points,
    open / closed loop at a rate, and score answers with the evaluation loop's recall)."""
    found: dict[str, list[str]] = {"Measurer": [], "PointRunner": []}
    for p in sorted((root / "retrieval").rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for n in ast.walk(tree):
            for suffix, out in found.items():
                if isinstance(n, ast.ClassDef) and n.name.endswith(suffix):
                    out.append(f"{p.relative_to(root).as_posix()}:{n.name}")
    return found["Measurer"], found["PointRunner"]


#: the runners that consume the evaluation loop (build through the Evaluator, measure through
#: the Measurer): none may build, search or time an index itself
LOOP_CONSUMERS = ("retrieval/churn/", "retrieval/tune/scale_run.py")
#: calls that build, search or time an index
_LOOP_CALLS = {"build", "search", "hot_search", "time_each", "time_repeat", "warm_up",
               "apply_search"}
#: receivers of such a call that are not an index: the Evaluator (``ev.build``: the loop
#: itself), a checked index entry (``checked.build`` / ``self._entry(b).build``: params
#: validated, nothing built), the churn runner's config (``cr.search``: a step measured by the
#: Measurer)
_NOT_AN_INDEX = re.compile(r"(^|\.)(ev|checked|ce|cr)$|_entry\(")


def own_loop_lines(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that build, search or time an index outside the evaluation loop."""
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name not in _LOOP_CALLS:
            continue
        if isinstance(f, ast.Attribute) and _NOT_AN_INDEX.search(ast.unparse(f.value)):
            continue
        out.append(n.lineno)
    return sorted(set(out))


def own_loops(root: Path) -> list[str]:
    """``file:line`` of every own build / search / timing call of the loop's consumers."""
    out = []
    for p in sorted((root / "retrieval").rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(LOOP_CONSUMERS):
            out += [f"{rel}:{n}" for n in own_loop_lines(ast.parse(p.read_text("utf-8")))]
    return out


def eval_bodies(root: Path) -> list[str]:
    """Functions that write an eval run's manifest (``write_manifest(kind=... EVAL ...)``)."""
    out = []
    for p in sorted((root / "retrieval").rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for c in ast.walk(fn):
                if (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                        and c.func.attr == "write_manifest"
                        and any(k.arg == "kind" and "eval" in ast.unparse(k.value).lower()
                                for k in c.keywords)):
                    out.append(f"{p.relative_to(root).as_posix()}:{fn.name}")
                    break
    return sorted(set(out))


def shared_test_helpers(root: Path) -> dict[str, list[str]]:
    """Top-level helper functions (not tests, not fixtures) defined in 2+ files under tests/."""
    where: dict[str, list[str]] = {}
    for p in sorted((root / "tests").rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for n in tree.body:
            if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if n.name.startswith("test") or any(
                    "fixture" in ast.unparse(d) for d in n.decorator_list):
                continue
            where.setdefault(n.name, []).append(p.relative_to(root).as_posix())
    return {k: v for k, v in sorted(where.items()) if len(v) > 1}


def copied_test_helpers(root: Path) -> dict[str, list[str]]:
    """Top-level test helpers whose body (the AST, name aside) is the same in 2+ test files:
    copies, as opposed to helpers that only share a name."""
    where: dict[str, list[str]] = {}
    for p in sorted((root / "tests").rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for n in tree.body:
            if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if n.name.startswith("test") or any(
                    "fixture" in ast.unparse(d) for d in n.decorator_list):
                continue
            key = ast.dump(ast.Module(body=n.body, type_ignores=[]))
            where.setdefault(key, []).append(f"{p.relative_to(root).as_posix()}:{n.name}")
    return {v[0]: v for v in where.values()
            if len({x.split(":")[0] for x in v}) > 1}


def test_layout(root: Path) -> tuple[list[str], list[str]]:
    """Test folders that mirror no package of retrieval/ (``core``: its flat modules,
    ``project``: docs / packaging / wheel aside), and test files still in a cost-tier folder."""
    packages = {p.name for p in (root / "retrieval").iterdir() if (p / "__init__.py").exists()}
    folders = sorted({p.parent.name for p in (root / "tests").glob("*/test_*.py")})
    odd = [f for f in folders if f not in packages and f not in ("core", "project")]
    tiers = sorted(p.relative_to(root).as_posix() for t in ("unit", "integration", "e2e",
                                                            "contract")
                   for p in (root / "tests" / t).glob("test_*.py"))
    return odd, tiers


def main() -> int:
    global _ROOT
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    _ROOT = root
    pkg = root / "retrieval"
    private_imports: list[str] = []
    literals: list[str] = []
    selecting: list[str] = []
    files = sorted(pkg.rglob("*.py"))
    flat = sorted(p for p in pkg.glob("*.py"))
    sizes = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in files}
    funcs: list[tuple[int, str]] = []
    yaml_sites: list[str] = []
    cli_imports: list[str] = []
    for p in files:
        rel = p.relative_to(root).as_posix()
        tree = ast.parse(p.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        in_engines = rel.startswith("retrieval/engines/")
        parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if (not in_engines and isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docs and _engine_literal(node.value)):
                literals.append(f"{rel}:{node.lineno}:{node.value}")
                if _selects(node, parents) and not rel.startswith(_INFRASTRUCTURE):
                    selecting.append(literals[-1])
            if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("retrieval")
                    and _private_import(rel, node.module or "", [a.name for a in node.names])):
                private_imports.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                end = node.end_lineno or node.lineno
                funcs.append((end - node.lineno + 1, f"{rel}:{node.name}"))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                f = node.func
                if isinstance(f.value, ast.Name) and f.value.id == "yaml" and f.attr in (
                    "safe_load", "load", "full_load", "unsafe_load", "safe_load_all",
                ):
                    yaml_sites.append(f"{rel}:{node.lineno}")
            if (isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("retrieval.cli")
                    and not rel.startswith("retrieval/cli/") and rel != "retrieval/__main__.py"):
                cli_imports.append(f"{rel}:{node.lineno}")
    in_flat = sum(sizes[p] for p in flat)
    total = sum(sizes.values())
    big = max(sizes.items(), key=lambda kv: kv[1])
    longest = max(funcs)
    print(f"flat modules in retrieval/: {len(flat)} ({in_flat} of {total} lines, "
          f"{100 * in_flat / total:.0f}%)")
    packages = sum(1 for d in pkg.iterdir() if (d / "__init__.py").exists())
    print(f"packages in retrieval/: {packages}")
    print(f"largest file: {big[0].relative_to(root).as_posix()} ({big[1]} lines); "
          f"files over 600 lines: {sum(1 for n in sizes.values() if n > 600)}")
    print(f"longest function: {longest[1]} ({longest[0]} lines); functions over 120 lines: "
          f"{sum(1 for n, _ in funcs if n > 120)}")
    print(f"YAML parse call sites: {len(yaml_sites)} {yaml_sites}")
    print(f"imports of retrieval.cli outside it: {len(cli_imports)} {cli_imports}")
    print(f"imports of another package's private module: {len(private_imports)} "
          f"{private_imports}")
    print(f"engine-name string literals outside retrieval/engines/ that select an engine "
          f"(compared, subscripted, looked up; infrastructure files aside): {len(selecting)} "
          f"{selecting}")
    print(f"engine-name string literals outside retrieval/engines/ (names, keys, labels, "
          f"distributions too): {len(literals)}")
    for item in literals:
        print(f"  {item}")
    lists = kind_lists(root)
    print(f"modules listing run kinds by hand: {len(lists)} {lists}")
    ifs, probes = kind_checks(root)
    print(f"kind ifs outside the registries: {len(ifs)} in "
          f"{len({i.rsplit(':', 1)[0] for i in ifs})} files")
    for item in ifs:
        print(f"  {item}")
    print(f"'\"scale\" in' probes and model_extra reads: {len(probes)}")
    for item in probes:
        print(f"  {item}")
    examples, builtin = workload_kind_files(root)
    for name, touched in examples.items():
        print(f"files touched to add a workload kind (example '{name}', registered by a test): "
              f"{len(touched)} in {_folders(touched)} folders {touched}")
    if not examples:
        print("files touched to add a workload kind: no example kind registered by a test")
    for name, touched in builtin.items():
        print(f"  built-in workload kind '{name}': {len(touched)} files in {_folders(touched)} "
              f"folders (its constant, its spec section, its kind module; runs/ aside)")
        for item in touched:
            print(f"    {item}")
    found, runners = measurers(root)
    print(f"measurers (recall + latency of a point, the evaluation loop's): {len(found)} "
          f"{found}")
    print(f"load point runners (offered-load points, open / closed loop at a rate, writes as an "
          f"option; answers scored by the evaluation loop's recall): {len(runners)} {runners}")
    own = own_loops(root)
    print(f"own build / search / timing calls in the loop's consumers (churn runner, scale "
          f"study): {len(own)} {own}")
    bodies = eval_bodies(root)
    print(f"eval bodies: {len(bodies)} {bodies}")
    over = sorted(f"{p.relative_to(root).as_posix()} ({n})" for p, n in sizes.items() if n > 600)
    print(f"files over 600 lines: {len(over)} {over}")
    long_fns = sorted(f"{w} ({n})" for n, w in funcs if n > 120)
    print(f"functions over 120 lines: {len(long_fns)} {long_fns}")
    helpers = shared_test_helpers(root)
    print(f"test helper functions defined in more than one test file: {len(helpers)} names, "
          f"{sum(len(v) for v in helpers.values())} definitions")
    for name, paths in helpers.items():
        print(f"  {name}: {len(paths)} files")
    copies = copied_test_helpers(root)
    print(f"test helpers copied (the same body) in more than one test file: {len(copies)}")
    for first, where in copies.items():
        print(f"  {first}: {where[1:]}")
    asserts = sum(isinstance(x, ast.Assert) for p in (root / "tests").rglob("*.py")
                  for x in ast.walk(ast.parse(p.read_text(encoding="utf-8"))))
    print(f"assert statements in tests/: {asserts}")
    odd, tiers = test_layout(root)
    print(f"test folders that mirror no package of retrieval/ (core, project aside): {len(odd)} "
          f"{odd}")
    print(f"test files still in a cost-tier folder (unit / integration / e2e / contract): "
          f"{len(tiers)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
