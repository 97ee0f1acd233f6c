"""Apply edits to the working tree: all or nothing, line endings and file modes kept.

Every edit is checked and every new file content computed in memory first; only when
all succeed are files written, each by an atomic rename. A reply with one bad edit
leaves the tree as it was, and the EditError names the edit and what to fix.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from orchestrator.edits.base import Edit, EditError
from orchestrator.edits.paths import safe_path
from orchestrator.edits.pymerge import merge_python
from orchestrator.edits.search import replace_once

log = logging.getLogger("goldenloop.edits.apply")

PYTHON_SUFFIXES = (".py", ".pyi")
# A comment standing in for code the model did not write out.
_ELISION = re.compile(
    r"^\s*(?:#|//|/\*|<!--|--|\*)\s*[(\[]?\s*(?:"
    r"(?:\.\.\.|…).*\b(?:rest|existing|remaining|unchanged|previous|omitted|same|other|before)\b"
    r"|\brest of (?:the )?(?:code|file|function|class|module|implementation|methods)\b"
    r"|\bexisting (?:code|methods|functions|imports)\b"
    r"|\b(?:code|everything else) (?:remains?|stays?) (?:the same|unchanged)\b)",
    re.IGNORECASE,
)


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
    return _FileState(rel=rel, text=text, original=text, newline=newline, final_newline=final)


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
    elif edit.kind in ("write", "block"):
        _write_whole(state, edit)
    elif state.text is None:
        if edit.search.strip():
            raise EditError(
                "the file does not exist, so there is nothing to SEARCH in; to create it, "
                "write its whole content in one fenced code block under its path"
            )
        state.text = _terminated(edit.replace)
        state.final_newline = True
    elif not edit.search.strip():
        if state.text.strip():
            raise EditError(
                "SEARCH is empty but the file already has content; copy the lines to "
                "change into SEARCH, or write the whole file in one fenced code block"
            )
        state.text = _terminated(edit.replace)
    else:
        state.text = replace_once(state.text, edit.search, edit.replace)


def _write_whole(state: _FileState, edit: Edit) -> None:
    """A FILE block, or a code block: the file's new content (a Python block is merged)."""
    content = _terminated(edit.replace)
    if state.text is not None and edit.kind == "block":
        _refuse_elisions(content, state.text)
        if state.rel.endswith(PYTHON_SUFFIXES):
            content = merge_python(state.text, content)
    state.text = content
    state.final_newline = True  # the model wrote the whole file: end it properly


def _refuse_elisions(content: str, original: str) -> None:
    """A block that stands in "... rest of the code ..." for real lines would delete them."""
    present = {line.strip() for line in original.splitlines()}
    for number, line in enumerate(content.splitlines(), start=1):
        if _ELISION.match(line) and line.strip() not in present:
            raise EditError(
                f"the code block leaves code out ({line.strip()[:80]!r} on its line {number}); "
                "write the file complete, every line of it, or the complete functions you change"
            )


def _terminated(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


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
