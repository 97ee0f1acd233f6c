"""SEARCH/REPLACE, FILE and DELETE blocks: the marker format, read leniently.

    path/to/file.py
    <<<<<<< SEARCH
    exact lines to find
    =======
    replacement lines
    >>>>>>> REPLACE

`<<<<<<< FILE` ... `>>>>>>> FILE` writes a whole file and `<<<<<<< DELETE` followed by
`>>>>>>> DELETE` removes one. What a careful reader would still understand is accepted:
a block with no path line (the resolver finds its file), and a SEARCH block with no
`=======` divider, which models write when they mean "here is the new code" (it is read
as a code block). What cannot be understood is an EditError that says what to fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.edits.base import Edit, EditError, EditKind, join_lines

# Models miscount the marker characters now and then; 5 to 9 is unambiguous enough.
OPEN = re.compile(r"^\s*<{5,9}\s*(SEARCH|FILE|DELETE)\s*$")
DIVIDER = re.compile(r"^\s*={5,9}\s*$")
CLOSE = re.compile(r"^\s*>{5,9}\s*(REPLACE|FILE|DELETE)\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
_PATH_PREFIX = re.compile(r"^(?:#+\s*|[-*]\s+)?(?:(?:file|path|filename)\s*:\s*)?", re.IGNORECASE)
_OPEN_KIND: dict[str, EditKind] = {"SEARCH": "replace", "FILE": "write", "DELETE": "delete"}
_CLOSE_WORD = {"replace": "REPLACE", "write": "FILE", "delete": "DELETE"}
_OPEN_WORD = {"replace": "SEARCH", "write": "FILE", "delete": "DELETE"}


def has_markers(reply: str) -> bool:
    """Whether the reply uses the marker format at all."""
    return any(OPEN.match(line) or CLOSE.match(line) for line in reply.splitlines())


@dataclass
class _Block:
    """A block being read: where it started and the lines collected so far."""

    number: int
    kind: EditKind
    path: str
    opened_at: int  # 1-based line number of the opening marker
    search: list[str]
    replace: list[str]
    divided: bool = False


def parse_markers(reply: str) -> list[Edit]:
    """Every marker block of `reply`, in order; EditError when one is malformed."""
    lines = reply.splitlines()
    edits: list[Edit] = []
    block: _Block | None = None
    last_path: str | None = None
    for index, line in enumerate(lines):
        if block is None:
            block = _maybe_open(lines, index, len(edits) + 1, last_path)
            continue
        if _feed(block, line, index + 1):
            edits.append(_finish(block))
            last_path = block.path
            block = None
    if block is not None:
        closer = _CLOSE_WORD[block.kind]
        missing = "a ======= divider and " if block.kind == "replace" and not block.divided else ""
        raise EditError(
            f"block {block.number} ({block.path or 'no path'}) is truncated: the reply ends "
            f"before {missing}>>>>>>> {closer} (block opened on line {block.opened_at}); "
            "resend the whole block"
        )
    return edits


def _maybe_open(lines: list[str], index: int, number: int, last_path: str | None) -> _Block | None:
    """A new block when line `index` opens one; EditError for a stray closing marker."""
    line = lines[index]
    opened = OPEN.match(line)
    if opened is None:
        closed = CLOSE.match(line)
        if closed:
            raise EditError(
                f"line {index + 1}: >>>>>>> {closed.group(1)} without a matching opening "
                f"marker before it; each block starts with <<<<<<< SEARCH (or FILE, DELETE)"
            )
        return None
    kind = _OPEN_KIND[opened.group(1)]
    path = _path_before(lines, index, last_path)
    return _Block(number=number, kind=kind, path=path, opened_at=index + 1, search=[], replace=[])


def _path_before(lines: list[str], index: int, last_path: str | None) -> str:
    """The path line of the block opened at `index`: the last non-empty line before it.

    Code fence lines are skipped, so both "path, fence, block" and "fence, path, block"
    work. A block that directly follows another block edits the same file again. A line
    of prose, or nothing, gives "" (the resolver then looks for the file).
    """
    for back in range(index - 1, -1, -1):
        candidate = lines[back].strip()
        if not candidate or FENCE.match(candidate):
            continue
        if CLOSE.match(candidate) and last_path is not None:
            return last_path
        return clean_path(candidate) or ""
    return ""


def clean_path(line: str) -> str | None:
    """The path on a path line ("src/a.py", "`src/a.py`", "File: src/a.py", "### a.py")."""
    text = _PATH_PREFIX.sub("", line.strip(), count=1).strip()
    text = text.strip("*").strip()  # **bold** paths
    quoted = len(text) >= 2 and text[0] == text[-1] and text[0] in "`'\""
    if quoted:
        text = text[1:-1].strip()
    else:
        text = text.rstrip(":").strip()
    # Unquoted, a path has no spaces: a line of prose is not a path.
    if not text or "\x00" in text or (not quoted and re.search(r"\s", text)):
        return None
    return text


def _feed(block: _Block, line: str, lineno: int) -> bool:
    """Add one line to an open block; True when the line closes it."""
    if block.kind == "write":
        # A FILE body is opaque: only its own closing marker ends it, so a file may
        # itself contain edit markers (documentation of this format, for instance).
        closed = CLOSE.match(line)
        if closed and closed.group(1) == "FILE":
            return True
        block.replace.append(line)
        return False
    if OPEN.match(line):
        raise EditError(
            f"block {block.number} ({block.path or 'no path'}) is not closed: another "
            f"<<<<<<< marker on line {lineno} before >>>>>>> {_CLOSE_WORD[block.kind]}"
        )
    closed = CLOSE.match(line)
    if closed:
        _check_close(block, closed.group(1))
        return True
    if block.kind == "delete":
        if line.strip():
            raise EditError(
                f"block {block.number} ({block.path or 'no path'}): a DELETE block has no "
                f"body; put >>>>>>> DELETE right after <<<<<<< DELETE"
            )
        return False
    if DIVIDER.match(line) and not block.divided:
        block.divided = True
        return False
    (block.replace if block.divided else block.search).append(line)
    return False


def _check_close(block: _Block, word: str) -> None:
    expected = _CLOSE_WORD[block.kind]
    if word != expected:
        raise EditError(
            f"block {block.number} ({block.path or 'no path'}) opens with <<<<<<< "
            f"{_OPEN_WORD[block.kind]} but closes with >>>>>>> {word}; close it with >>>>>>> {expected}"
        )


def _finish(block: _Block) -> Edit:
    if block.kind == "replace" and not block.divided:
        # No divider: what sits between the markers is the code the model wants.
        if not any(line.strip() for line in block.search):
            raise EditError(
                f"block {block.number} ({block.path or 'no path'}) is empty and has no ======= "
                "divider between the SEARCH lines and the replacement lines"
            )
        return Edit(path=block.path, kind="block", replace=join_lines(block.search))
    return Edit(
        path=block.path, kind=block.kind, search=join_lines(block.search), replace=join_lines(block.replace)
    )
