"""Put a block of Python code into a Python file: the whole file, or the definitions it holds.

Models asked for a file often write just the function they changed, with or without
its imports, and leave out the helpers around it. Replacing the file with that would
delete the helpers, so a block is read as follows:

- It is the **whole file** when it has everything the file has at the top level: every
  function, class and assignment by name, a module docstring if the file has one, as
  many other statements. Imports of the old file that the block still uses but forgot
  are kept.
- Otherwise it is a **fragment**: each top-level function, class or assignment in it
  replaces the one of the same name (a class that lacks some of the old methods has its
  methods merged the same way), new ones go before the first replaced one, missing
  imports are added after the file's imports, and anything else (an example call,
  an `if __name__ == "__main__":` demo) is left out.

Definitions are found with `ast`; code that does not parse (a half-written attempt)
falls back to reading top-level lines. A block that is only a function's body (models
asked to "write the body of f" sometimes send just that) becomes the whole function
with `with_body`, once the resolver knows which function is meant.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from typing import Literal

from orchestrator.edits.base import EditError

UnitKind = Literal["def", "import", "assign", "docstring", "other"]
_DEF_LINE = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)")
_ASSIGN_LINE = re.compile(r"^(\w+)\s*(?::[^=]*)?=(?!=)")


@dataclass(frozen=True)
class Unit:
    """One top-level statement of a module (or of a class body): its kind, name and lines."""

    kind: UnitKind
    name: str  # the def/class or assigned name; an import's source text; "" otherwise
    start: int  # 0-based index of its first line (decorators included)
    end: int  # exclusive
    node: ast.AST | None = None  # None when found by the line fallback


def merge_python(original: str, block: str) -> str:
    """The new text of a Python file holding `original` once `block` is put into it."""
    old_lines, new_lines = original.splitlines(), block.splitlines()
    old, new = units(original), units(block)
    if _is_whole(old, new):
        return _text(_with_imports(new_lines, new, _forgotten_imports(old_lines, old, new, block)))
    if not any(u.kind in ("def", "assign", "import") for u in new):
        raise EditError(
            "the code block holds no function, class or assignment to put into the file; "
            "write the whole file, or the complete functions you change"
        )
    return _text(_merge(old_lines, old, new_lines, new))


def _is_whole(old: list[Unit], new: list[Unit]) -> bool:
    """Whether `new` has a counterpart for everything `old` has, imports aside."""
    def named(found: list[Unit]) -> set[tuple[str, str]]:
        return {(u.kind, u.name) for u in found if u.kind in ("def", "assign")}

    def count(found: list[Unit], kind: str) -> int:
        return sum(u.kind == kind for u in found)

    return (
        named(old) <= named(new)
        and count(old, "docstring") <= count(new, "docstring")
        and count(old, "other") <= count(new, "other")
    )


def units(text: str) -> list[Unit]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # deep nesting: the parser gives up
        return _units_by_lines(text.splitlines())
    return _units_of(tree.body)


def _units_of(body: list[ast.stmt]) -> list[Unit]:
    found = []
    for index, node in enumerate(body):
        decorators = getattr(node, "decorator_list", [])
        start = min([node.lineno, *(d.lineno for d in decorators)]) - 1
        end = node.end_lineno or node.lineno
        kind, name = _kind_of(node, first=index == 0)
        found.append(Unit(kind, name, start, end, node))
    return found


def _kind_of(node: ast.stmt, *, first: bool) -> tuple[UnitKind, str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return "def", node.name
    if isinstance(node, ast.Import | ast.ImportFrom):
        return "import", ast.unparse(node)
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return "assign", node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return "assign", node.target.id
    if first and _is_docstring(node):
        return "docstring", ""
    return "other", ""


def _units_by_lines(lines: list[str]) -> list[Unit]:
    """Top-level units of code that does not parse: each starts at an unindented line."""
    found: list[Unit] = []
    current: tuple[UnitKind, str, int] | None = None
    last_code = -1
    for index, line in enumerate(lines):
        if not line.strip() or line[0] in " \t)]}" or line.lstrip().startswith("#"):
            if line.strip() and not line.lstrip().startswith("#"):
                last_code = index
            continue
        matched = _DEF_LINE.match(line)
        if current is not None and current[0] == "other" and current[1] == "@" and matched:
            current = ("def", matched.group(1), current[2])  # the decorated definition
            last_code = index
            continue
        if current is not None:
            found.append(Unit(current[0], current[1], current[2], last_code + 1))
        current = (*_line_kind(line, matched), index)
        last_code = index
    if current is not None:
        found.append(Unit(current[0], current[1], current[2], last_code + 1))
    return found


def _line_kind(line: str, matched: re.Match[str] | None) -> tuple[UnitKind, str]:
    if matched:
        return "def", matched.group(1)
    if line.startswith("@"):
        return "other", "@"
    if line.startswith(("import ", "from ")):
        return "import", " ".join(line.split())
    assigned = _ASSIGN_LINE.match(line)
    return ("assign", assigned.group(1)) if assigned else ("other", "")


# --------------------------------------------------------------------------- merging


def _merge(
    old_lines: list[str], old: list[Unit], new_lines: list[str], new: list[Unit], gap: int = 2
) -> list[str]:
    """`old_lines` with the named units of `new` put in (see the module docstring).

    `gap`: blank lines between definitions (two in a module, one in a class).
    """
    blank = [""] * gap
    by_key = {(u.kind, u.name): u for u in new if u.kind in ("def", "assign")}
    old_keys = {(u.kind, u.name) for u in old}
    replaced = {(u.kind, u.name) for u in old if (u.kind, u.name) in by_key}
    additions = [u for u in new if u.kind in ("def", "assign") and (u.kind, u.name) not in old_keys]
    old_imports = {u.name for u in old if u.kind == "import"}
    imports = [new_lines[u.start : u.end] for u in new if u.kind == "import" and u.name not in old_imports]

    out: list[str] = []
    cursor, import_at, added, after_docstring = 0, None, not additions, False
    for unit in old:
        out += old_lines[cursor : unit.start]
        key = (unit.kind, unit.name)
        if key in replaced:
            if not added:
                for addition in additions:
                    out += [*new_lines[addition.start : addition.end], *blank]
                added = True
            out += _replacement(old_lines, unit, new_lines, by_key.pop(key))
        else:
            out += old_lines[unit.start : unit.end]
        if unit.kind in ("import", "docstring"):
            import_at, after_docstring = len(out), unit.kind == "docstring"
        cursor = unit.end
    out += old_lines[cursor:]
    if not added:
        for addition in additions:
            out += [*blank, *new_lines[addition.start : addition.end]]
    return _insert_imports(out, imports, import_at, after_docstring=after_docstring)


def _replacement(old_lines: list[str], old: Unit, new_lines: list[str], new: Unit) -> list[str]:
    """The new unit's lines; a class missing some old methods gets them merged instead."""
    fresh = new_lines[new.start : new.end]
    if not (isinstance(old.node, ast.ClassDef) and isinstance(new.node, ast.ClassDef)):
        return fresh
    old_body, new_body = _units_of(old.node.body), _units_of(new.node.body)
    old_methods = {u.name for u in old_body if u.kind == "def"}
    if not new_body or old_methods <= {u.name for u in new_body if u.kind == "def"}:
        return fresh
    header = new_lines[new.start : new_body[0].start]
    merged = _merge(old_lines[: old.end], old_body, new_lines, new_body, gap=1)
    return header + merged[old_body[0].start :]


