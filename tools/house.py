#!/usr/bin/env python3
"""The shape of the code, from its own import graph: read by people and by tests.

    python3 tools/house.py          modules per folder, the longest class and function,
                                    import circles and private names used across modules,
                                    and whatever breaks the limits below

The limits keep each piece small enough to change safely: a class of at most
MAX_CLASS_LINES lines, a function of at most MAX_FUNCTION_LINES, at most MAX_TOP_MODULES
modules directly in orchestrator/ (the rest live in the folder of their concern), and an
`__all__` in every package of the library (its public surface, said once).
Only the standard library: it parses the sources, it imports nothing.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("orchestrator", "reflection", "bench")
LIBRARY = ("orchestrator", "reflection")  # the installed packages: each says what it exports
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 60
MAX_TOP_MODULES = 15
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class Module:
    name: str
    path: Path
    imports: set[str] = field(default_factory=set)  # modules of this code base it imports
    private: list[str] = field(default_factory=list)  # "module._name" imported from elsewhere


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Module]:
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = module_name(path, root)
            found[name] = Module(name, path)
    for module in found.values():
        _read_imports(module, found)
    return found


def _read_imports(module: Module, known: dict[str, Module]) -> None:
    tree = ast.parse(module.path.read_text(encoding="utf-8"))
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                _add(module, alias.name, known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    _add(module, full, known)
                    continue
                _add(module, base, known)
                if alias.name.startswith("_") and not alias.name.startswith("__") and base in known:
                    module.private.append(f"{base}.{alias.name}")


def _add(module: Module, name: str, known: dict[str, Module]) -> None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    if name and name != module.name and not module.name.startswith(name + "."):
        module.imports.add(name)


def circles(found: dict[str, Module]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for other in sorted(found[name].imports):
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in on_stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == name:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for name in sorted(found):
        if name not in index:
            visit(name)
    return groups


def sizes(found: dict[str, Module], kind: type | tuple[type, ...]) -> list[tuple[int, str]]:
    """(lines, module.name) of every class or function, longest first."""
    found_sizes = []
    for module in found.values():
        for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
            if isinstance(node, kind):
                found_sizes.append((node.end_lineno - node.lineno + 1, f"{module.name}.{node.name}"))
    return sorted(found_sizes, reverse=True)


def longest(found: dict[str, Module], kind: type | tuple[type, ...]) -> tuple[int, str]:
    return next(iter(sizes(found, kind)), (0, ""))


def over(found: dict[str, Module], kind: type | tuple[type, ...], limit: int) -> list[tuple[int, str]]:
    return [size for size in sizes(found, kind) if size[0] > limit]


def top_modules(found: dict[str, Module], package: str = "orchestrator") -> list[str]:
    """The modules directly in `package`'s folder (its __init__ not counted)."""
    return sorted(m.name for m in found.values()
                  if m.name.rpartition(".")[0] == package and m.path.name != "__init__.py")


def without_all(found: dict[str, Module]) -> list[str]:
    """The library's packages whose __init__ assigns no `__all__`."""
    missing = []
    for module in found.values():
        if module.path.name != "__init__.py" or not module.name.startswith(LIBRARY):
            continue
        tree = ast.parse(module.path.read_text(encoding="utf-8"))
        names = {target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                 for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(target, ast.Name)}
        if "__all__" not in names:
            missing.append(module.name)
    return sorted(missing)


def main() -> int:
    found = modules()
    folders = Counter(str(m.path.parent.relative_to(ROOT)) for m in found.values() if m.path.name != "__init__.py")
    print("| folder | modules |\n| --- | --- |")
    for folder, count in sorted(folders.items()):
        print(f"| `{folder}/` | {count} |")
    lines, name = longest(found, ast.ClassDef)
    print(f"\nlongest class: {name} ({lines} lines)")
    lines, name = longest(found, FUNCTIONS)
    print(f"longest function: {name} ({lines} lines)")
    print(f"modules directly in orchestrator/: {len(top_modules(found))} (at most {MAX_TOP_MODULES})")
    for what, kind, limit in (("classes", ast.ClassDef, MAX_CLASS_LINES), ("functions", FUNCTIONS, MAX_FUNCTION_LINES)):
        print(f"{what} over {limit} lines: {len(over(found, kind, limit))}")
        for lines, name in over(found, kind, limit):
            print(f"  {name} ({lines})")
    print(f"packages without __all__: {len(without_all(found))}")
    for name in without_all(found):
        print(f"  {name}")
    groups = circles(found)
    print(f"import circles: {len(groups)}")
    for group in groups:
        print("  " + " <-> ".join(group))
    private = sorted({p for m in found.values() for p in m.private})
    print(f"private names imported across modules: {len(private)}")
    for name in private:
        print(f"  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
