"""The builtin executor's edit format: parse a model's reply, then apply it safely.

A reply holds edit blocks, each preceded by the file's path (see docs/EDIT_FORMAT.md):

    path/to/file.py
    <<<<<<< SEARCH
    exact lines to find
    =======
    replacement lines
    >>>>>>> REPLACE

`<<<<<<< FILE` ... `>>>>>>> FILE` writes a whole file and `<<<<<<< DELETE` followed
by `>>>>>>> DELETE` removes one. Applying is all-or-nothing: every edit is checked and
every new file content computed before the first byte is written, so a reply with one
bad edit leaves the tree as it was, and the error tells the model what to fix.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel

log = logging.getLogger("goldenloop.executors.edits")

EditKind = Literal["replace", "write", "delete"]

# Models miscount the marker characters now and then; 5 to 9 is unambiguous enough.
_OPEN = re.compile(r"^\s*<{5,9}\s*(SEARCH|FILE|DELETE)\s*$")
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_CLOSE = re.compile(r"^\s*>{5,9}\s*(REPLACE|FILE|DELETE)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_PATH_PREFIX = re.compile(r"^(?:#+\s*|[-*]\s+)?(?:(?:file|path|filename)\s*:\s*)?", re.IGNORECASE)
_OPEN_KIND: dict[str, EditKind] = {"SEARCH": "replace", "FILE": "write", "DELETE": "delete"}
_CLOSE_WORD = {"replace": "REPLACE", "write": "FILE", "delete": "DELETE"}
_OPEN_WORD = {"replace": "SEARCH", "write": "FILE", "delete": "DELETE"}
_Matcher = Callable[[list[str], list[str]], bool]

FORMAT_HINT = (
    "write each change as the file's path on its own line, then "
    "<<<<<<< SEARCH, the exact lines to find, =======, the new lines, >>>>>>> REPLACE"
)


class EditError(Exception):
    """A reply that cannot be parsed or applied; the message is written for the model."""


class Edit(BaseModel):
    """One change to one file, as parsed from a reply.

    `replace`: `search` (whole lines, possibly empty) becomes `replace`.
    `write`: the file's whole content becomes `replace`; `search` is empty.
    `delete`: the file is removed; both texts are empty.
    """

    path: str
    kind: EditKind
    search: str = ""
    replace: str = ""


# --------------------------------------------------------------------------- parsing


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


def parse_edits(reply: str) -> list[Edit]:
    """Every edit block of `reply`, in order; EditError when the reply is malformed."""
    if not reply.strip():
        raise EditError(f"the reply is empty: no edit blocks found; {FORMAT_HINT}")
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
            f"block {block.number} ({block.path}) is truncated: the reply ends before "
            f"{missing}>>>>>>> {closer} (block opened on line {block.opened_at}); "
            "resend the whole block"
        )
    if not edits:
        raise EditError(f"no edit blocks found in the reply; {FORMAT_HINT}")
    return edits


def _maybe_open(lines: list[str], index: int, number: int, last_path: str | None) -> _Block | None:
    """A new block when line `index` opens one; EditError for a stray closing marker."""
    line = lines[index]
    opened = _OPEN.match(line)
    if opened is None:
        closed = _CLOSE.match(line)
        if closed:
            raise EditError(
                f"line {index + 1}: >>>>>>> {closed.group(1)} without a matching opening "
                f"marker before it; each block starts with <<<<<<< SEARCH (or FILE, DELETE)"
            )
        return None
    kind = _OPEN_KIND[opened.group(1)]
    path = _path_before(lines, index, number, last_path)
    return _Block(number=number, kind=kind, path=path, opened_at=index + 1, search=[], replace=[])


def _path_before(lines: list[str], index: int, number: int, last_path: str | None) -> str:
    """The path line of the block opened at `index`: the last non-empty line before it.

    Code fence lines are skipped, so both "path, fence, block" and "fence, path, block"
    work. A block that directly follows another block edits the same file again.
    """
    for back in range(index - 1, -1, -1):
        candidate = lines[back].strip()
        if not candidate or _FENCE.match(candidate):
            continue
        if _CLOSE.match(candidate) and last_path is not None:
            return last_path
        path = _clean_path(candidate)
        if path is None:
            raise EditError(
                f"block {number}: the line before <<<<<<< must be the file's path, "
                f"found {candidate[:80]!r}"
            )
        return path
    raise EditError(f"block {number}: no file path before <<<<<<< on line {index + 1}")


def _clean_path(line: str) -> str | None:
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
        closed = _CLOSE.match(line)
        if closed and closed.group(1) == "FILE":
            return True
        block.replace.append(line)
        return False
    if _OPEN.match(line):
        raise EditError(
            f"block {block.number} ({block.path}) is not closed: another <<<<<<< marker "
            f"on line {lineno} before >>>>>>> {_CLOSE_WORD[block.kind]}"
        )
    closed = _CLOSE.match(line)
    if closed:
        _check_close(block, closed.group(1))
        return True
    if block.kind == "delete":
        if line.strip():
            raise EditError(
                f"block {block.number} ({block.path}): a DELETE block has no body; "
                f"put >>>>>>> DELETE right after <<<<<<< DELETE"
            )
        return False
    if _DIVIDER.match(line) and not block.divided:
        block.divided = True
        return False
    (block.replace if block.divided else block.search).append(line)
    return False


def _check_close(block: _Block, word: str) -> None:
    expected = _CLOSE_WORD[block.kind]
    if word != expected:
        raise EditError(
            f"block {block.number} ({block.path}) opens with <<<<<<< {_OPEN_WORD[block.kind]} "
            f"but closes with >>>>>>> {word}; close it with >>>>>>> {expected}"
        )
    if block.kind == "replace" and not block.divided:
        raise EditError(
            f"block {block.number} ({block.path}) has no ======= divider between "
            f"the SEARCH lines and the replacement lines"
        )


def _finish(block: _Block) -> Edit:
    return Edit(
        path=block.path,
        kind=block.kind,
        search=_join(block.search),
        replace=_join(block.replace),
    )


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


# --------------------------------------------------------------------------- path safety


def safe_path(repo_dir: Path, rel: str) -> Path:
    """The resolved location of `rel` inside `repo_dir`, or EditError when it is unsafe.

    Refused: empty or absolute paths, `..` components, anything in a `.git` directory,
    and paths that leave the repository through a symlink (of the file or a parent).
    """
    if not rel or not rel.strip() or "\x00" in rel:
        raise EditError(f"refused path {rel!r}: empty or invalid")
    pure = PurePosixPath(rel.replace("\\", "/"))
    if pure.is_absolute() or rel.startswith("~") or re.match(r"^[A-Za-z]:[\\/]", rel):
        raise EditError(
            f"refused path {rel!r}: absolute paths are not allowed; "
            "use a path relative to the repository root"
        )
    if ".." in pure.parts:
        raise EditError(f"refused path {rel!r}: outside the repository ('..' is not allowed)")
    if _in_git_dir(pure.parts):
        raise EditError(f"refused path {rel!r}: inside .git")
    root = repo_dir.resolve()
    target = (root / pure).resolve()  # follows symlinks of the file and its parents
    if not target.is_relative_to(root):
        raise EditError(f"refused path {rel!r}: outside the repository")
    if _in_git_dir(target.relative_to(root).parts):
        raise EditError(f"refused path {rel!r}: inside .git")
    return target


def _in_git_dir(parts: tuple[str, ...]) -> bool:
    # Case-insensitive: on macOS and Windows ".GIT" is the same directory.
    return any(part.lower() == ".git" for part in parts)


# --------------------------------------------------------------------------- applying


@dataclass
class _FileState:
    """One file's content as the edits so far leave it, in memory."""

    rel: str
    text: str | None  # normalised to "\n" line ends, always "\n"-terminated; None: absent
    original: str | None = None  # `text` as loaded, to skip writing unchanged files
    newline: str = "\n"
    final_newline: bool = True

    @property
    def changed(self) -> bool:
        return self.text != self.original


