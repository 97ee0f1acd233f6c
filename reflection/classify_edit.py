"""Heuristic reflection on a reply that could not be applied as an edit.

Nothing ran, so there is no test output to read: the reason is the edit error itself,
which says exactly what was wrong with the reply. Each rule turns one kind of error
into what went wrong and what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from reflection.schema import FailureCategory, FailureContext, ReflectionDraft
from reflection.text import joined_lines

_Rule = Callable[[str], tuple[str, str, list[str]] | None]


def classify_edit(ctx: FailureContext) -> ReflectionDraft:
    error = joined_lines(ctx.digest)
    for rule in _RULES:
        found = rule(error)
        if found is not None:
            analysis, suggestion, items = found
            return ReflectionDraft.clamped(FailureCategory.APPROACH_ERROR, analysis, suggestion, items, 0.6)
    raise AssertionError("the last rule always answers")  # pragma: no cover


def _cut_off(error: str) -> tuple[str, str, list[str]] | None:
    if "cut off" not in error and "truncated" not in error:
        return None
    return (
        "The reply was cut off before its code ended (the model's output limit), so nothing "
        "was applied; long replies come from code that lists cases one by one.",
        "Write a short, general solution (a loop or a formula, not a case per value) and "
        "finish the code block.",
        ["Keep the reply short: only the code that changes", "Close every code block"],
    )


def _missing_file(error: str) -> tuple[str, str, list[str]] | None:
    match = re.search(r"(\S+) does not exist", error)
    if match is None:
        return None
    files = re.search(r"the files are: (.+?)\.(?: |$)", error)
    listed = f" The files are: {files.group(1)}." if files else ""
    return (
        f"The reply named {match.group(1)}, which is not a file of this repository.{listed}",
        "Write the path exactly as the file list shows it, relative to the repository root.",
        ["Copy the path from the list of repository files", "Do not invent folders such as src/"],
    )


def _no_code(error: str) -> tuple[str, str, list[str]] | None:
    if "holds no code" not in error and "empty" not in error:
        return None
    return (
        "The reply held no code to apply: no fenced code block under a file path.",
        "Reply with the file's path on a line of its own, then its complete new content in "
        "one fenced code block.",
        ["Put the code in a fenced block", "Write the file's path on the line before the block"],
    )


def _search_mismatch(error: str) -> tuple[str, str, list[str]] | None:
    if "SEARCH text" not in error:
        return None
    return (
        "The SEARCH lines of an edit block did not match the file exactly once, so the edit "
        "could not be placed.",
        "Copy SEARCH lines exactly from the file as shown, or write the complete function or "
        "file in a fenced code block instead.",
        ["Copy lines character for character", "Prefer the whole function when unsure"],
    )


def _ambiguous(error: str) -> tuple[str, str, list[str]] | None:
    if "could be meant" not in error and "names no file" not in error:
        return None
    return (
        "The reply did not say clearly which file its code is for.",
        "Write the file's exact path on the line right before each code block.",
        ["One code block per file, each under its path"],
    )


def _other(error: str) -> tuple[str, str, list[str]]:
    return (
        f"The reply could not be applied: {error}",
        "Follow the reply format exactly: the file's path on its own line, then the complete "
        "new code in one fenced code block.",
        ["Re-read the reply format before answering"],
    )


_RULES: tuple[_Rule, ...] = (_cut_off, _missing_file, _no_code, _search_mismatch, _ambiguous, _other)