def _insert_imports(
    lines: list[str], imports: list[list[str]], at: int | None, *, after_docstring: bool = False
) -> list[str]:
    if not imports:
        return lines
    added = [line for block in imports for line in block]
    if at is None:  # no imports or docstring: at the top, set off by a blank line
        return [*added, "", *lines]
    if after_docstring:
        added = ["", *added]
    return [*lines[:at], *added, *lines[at:]]


def _forgotten_imports(old_lines: list[str], old: list[Unit], new: list[Unit], block: str) -> list[list[str]]:
    """Imports of the old file that the new whole file uses but does not import."""
    have = {u.name for u in new if u.kind == "import"}
    words = set(re.findall(r"\b\w+\b", block))
    kept = []
    for unit in old:
        if unit.kind != "import" or unit.name in have:
            continue
        if _bound_names(unit) & words:
            kept.append(old_lines[unit.start : unit.end])
    return kept


def _bound_names(unit: Unit) -> set[str]:
    node = unit.node
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return set(re.findall(r"\b\w+\b", unit.name)) - {"import", "from", "as"}


def _with_imports(lines: list[str], found: list[Unit], imports: list[list[str]]) -> list[str]:
    at, after_docstring = None, False
    for unit in found:
        if unit.kind in ("import", "docstring"):
            at, after_docstring = unit.end, unit.kind == "docstring"
        elif at is not None or unit.kind != "other":
            break
    return _insert_imports(lines, imports, at, after_docstring=after_docstring)


def _text(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- bodies


def is_bare_body(block: str) -> bool:
    """Statements meant as a function's body: no definitions, and a `return` or `yield`."""
    units_found = units(textwrap.dedent(block))
    if any(u.kind in ("def", "import") for u in units_found):
        return False
    return bool(re.search(r"^\s*(return|yield)\b", block, re.MULTILINE))


def with_body(original: str, name: str, body: str) -> str | None:
    """Function `name` of `original` (decorators, signature, docstring) with `body` as its body.

    None when `original` has no such top-level function.
    """
    try:
        tree = ast.parse(original)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # deep nesting: the parser gives up
        return None
    node = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name), None
    )
    if node is None:
        return None
    lines = original.splitlines()
    first = node.body[0]
    keep = first if _is_docstring(first) else None
    head_end = (keep.end_lineno if keep else first.lineno - 1) or 0
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    if head_end <= start:  # a one-line `def f(): ...`: no header to keep apart
        return None
    indent = " " * (first.col_offset or 4)
    fresh = textwrap.indent(textwrap.dedent(body).strip("\n"), indent, lambda line: bool(line.strip()))
    return "\n".join([*lines[start:head_end], fresh]) + "\n"


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
