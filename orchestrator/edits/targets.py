"""Which file each edit is for: the path as written, or the one file it can only mean.

Models misname files in predictable ways: a made-up leading folder (`src/solution.py`
for `solution.py`), a missing one (`calc.py` for `src/calc.py`), or no path at all.
An edit is resolved to an existing file only when exactly one file fits:

- a path that exists is taken as it is;
- otherwise the listed files sharing the longest tail of its path (its name at least):
  one such file is the target when the edit needs an existing file (SEARCH, delete),
  or when the written path's folder does not exist (a folder that is not there is a
  mistake; a new file in an existing folder is a new file);
- a code block under a path whose folder does not exist and that no file's name fits:
  the one file defining the functions and classes it holds, unless the task itself
  names that path (then it is a file to create);
- a SEARCH edit under a path that does not exist, whose SEARCH text is not in the file
  its name fits (or no file fits it): the file holding that text, when it is in exactly
  one file, at exactly one place, and that file is tracked by git and is not a test
  (holders.py). The correction is noted (`RepoView.corrections`) for the run log and
  the next prompt; text found in several files, several times in one, or only in an
  untracked or test file is refused with the reason;
- an edit with no path: the file holding its SEARCH text, or the file defining the
  functions and classes of its code block, or the one file the task is about (the one
  that is not a test, when the task also names its tests).

A Python code block that is only a function's body is made the whole function, when the
task names exactly one function of the file (or the file has only one).

Anything else is refused with the real file list, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from orchestrator.edits.base import Edit, EditError
from orchestrator.edits.holders import file_text, search_places, tracked_files
from orchestrator.edits.pymerge import is_bare_body, with_body
from orchestrator.edits.search import replace_once

_DEFINES = re.compile(r"^(?:async\s+def|def|class)\s+(\w+)|^(\w+)\s*(?::[^=]*)?=(?!=)", re.MULTILINE)
_IMPORTS = re.compile(r"^(?:import|from)\s+\w", re.MULTILINE)
_FUNCTIONS = re.compile(r"^(?:async\s+)?def\s+(\w+)", re.MULTILINE)
MAX_LISTED = 30  # file names quoted in an error


@dataclass
class RepoView:
    """What the resolver may look at: the repository's files and the ones the task is about."""

    root: Path
    listed: list[str]  # tracked and untracked, not ignored
    shown: dict[str, str] = field(default_factory=dict)  # path -> text the model was shown
    in_play: list[str] = field(default_factory=list)  # files the task is about, existing
    tests: set[str] = field(default_factory=set)  # which of them are test files
    prompt: str = ""  # the task as the model read it: a path it names is meant as written
    is_test: Callable[[str], bool] = lambda path: False  # a file that judges the attempt
    # Edits moved to a file other than the one named, in words for the run log and the model.
    corrections: list[str] = field(default_factory=list)
    _tracked: set[str] | None = field(default=None, init=False, repr=False)

    def tracked(self) -> set[str]:
        """The files git tracks; asked once, and only when an edit needs it."""
        if self._tracked is None:
            self._tracked = tracked_files(self.root)
        return self._tracked

    def exists(self, rel: str) -> bool:
        try:
            return (self.root / rel).is_file()
        except OSError:
            return False

    def is_folder(self, rel: str) -> bool:
        # A name the file system refuses (too long, say) is no folder; apply_edits says why.
        try:
            return (self.root / rel).is_dir()
        except OSError:
            return False

    def file_list(self) -> str:
        names = self.listed[:MAX_LISTED]
        more = len(self.listed) - len(names)
        return ", ".join(names) + (f" and {more} more" if more > 0 else "") if names else "(none)"


def resolve_targets(edits: list[Edit], view: RepoView) -> list[Edit]:
    """`edits` with every path resolved to the file it is for; EditError when unclear."""
    kept = _drop_examples(edits)
    resolved = []
    for number, edit in enumerate(kept, start=1):
        path = _resolve(edit, view, number) if edit.path else _find_unnamed(edit, view, number)
        update: dict[str, str] = {"path": path}
        if edit.kind == "block" and path.endswith(".py") and path in view.shown and is_bare_body(edit.replace):
            update["replace"] = _whole_function(edit, view, path, number)
        resolved.append(edit.model_copy(update=update))
    return resolved


def _whole_function(edit: Edit, view: RepoView, path: str, number: int) -> str:
    """The function a bare body belongs to, with that body."""
    text = view.shown[path]
    functions = set(_FUNCTIONS.findall(text))
    named = {word for word in re.findall(r"\w+", view.prompt) if word in functions}
    chosen = named if len(named) == 1 else functions if len(functions) == 1 else set()
    whole = with_body(text, chosen.pop(), edit.replace) if chosen else None
    if whole is None:
        raise EditError(
            f"edit {number} for {path} is a function body, and it is not clear which function it "
            "belongs to; write the whole function, from its def line"
        )
    return whole


