"""What a verdict says: the one line people read, what a retry is told before the
digest, and why a blocked task is blocked. Tests are ordered from the attempt's side:
what it broke first, then what the task is about and still fails, then other tasks'."""

from __future__ import annotations

import re

from orchestrator.judging.about import About
from orchestrator.judging.verdict import Parts, few
from reflection.text import clip_middle

LISTED = 10  # test ids named in one line of the retry's text
ERROR_CHARS = 200  # of the first error, in a summary
NO_PROOF = ("no test shows the change: a bug or a feature is done when a test that fails before the change "
            "passes after it; add a test of the change (it is run on the code before the change too, and "
            "must fail there)")


SILENT = ("the test run ended without reporting its tests, as it did before the task (the code under test ends "
          "the runner early, or the run was told not to report): a test that does not report is not a test that passes")


def ordered(parts: Parts) -> tuple[str, ...]:
    """The failing tests, the attempt's own first."""
    return (*parts.broken, *parts.left, *parts.lost, *parts.own, *parts.others)


def summary(parts: Parts, first_error: str | None = None, passed: int | None = None) -> str:
    """The verdict's one line: `passed: 13 tests — pass-to-pass 11, fail-to-pass 2 (…)`, or
    what failed first; `passed`: the tests that passed in the tree as committed."""
    if parts.holds:
        count = f"{passed} test{'' if passed == 1 else 's'} — " if passed is not None else ""
        return f"passed: {count}{parts.line()}"
    if parts.broken:
        said, head = "broken", (f"broke {len(parts.broken)} test(s) that did not fail before the task: "
                                f"{few(parts.broken)}")
    elif parts.left:
        said, head = "left", f"{len(parts.left)} test(s) the task is about still fail: {few(parts.left)}"
    elif parts.lost:
        said, head = "lost", (f"{len(parts.lost)} old test(s) pass as the base wrote them but fail or are skipped in "
                              f"the attempt's copy of the tests: {few(parts.lost)}")
    elif parts.own:
        said, head = "own", f"{len(parts.own)} of the attempt's new tests fail: {few(parts.own)}"
    elif parts.unnamed:
        said, head = "", "the tests failed, and the runner did not name every failure"
    elif parts.silent:
        return f"failed: {SILENT}"
    else:
        said, head = "proof", NO_PROOF
    error = f" ({_error_only(first_error)})" if first_error and said in ("broken", "lost", "own", "left") else ""
    return f"failed: {head}{error}; {parts.line(said)}"


def lead(parts: Parts, first_error: str | None) -> str:
    """The lines a retry reads before the digest."""
    lines = []
    if parts.broken:
        lines.append("Broken by this attempt: they did not fail before the task (fix these first): "
                     f"{_ids(parts.broken)}")
    if parts.lost:
        lines.append("Old tests your copy of the test files fails or skips, though they pass as the base wrote them "
                     f"(put them back as they were; add new tests beside them): {_ids(parts.lost)}")
    if parts.own:
        lines.append(f"Your new tests that fail (make them pass, or fix what they test): {_ids(parts.own)}")
    if first_error and (parts.broken or parts.lost or parts.own):
        lines.append(f"  {first_error}")
    if parts.left:
        lines.append("Failing before the task and still failing: the task is done only when they pass "
                     f"(make them pass): {_ids(parts.left)}")
    if parts.proof == "missing":
        lines.append(NO_PROOF[0].upper() + NO_PROOF[1:] + ".")
    if parts.silent:
        lines.append(SILENT[0].upper() + SILENT[1:] + ".")
    if parts.others:
        lines.append(f"Failing before the task and not this task's (leave them alone): {_ids(parts.others)}")
    lines.append("The old tests were run as they were before the task, whatever the attempt did to them; "
                 "the digest below lists the failures in the order the tests ran.")
    return "\n".join(lines) + "\n\n"


def blocked(task_id: str, left: tuple[str, ...], rule: str) -> str:
    """Why a task whose only failures are tests it is about is blocked, and what to do. It
    never offers to waive them: a waiver of a task's own tests would close it unfixed."""
    sentence = (f"{len(left)} test(s) this task is about still fail, so it is not done: {few(left)}; "
                f"`goldenloop reopen {task_id}` tries again")
    if rule == "every failing test":
        sentence += ("; the task names no test, so every test failing before it is its own: name in its "
                     "description the tests it is about if some belong to another task")
    return sentence


def about_line(about: About, failing: list[str]) -> str:
    """The preflight's words on the tests failing before any change."""
    others = [t for t in failing if t not in about]
    words = []
    if about.tests:
        words.append(f"the task must make them pass: {few(sorted(about.tests))}")
    if others:
        words.append(f"not this task's, left alone: {few(others)}")
    return "; ".join(words)


def _error_only(first_error: str) -> str:
    """`Kind: message` of a `path:line: Kind: message` (its place is in the digest), clipped."""
    return clip_middle(re.sub(r"^[^\s:]+\.\w+(?::\d+)?: ", "", first_error), ERROR_CHARS)


def _ids(tests: tuple[str, ...]) -> str:
    more = f" and {len(tests) - LISTED} more" if len(tests) > LISTED else ""
    return ", ".join(tests[:LISTED]) + more
