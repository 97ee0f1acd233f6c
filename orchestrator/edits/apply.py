"""Apply edits to the working tree: all or nothing, line endings and file modes kept.

Every edit is checked and every new file content computed in memory first; only when
all succeed are files written: each new content is staged in a file beside its target,
then renamed over it. A reply with one bad edit leaves the tree as it was, and the
EditError names the edit and what to fix. The file system may refuse what the model
asked for (a name too long, a directory where a file should go, no permission); that
is a refused edit like any other, never an exception out of the loop, and whatever was
already written is put back.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.edits.base import Edit, EditError
from orchestrator.edits.paths import safe_path
from orchestrator.edits.pymerge import merge_python
from orchestrator.edits.search import replace_once
from orchestrator.edits.unredact import refuse_leftovers, restore
from reflection.text import clip_middle

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
_PATH_SHOWN = 120  # a path longer than this is clipped in the middle in an error
# The file system's refusals a model can act on, in its words; others use strerror.
_OS_REASONS = {
    errno.ENAMETOOLONG: "the name is longer than the file system allows; use a shorter one",
    errno.EISDIR: "it is a directory, not a file",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


@dataclass
class _FileState:
    """One file's content as the edits so far leave it, in memory."""

    rel: str
    text: str | None  # normalised to "\n" line ends, always "\n"-terminated; None: absent
    original: str | None = None  # `text` as loaded, to skip writing unchanged files
    newline: str = "\n"
    final_newline: bool = True
    raw: bytes | None = None  # the bytes on disk, to put back if a later write fails
    mode: int | None = None  # the permission bits on disk; None: a new file

    @property
    def changed(self) -> bool:
        return self.text != self.original

    def encoded(self) -> bytes:
        """`text` as it goes to disk: its own line ends, its final newline or none."""
        assert self.text is not None
        text = self.text if self.final_newline else self.text.removesuffix("\n")
        return text.replace("\n", self.newline).encode("utf-8")


def apply_edits(repo_dir: Path, edits: list[Edit]) -> list[str]:
    """Apply `edits` in order, all or nothing; the repo-relative paths written or deleted.

    EditError (nothing left written) names the first edit that cannot be applied, or the
    file the file system refused to write, and why, in one line.
    """
    files = _plan(repo_dir.resolve(), edits)
    written = [(target, state) for target, state in files.items() if state.changed]
    _commit(written)
    log.debug("applied %d edits to %d files", len(edits), len(written))
    return [state.rel for _, state in written]


def _plan(root: Path, edits: list[Edit]) -> dict[Path, _FileState]:
    """Every touched file's new content, in memory; nothing is written here."""
    files: dict[Path, _FileState] = {}
    for number, edit in enumerate(edits, start=1):
        try:
            target = safe_path(root, edit.path)
            state = files.get(target) or _load(root, target)
            files[target] = state
            _apply_one(state, restore(edit, state.original))
            refuse_leftovers(state.text, state.original)
        except EditError as exc:
            raise EditError(f"edit {number} for {_shown(edit.path)}: {exc}") from None
        except OSError as exc:  # reading or even asking about the path can fail
            raise EditError(f"edit {number} for {_shown(edit.path)}: {_os_reason(exc)}") from None
    return files


def _shown(path: str) -> str:
    return clip_middle(path, _PATH_SHOWN)


def _os_reason(exc: OSError) -> str:
    reason = _OS_REASONS.get(exc.errno or 0)
    return reason or (exc.strerror or str(exc)).lower()


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
    mode = target.stat().st_mode & 0o7777
    text = _decode(data)
    newline = "\r\n" if data.count(b"\r\n") * 2 > data.count(b"\n") else "\n"
    text = text.replace("\r\n", "\n")
    final = text.endswith("\n") or not text
    if not final:
        text += "\n"
    return _FileState(
        rel=rel, text=text, original=text, newline=newline, final_newline=final, raw=data, mode=mode
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


def _commit(changes: list[tuple[Path, _FileState]]) -> None:
    """Write every change or none; EditError names the file the file system refused."""
    staging = _Staging()
    try:
        for target, state in changes:
            staging.stage(target, state)
        for target, state in changes:
            staging.swap(target, state)
    except OSError as exc:
        stuck = staging.undo()
        after = f"these could not be put back: {', '.join(stuck)}" if stuck else "no file was changed"
        raise EditError(f"writing {_shown(staging.current)} failed: {_os_reason(exc)}; {after}") from None


@dataclass
class _Staging:
    """The writes of one reply: staged beside their targets, swapped in, undone on failure."""

    current: str = ""  # the repo-relative path being written, for the error
    _staged: dict[Path, Path] = field(default_factory=dict)  # target -> its new content
    _made_dirs: list[Path] = field(default_factory=list)  # parents first
    _swapped: list[tuple[Path, _FileState]] = field(default_factory=list)

    def stage(self, target: Path, state: _FileState) -> None:
        """Put the new content in place next to `target`; most refusals happen here."""
        self.current = state.rel
        if state.text is None:
            return
        self._make_dirs(target.parent)
        self._staged[target] = _write_beside(target, state.encoded(), state.mode)

    def swap(self, target: Path, state: _FileState) -> None:
        """Replace or delete `target` in one step, so no file is ever half written."""
        self.current = state.rel
        if state.text is None:
            target.unlink()
        else:
            os.replace(self._staged[target], target)
            del self._staged[target]
        self._swapped.append((target, state))

    def undo(self) -> list[str]:
        """The tree as it was; the paths that could not be put back, if any."""
        stuck = [state.rel for target, state in reversed(self._swapped) if not _put_back(target, state)]
        for staged in self._staged.values():
            _quietly(staged.unlink)
        for folder in reversed(self._made_dirs):
            _quietly(folder.rmdir)
        return stuck

    def _make_dirs(self, folder: Path) -> None:
        missing: list[Path] = []
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for made in reversed(missing):
            made.mkdir()
            self._made_dirs.append(made)


def _write_beside(target: Path, data: bytes, mode: int | None) -> Path:
    """`data` in a new file in `target`'s folder, with `mode` (None: the umask decides).

    The name is short and fixed in length: the target's own may already be as long as
    the file system allows.
    """
    staged = target.parent / f".goldenloop-{secrets.token_hex(6)}.tmp"
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(staged, mode)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    return staged


def _put_back(target: Path, state: _FileState) -> bool:
    """`target` as it was before this reply; False when the file system refuses."""
    staged: Path | None = None
    try:
        if state.raw is None:
            target.unlink(missing_ok=True)
        else:
            staged = _write_beside(target, state.raw, state.mode)
            os.replace(staged, target)
    except OSError as exc:
        log.error("could not put back %s after a failed write: %s", state.rel, exc)
        if staged is not None:
            _quietly(staged.unlink)
        return False
    return True


def _quietly(remove: Callable[[], None]) -> None:
    try:
        remove()
    except OSError as exc:  # a leftover is logged; the refusal itself is what matters
        log.warning("could not clean up after a failed write: %s", exc)
