"""Find a SEARCH section in a file and replace it: exactly, or up to whitespace, once.

Three tiers, each tried only when the one before finds nothing:

1. the exact lines;
2. equal up to trailing whitespace and one indentation shift shared by every line
   (the replacement is shifted by the same amount, so it fits the file);
3. equal once every run of whitespace is collapsed and blank lines are ignored (a model
   that re-indented one line, or dropped a blank line, still means those lines).

A match must be unique at the tier that finds it; otherwise the error says how many
places matched, or quotes the first SEARCH line the file lacks and the file's nearest.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable

from orchestrator.edits.base import EditError

_Matcher = Callable[[list[str], list[str]], bool]


def places(text: str, search: str) -> list[tuple[int, int]]:
    """The line spans where `search` matches `text` (both "\n"-terminated), at the first
    tier that finds any: one span is a match `replace_once` would make."""
    return _spans(text.split("\n")[:-1], search.split("\n")[:-1])


def _spans(lines: list[str], wanted: list[str]) -> list[tuple[int, int]]:
    for same in (_exact, _loose):
        spans = [(start, start + len(wanted)) for start in _find(lines, wanted, same)]
        if spans:
            return spans
    return _find_collapsed(lines, wanted)


def replace_once(text: str, search: str, replace: str) -> str:
    """`text` with the single occurrence of `search` (whole lines) replaced."""
    lines = text.split("\n")[:-1]  # text is "\n"-terminated
    wanted = search.split("\n")[:-1]
    new = replace.split("\n")[:-1] if replace else []
    spans = _spans(lines, wanted)
    if len(spans) == 1:  # a loose match: the replacement takes the file's indentation
        start, end = spans[0]
        new = _reindent(new, wanted, lines[start:end])
    if not spans:
        raise EditError(f"SEARCH text not found; {_closest_hint(lines, wanted)}")
    if len(spans) > 1:
        where = ", ".join(str(start + 1) for start, _ in spans[:5])
        raise EditError(
            f"SEARCH text matches {len(spans)} times (at lines {where}); "
            f"add surrounding lines to SEARCH so that it matches exactly once"
        )
    start, end = spans[0]
    return "".join(line + "\n" for line in lines[:start] + new + lines[end:])


def _find(lines: list[str], wanted: list[str], same: _Matcher) -> list[int]:
    count = len(wanted)
    return [
        start
        for start in range(len(lines) - count + 1)
        if same(lines[start : start + count], wanted)
    ]


def _exact(window: list[str], wanted: list[str]) -> bool:
    return window == wanted


def _loose(window: list[str], wanted: list[str]) -> bool:
    """Equal up to trailing whitespace and one indentation shift shared by every line."""
    got = [line.rstrip() for line in window]
    want = [line.rstrip() for line in wanted]
    if any(bool(a) != bool(b) for a, b in zip(got, want, strict=True)):
        return False
    got_indent, want_indent = _indent(got), _indent(want)
    return [line[len(got_indent) :] for line in got] == [line[len(want_indent) :] for line in want]


def _indent(lines: list[str]) -> str:
    """The longest leading whitespace shared by every non-blank line."""
    prefixes = [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    return os.path.commonprefix(prefixes) if prefixes else ""


def _reindent(new: list[str], wanted: list[str], window: list[str]) -> list[str]:
    """Shift the replacement by the indentation difference the loose match found."""
    old, actual = _indent(wanted), _indent(window)
    if old == actual:
        return new
    return [
        actual + line[len(old) :] if line.startswith(old) and line.strip() else line
        for line in new
    ]


def _closest_hint(lines: list[str], wanted: list[str]) -> str:
    """Point the model at the first SEARCH line that is not in the file, and its nearest."""
    present = {line.strip() for line in lines}
    for offset, line in enumerate(wanted):
        if line.strip() and line.strip() not in present:
            missing = f"SEARCH line {offset + 1} {line.strip()!r} is not in the file"
            return f"{missing}; {_nearest(lines, line)}"
    first = next((line for line in wanted if line.strip()), "")
    return (
        "every SEARCH line exists, but not consecutively in this order; copy the lines "
        f"exactly as they are in the file; {_nearest(lines, first)}"
    )


def _nearest(lines: list[str], target: str) -> str:
    """The file line most like `target`, with the lines after it for context."""
    needle = target.strip()
    best, best_ratio = -1, 0.0
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(needle)
    for index, line in enumerate(lines):
        matcher.set_seq1(line.strip())
        # The cheap upper bounds skip most lines of a big file.
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = index, ratio
    if best < 0:
        return "no line of the file is similar"
    shown = "\n".join(f"  {best + 1 + i}| {text}" for i, text in enumerate(lines[best : best + 3]))
    return f"closest line {best + 1}: {lines[best].strip()!r}; the file there:\n{shown}"


def _collapse(line: str) -> str:
    return " ".join(line.split())


def _find_collapsed(lines: list[str], wanted: list[str]) -> list[tuple[int, int]]:
    """Spans whose non-blank lines equal SEARCH's non-blank lines, whitespace collapsed."""
    want = [_collapse(line) for line in wanted if line.strip()]
    if not want:
        return []
    code = [(index, _collapse(line)) for index, line in enumerate(lines) if line.strip()]
    spans = []
    for at in range(len(code) - len(want) + 1):
        if all(code[at + k][1] == want[k] for k in range(len(want))):
            spans.append((code[at][0], code[at + len(want) - 1][0] + 1))
    return spans