def apply_edits(repo_dir: Path, edits: list[Edit]) -> list[str]:
    """Apply `edits` in order, all or nothing; the repo-relative paths written or deleted.

    EditError (nothing written) names the first edit that cannot be applied and why.
    """
    root = repo_dir.resolve()
    files: dict[Path, _FileState] = {}
    for number, edit in enumerate(edits, start=1):
        try:
            target = safe_path(root, edit.path)
            state = files.get(target) or _load(root, target)
            files[target] = state
            _apply_one(state, edit)
        except EditError as exc:
            raise EditError(f"edit {number} for {edit.path}: {exc}") from None
    written = [(target, state) for target, state in files.items() if state.changed]
    for target, state in written:
        _write(target, state)
    log.debug("applied %d edits to %d files", len(edits), len(written))
    return [state.rel for _, state in written]


def _load(root: Path, target: Path) -> _FileState:
    rel = target.relative_to(root).as_posix()
    for parent in target.parents:
        if parent == root:
            break
        if parent.exists() and not parent.is_dir():
            raise EditError(f"{parent.relative_to(root).as_posix()} is a file, not a directory")
    if not target.exists():
        return _FileState(rel=rel, text=None)
    if not target.is_file():
        raise EditError("not a regular file")
    data = target.read_bytes()
    text = _decode(data)
    newline = "\r\n" if data.count(b"\r\n") * 2 > data.count(b"\n") else "\n"
    text = text.replace("\r\n", "\n")
    final = text.endswith("\n") or not text
    if not final:
        text += "\n"
    return _FileState(
        rel=rel, text=text, original=text, newline=newline, final_newline=final
    )


