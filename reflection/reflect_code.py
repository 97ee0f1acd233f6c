"""The code a conversation wrote, read without a model: what the Reflect skill's
`code_quality` and `error_handling` criteria judge when no model is configured.

Signs it reads, each one sentence in the reasoning:

- Python that does not parse (a whole block or file only: a diff's lines are a fragment);
- errors swallowed: a bare `except:`, or an `except` whose body is only `pass`;
- a function longer than 50 lines, nesting deeper than 4 levels, lines over 120 chars;
- leftovers: TODO/FIXME/XXX markers, `breakpoint()`, `pdb.set_trace()`, `console.log`,
  `debugger`;
- for error handling: raising with a message, catching a named exception, or neither.

What it cannot see (whether the design is right, whether a name says what it means) is
left to a model; the reasoning says what was read, so a reader knows what the score rests on.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

LONG_FUNCTION = 50
DEEP_NESTING = 4
LONG_LINE = 120

_BARE_EXCEPT = re.compile(r"^[ \t]*except[ \t]*:", re.MULTILINE)
_PASS_EXCEPT = re.compile(r"^([ \t]*)except\b[^\n]*:[ \t]*\n\1[ \t]+pass[ \t]*$", re.MULTILINE)
_EMPTY_CATCH = re.compile(r"catch\s*(?:\([^)]*\))?\s*\{\s*\}")
_LEFTOVER = re.compile(
    r"\b(?:TODO|FIXME|XXX)\b|\bbreakpoint\(\)|\bpdb\.set_trace\(\)|\bconsole\.log\(|^[ \t]*debugger;?[ \t]*$",
    re.MULTILINE,
)
_RAISE_WITH_MESSAGE = re.compile(r"\b(?:raise\s+\w+(?:\.\w+)*\(\s*[f'\"]|throw\s+new\s+\w+\(\s*[`'\"]"
                                 r"|errors\.New\(|fmt\.Errorf\(|panic\(\s*\")")
_NAMED_CATCH = re.compile(r"^[ \t]*except\s+\(?[A-Z]\w*|catch\s*\(\s*\w+\s*(?::\s*\w+)?\s*\)\s*\{\s*\S", re.MULTILINE)
_ANY_RAISE = re.compile(r"\braise\b|\bthrow\b|\breturn\s+(?:nil,\s*)?err\b")


@dataclass(frozen=True)
class CodeSeen:
    """Code the conversation wrote: `whole` when it is a block or a file, not a diff's lines."""

    path: str | None
    language: str  # "python", or the fence's tag / the file's extension, or ""
    text: str
    whole: bool


@dataclass(frozen=True)
class CodeReading:
    """What the written code shows."""

    lines: int
    files: tuple[str, ...]
    syntax_errors: tuple[str, ...]
    swallowed: int  # handlers that drop an error without a word
    long_functions: tuple[str, ...]
    deep: bool
    long_lines: int
    leftovers: int
    raises_with_message: bool
    named_catches: bool
    raises: bool

    @property
    def problems(self) -> list[str]:
        """The signs against the code, one phrase each."""
        found = [f"{e} does not parse" for e in self.syntax_errors]
        if self.swallowed:
            found.append(f"{_count(self.swallowed, 'error handler')} swallowing errors (a bare except or pass)")
        found += [f"{name} is longer than {LONG_FUNCTION} lines" for name in self.long_functions]
        if self.deep:
            found.append(f"nesting deeper than {DEEP_NESTING} levels")
        if self.long_lines:
            found.append(f"{_count(self.long_lines, 'line')} over {LONG_LINE} characters")
        if self.leftovers:
            found.append(f"{_count(self.leftovers, 'leftover')} (TODO, FIXME or a debugging call)")
        return found


def read_code(code: Sequence[CodeSeen]) -> CodeReading:
    text = "\n".join(c.text for c in code)
    syntax, long_functions = [], []
    for c in code:
        if c.language == "python" and c.whole:
            tree, error = _parse(c.text)
            if error:
                syntax.append(f"{c.path or 'a Python block'} ({error})")
            elif tree is not None:
                long_functions += _long_functions(tree)
    return CodeReading(
        lines=sum(len([line for line in c.text.splitlines() if line.strip()]) for c in code),
        files=tuple(dict.fromkeys(c.path for c in code if c.path)),
        syntax_errors=tuple(syntax),
        swallowed=_swallowed(text),
        long_functions=tuple(long_functions),
        deep=any(_depth(line) > DEEP_NESTING for line in text.splitlines() if line.strip()),
        long_lines=sum(len(line) > LONG_LINE for line in text.splitlines()),
        leftovers=len(_LEFTOVER.findall(text)),
        raises_with_message=bool(_RAISE_WITH_MESSAGE.search(text)),
        named_catches=bool(_NAMED_CATCH.search(text)),
        raises=bool(_ANY_RAISE.search(text)),
    )


def _swallowed(text: str) -> int:
    """Handlers that drop an error: a bare except and an except-pass are one when they are one."""
    starts = {m.start() for m in _BARE_EXCEPT.finditer(text)} | {m.start() for m in _PASS_EXCEPT.finditer(text)}
    return len(starts) + len(_EMPTY_CATCH.findall(text))


def _parse(source: str) -> tuple[ast.AST | None, str | None]:
    try:
        return ast.parse(source), None
    except SyntaxError as exc:
        return None, f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError):
        return None, None  # not judged: neither good nor bad


def _long_functions(tree: ast.AST) -> list[str]:
    return [f"{node.name}()" for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and (node.end_lineno or node.lineno) - node.lineno + 1 > LONG_FUNCTION]


def _depth(line: str) -> int:
    """Indentation levels, a tab or four spaces each (two for two-space code is not told)."""
    leading = line[: len(line) - len(line.lstrip())].replace("\t", "    ")
    return len(leading) // 4


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
