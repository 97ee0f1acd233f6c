#!/usr/bin/env python3
"""The shape of the code, from its own import graph: read by people and by tests.

    python3 tools/house.py          modules per folder, the longest class and function,
                                    import circles and private names used across modules

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


def longest(found: dict[str, Module], kind: type) -> tuple[int, str]:
    best = (0, "")
    for module in found.values():
        for node in ast.walk(ast.parse(module.path.read_text(encoding="utf-8"))):
            if isinstance(node, kind):
                lines = node.end_lineno - node.lineno + 1
                best = max(best, (lines, f"{module.name}.{node.name}"))
    return best


def main() -> int:
    found = modules()
    folders = Counter(str(m.path.parent.relative_to(ROOT)) for m in found.values() if m.path.name != "__init__.py")
    print("| folder | modules |\n| --- | --- |")
    for folder, count in sorted(folders.items()):
        print(f"| `{folder}/` | {count} |")
    lines, name = longest(found, ast.ClassDef)
    print(f"\nlongest class: {name} ({lines} lines)")
    functions = [longest(found, kind) for kind in (ast.FunctionDef, ast.AsyncFunctionDef)]
    lines, name = max(functions)
    print(f"longest function: {name} ({lines} lines)")
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
