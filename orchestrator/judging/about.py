"""What a task is about: the tests failing at its base that it must make pass.

A task is never closed while a failing test it is about still fails, and never blocked
by a failing test it is not about (another task's bug): those are listed in its close
note instead. The rule must never guess a test *out* of a task, so every step can only
add tests, and the task's own words decide before anything looser does:

1. **Named.** Tests the task names: by id (`tests/test_calc.py::test_add`, exactly that
   test), by function (`test_add`, with every failing test of its file: a partial fix of
   one file's tests is no fix), or by file (`tests/test_calc.py`, every failing test in it).
2. **Its code.** Failing tests of a file whose code the task names in code form: the
   module (`calc.py`, `` `calc` ``, `calc.add`) or the function a test is named after
   (`add()`), every failing test of that file. Plain words ("add a reorder command")
   never match: code names are too often English.
3. **Everything, for a bug that names nothing.** A bug task (type bug, fix, regression)
   that names no test and no code, or a task that asks for "the failing tests" to pass,
   is about every test failing at its base, except those the user waived in
   `checks.knownFailures`. The only place a waiver narrows a task.
4. **Its own files.** Failing tests in a test file the attempt changed, whatever the
   rules above found.

And, once an attempt is judged (judging/verdict.py): 5. **the files it fixes**: when the
attempt makes some failing tests of a file pass, every failing test of that file is the
task's; half a file's tests is half a fix.

A waiver never covers a test found by rules 1, 2, 4 or 5. A docs or chore task (its type) is
about the tests it names and the test files it changes only (rules 1 and 4).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from posixpath import basename

from orchestrator.checks.envcheck import mentions
from orchestrator.checks.waivers import Waivers

BUG_TYPES = frozenset({"bug", "fix", "bugfix", "regression", "defect"})
FEATURE_TYPES = frozenset({"feature", "enhancement", "story"})
PASS_TO_PASS_TYPES = frozenset({"docs", "doc", "documentation", "chore"})
# "make the tests pass", "fix the failing tests": a task about every failing test.
_EVERY_FAILING = re.compile(
    r"\b(?:failing|broken|red)\s+tests?\b|\btests?\s+(?:to\s+)?(?:pass|green)\b|\bmake\s+(?:the\s+)?tests?\s+pass",
    re.I,
)


@dataclass(frozen=True)
class About:
    """The failing tests a task must make pass, and by which rule they were found."""

    tests: frozenset[str] = frozenset()
    rule: str = "none"  # named | code | every failing test | its files | none
    waived: tuple[str, ...] = ()  # left out by the user's waiver (rule 3 only)

    def __contains__(self, test_id: object) -> bool:
        return test_id in self.tests


def needs_proof(task_type: str) -> bool:
    """A bug or a feature is done only when a test shows the change (fail-to-pass)."""
    return task_type.lower() in BUG_TYPES | FEATURE_TYPES


def about(text: str, task_type: str, failing: Iterable[str], touched: Iterable[str] = (),
          waivers: Waivers | None = None) -> About:
    """The tests of `failing` (at the base) the task with `text` is about; `touched`: the
    test files the attempt changed."""
    failing = sorted(set(failing))
    own = {t for t in failing if file_of(t) in set(touched)}
    named = {t for t in failing if _named(t, text)}
    files = {file_of(t) for t in named if not _single(t, text)}
    named |= {t for t in failing if file_of(t) in files}  # a file's failing tests go together
    if named:
        return About(frozenset(named | own), "named")
    if task_type.lower() in PASS_TO_PASS_TYPES:  # a docs or chore task is about the tests it names only
        return About(frozenset(own), "its files" if own else "none")
    code = {file_of(t) for t in failing if _code_named(t, text)}
    if code:
        return About(frozenset({t for t in failing if file_of(t) in code} | own), "code")
    if failing and (task_type.lower() in BUG_TYPES or _EVERY_FAILING.search(text)):
        waivers = waivers or Waivers()
        waived = tuple(t for t in failing if waivers.entry_for(t) is not None and t not in own)
        return About(frozenset(t for t in failing if t not in waived), "every failing test", waived)
    return About(frozenset(own), "its files" if own else "none")


def file_of(test_id: str) -> str:
    """The file a test id names (`tests/test_x.py` of `tests/test_x.py::T::test_y[1]`)."""
    return test_id.split("::", 1)[0]


def _function(test_id: str) -> str:
    return re.sub(r"\[.*\]$", "", test_id.rsplit("::", 1)[-1])


def _single(test_id: str, text: str) -> bool:
    """The task names single tests of this test's file by id (`test_x.py::test_y`)."""
    path = file_of(test_id)
    return "::" in test_id and (f"{path}::" in text or f"{basename(path)}::" in text)


def _named(test_id: str, text: str) -> bool:
    """The task names this test: its id, its file, or its function."""
    path = file_of(test_id)
    if _single(test_id, text):
        return mentions(text, test_id) or mentions(text, f"{basename(path)}::{test_id.split('::', 1)[1]}")
    if ("/" in path or "." in path) and (mentions(text, path) or mentions(text, basename(path))):
        return True
    return _function(test_id).startswith(("test", "Test")) and mentions(text, _function(test_id))


def _code_named(test_id: str, text: str) -> bool:
    """The task names, in code form, the module or function this test is named after."""
    if "::" not in test_id:
        return False
    stem = basename(file_of(test_id)).rsplit(".", 1)[0]
    module = _tested(stem, ("test_", "tests_"), ("_test", "_tests", ".test", ".spec"))
    function = re.sub(r"^(?:test_|Test)(?=\w)", "", _function(test_id))
    forms = []
    if module:
        forms += [rf"\b{re.escape(module)}\.\w", rf"`{re.escape(module)}`"]
    if function and function != _function(test_id):
        forms += [rf"(?<![\w.]){re.escape(function)}\s*\(", rf"`{re.escape(function)}`", rf"\.{re.escape(function)}\b"]
    return any(re.search(form, text) for form in forms)


def _tested(stem: str, prefixes: tuple[str, ...], suffixes: tuple[str, ...]) -> str:
    for prefix in prefixes:
        if stem.startswith(prefix):
            return stem[len(prefix):]
    for suffix in suffixes:
        if stem.endswith(suffix):
            return stem[: -len(suffix)]
    return ""