def _drop_examples(edits: list[Edit]) -> list[Edit]:
    """Unnamed code blocks that define nothing (an example call) beside ones that do."""
    def defines(edit: Edit) -> bool:
        code = edit.replace
        return edit.kind != "block" or bool(edit.path) or bool(_DEFINES.search(code) or _IMPORTS.search(code))

    useful = [e for e in edits if defines(e)]
    return useful if useful else edits


def _resolve(edit: Edit, view: RepoView, number: int) -> str:
    written = edit.path.replace("\\", "/").removeprefix("./")
    if view.exists(written):
        return written
    needs_file = edit.kind == "delete" or (edit.kind == "replace" and edit.search.strip())
    folder = PurePosixPath(written).parent
    if not needs_file and (str(folder) == "." or view.is_folder(str(folder))):
        return written  # a new file in an existing folder
    matches = _by_tail(written, view.listed)
    searching = edit.kind == "replace" and bool(edit.search.strip())
    if searching and not (len(matches) == 1 and _holds(file_text(view.root / matches[0]) or "", edit)):
        holder = _search_holder(edit, view, number, written)
        if holder is not None:
            return holder
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise EditError(
            f"edit {number}: {written} does not exist, and {len(matches)} files could be meant "
            f"({', '.join(matches[:5])}); write the path exactly as listed"
        )
    if needs_file:
        raise EditError(
            f"edit {number}: {written} does not exist; the files are: {view.file_list()}. "
            "Write the path of the file to change exactly as listed"
        )
    if edit.kind == "block" and written not in view.prompt:
        definers = _definers(edit, view)
        if len(definers) == 1:
            return definers[0]
    return written


def _search_holder(edit: Edit, view: RepoView, number: int, written: str) -> str | None:
    """The one tracked file holding the SEARCH text at one place; None when no file holds
    it; EditError when it is not clear which file is meant."""
    found = search_places(view.root, [p for p in view.listed if not p.startswith(".openagents/")], edit.search)
    if not found:
        return None
    missing = f"edit {number}: {written} does not exist"
    if len(found) > 1:
        raise EditError(f"{missing}, and its SEARCH text is in {len(found)} files ({', '.join(list(found)[:5])}); "
                        "write the path exactly as listed")
    ((holder, count),) = found.items()
    if count > 1:
        raise EditError(f"{missing}; its SEARCH text is in {holder}, but at {count} places; write the path "
                        "exactly as listed and add lines to SEARCH so that it matches once")
    if view.is_test(holder):
        raise EditError(f"{missing}; its SEARCH text is only in {holder}, a test file that judges the attempt; "
                        "write the path exactly as listed")
    if holder not in view.tracked():
        raise EditError(f"{missing}; its SEARCH text is only in {holder}, which git does not track; "
                        "write the path exactly as listed")
    view.corrections.append(f"edit {number} named {written}, which does not exist; it was applied to {holder}, "
                            "the one file holding its SEARCH text. Write paths exactly as listed")
    return holder


def _by_tail(written: str, listed: list[str]) -> list[str]:
    """The listed paths sharing the longest tail of path components with `written`."""
    want = PurePosixPath(written).parts
    best, found = 0, []
    for name in listed:
        parts = PurePosixPath(name).parts
        tail = 0
        while tail < min(len(parts), len(want)) and parts[-1 - tail] == want[-1 - tail]:
            tail += 1
        if tail and tail > best:
            best, found = tail, [name]
        elif tail and tail == best:
            found.append(name)
    return found


def _find_unnamed(edit: Edit, view: RepoView, number: int) -> str:
    if edit.kind == "replace" and edit.search.strip():
        holders = [p for p, text in view.shown.items() if _holds(text, edit)]
        if len(holders) == 1:
            return holders[0]
    if edit.kind == "block":
        definers = _definers(edit, view)
        if len(definers) == 1:
            return definers[0]
    if len(view.in_play) == 1:
        return view.in_play[0]
    code = [path for path in view.in_play if path not in view.tests]
    if len(code) == 1 and not re.search(r"^\s*(?:async\s+)?def test", edit.replace + edit.search, re.MULTILINE):
        return code[0]
    raise EditError(
        f"edit {number} names no file, and it could be for any of: {view.file_list()}; "
        "write the file's path on the line before its code block"
    )


def _definers(edit: Edit, view: RepoView) -> list[str]:
    """The shown files that define a top-level name the code block defines."""
    names = _defined(edit.replace)
    return [path for path, text in view.shown.items() if names & _defined(text)]


def _defined(code: str) -> set[str]:
    return {a or b for a, b in _DEFINES.findall(code)}


def _holds(text: str, edit: Edit) -> bool:
    try:
        replace_once(text if text.endswith("\n") else text + "\n", edit.search, edit.replace)
    except EditError:
        return False
    return True
