"""Unified diffs, as `git diff` writes them and models imitate them.

Each hunk becomes a `replace` edit: its context and `-` lines are what to find, its
context and `+` lines what to put there. Line numbers in `@@` headers are ignored
(models get them wrong more often than not); the text must match, exactly or up to
whitespace, once. `--- /dev/null` creates a file, `+++ /dev/null` deletes one.
"""

from __future__ import annotations

import re

from orchestrator.edits.base import Edit, EditError, join_lines

_OLD = re.compile(r"^--- (?P<path>\S.*?)\s*$")
_NEW = re.compile(r"^\+\+\+ (?P<path>\S.*?)\s*$")
_HUNK = re.compile(r"^@@.*@@")
_FENCE = re.compile(r"^\s*(```|~~~)")


def has_diff(reply: str) -> bool:
    """Whether the reply holds a unified diff: file headers followed by a hunk."""
    lines = reply.splitlines()
    return any(
        _OLD.match(a) and _NEW.match(b) for a, b in zip(lines, lines[1:], strict=False)
    ) and any(_HUNK.match(line) for line in lines)


def parse_udiff(reply: str) -> list[Edit]:
    edits: list[Edit] = []
    lines = reply.splitlines()
    index = 0
    old: str | None = None
    new: str | None = None
    while index < len(lines):
        line = lines[index]
        if _OLD.match(line) and index + 1 < len(lines) and _NEW.match(lines[index + 1]):
            old = _strip_prefix(_OLD.match(line).group("path"))  # type: ignore[union-attr]
            new = _strip_prefix(_NEW.match(lines[index + 1]).group("path"))  # type: ignore[union-attr]
            index += 2
            if new is None and old is not None:
                edits.append(Edit(path=old, kind="delete"))
            continue
        if _HUNK.match(line):
            hunk, index = _read_hunk(lines, index + 1)
            if new is not None:
                edits.append(_hunk_edit(new, old is None, hunk, len(edits) + 1))
            elif old is None:
                raise EditError(f"line {index + 1}: a hunk (@@) without --- and +++ lines naming its file")
            continue  # a deleted file's hunks only list what goes
        index += 1
    if not edits:
        raise EditError("the diff has no hunks; each file needs --- and +++ lines, then @@ hunks")
    return edits


def _strip_prefix(path: str) -> str | None:
    """`a/src/x.py` -> `src/x.py`; `/dev/null` -> None; a trailing timestamp is dropped."""
    path = path.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def _read_hunk(lines: list[str], index: int) -> tuple[list[str], int]:
    """The hunk's lines (with their prefix) from `index`; stops at the next header."""
    hunk: list[str] = []
    while index < len(lines):
        line = lines[index]
        if _HUNK.match(line) or _FENCE.match(line):
            break
        if _OLD.match(line) and index + 1 < len(lines) and _NEW.match(lines[index + 1]):
            break
        if line.startswith("\\"):  # "\ No newline at end of file"
            index += 1
            continue
        if line and line[0] not in " +-":
            break
        hunk.append(line)
        index += 1
    while hunk and not hunk[-1].strip():  # blank lines after a hunk are not context
        hunk.pop()
    return hunk, index


def _hunk_edit(path: str, new_file: bool, hunk: list[str], number: int) -> Edit:
    before = [line[1:] for line in hunk if not line.startswith("+")]
    after = [line[1:] for line in hunk if not line.startswith("-")]
    if new_file:
        return Edit(path=path, kind="write", replace=join_lines(after))
    if not any(line.strip() for line in before):
        raise EditError(
            f"hunk {number} for {path} only adds lines, with no unchanged lines around them to "
            "say where; include two or three unchanged lines before and after the change"
        )
    return Edit(path=path, kind="replace", search=join_lines(before), replace=join_lines(after))