def _decode(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise EditError("a binary file; only UTF-8 text files can be edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise EditError("not a UTF-8 text file; only UTF-8 text files can be edited") from None


def _apply_one(state: _FileState, edit: Edit) -> None:
    if edit.kind == "delete":
        if state.text is None:
            raise EditError("cannot delete: the file does not exist")
        state.text = None
    elif edit.kind == "write":
        state.text = _terminated(edit.replace)
        state.final_newline = True  # the model wrote the whole file: end it properly
    elif state.text is None:
        if edit.search.strip():
            raise EditError(
                "the file does not exist; to create it use an empty SEARCH section "
                "or a <<<<<<< FILE block"
            )
        state.text = _terminated(edit.replace)
        state.final_newline = True
    elif not edit.search.strip():
        if state.text.strip():
            raise EditError(
                "SEARCH is empty but the file already has content; copy the lines to "
                "change into SEARCH, or use a <<<<<<< FILE block to replace the whole file"
            )
        state.text = _terminated(edit.replace)
    else:
        state.text = _replace(state.text, edit.search, edit.replace)


def _terminated(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def _replace(text: str, search: str, replace: str) -> str:
    """`text` with the single occurrence of `search` (whole lines) replaced."""
    lines = text.split("\n")[:-1]  # text is "\n"-terminated
    wanted = search.split("\n")[:-1]
    new = replace.split("\n")[:-1] if replace else []
    starts = _find(lines, wanted, _exact)
    if not starts:
        starts = _find(lines, wanted, _loose)
        if len(starts) == 1:
            new = _reindent(new, wanted, lines[starts[0] : starts[0] + len(wanted)])
    if not starts:
        raise EditError(f"SEARCH text not found; {_closest_hint(lines, wanted)}")
    if len(starts) > 1:
        where = ", ".join(str(start + 1) for start in starts[:5])
        raise EditError(
            f"SEARCH text matches {len(starts)} times (at lines {where}); "
            f"add surrounding lines to SEARCH so that it matches exactly once"
        )
    start = starts[0]
    result = lines[:start] + new + lines[start + len(wanted) :]
    return "".join(line + "\n" for line in result)


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


def _write(target: Path, state: _FileState) -> None:
    if state.text is None:
        target.unlink()
        return
    text = state.text
    if not state.final_newline:
        text = text.removesuffix("\n")
    data = text.replace("\n", state.newline).encode("utf-8")
    target.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(target, data)


def _atomic_write(target: Path, data: bytes) -> None:
    """Replace `target` in one rename so a crash never leaves half a file; keep its mode."""
    if not target.exists():
        target.write_bytes(data)  # a new file: the umask decides its mode, as usual
        return
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
