"""The verdict's parts, as SWE-bench judges a fix: pass-to-pass and fail-to-pass.

- **pass-to-pass**: every test that passed at the base passes on the candidate, run with
  the base's own tests and runner configuration (the old tests' run);
- **the tests the task is about** (judging/about.py) pass there too;
- **fail-to-pass**, for a bug or a feature: at least one test fails (or does not exist)
  at the base and passes now: an old failing test fixed, or a new test that passes on the
  candidate and fails on the base's code (the new tests' run on the base);
- **the commit's own tests**: the candidate as committed, its own test files included,
  fails no test but those failing at the base that are other tasks' (listed, never
  blocking).

A subtask before the task's last needs pass-to-pass only: the task's own proof is judged
when its last subtask ends. Where the runner reports no test ids, the commands' exit codes
and the failing ids in their output stand in, and no new test can be seen to show a
change: the note says so.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.judging.about import About
from orchestrator.judging.outcomes import FAILED, PASSED, SKIPPED
from orchestrator.judging.sessions import Run
from orchestrator.judging.test_paths import is_doctest
from reflection.text import english_list

Proof = Literal["shown", "missing", "not reported", "not needed"]
LISTED = 20  # test ids kept per part in an event or a record


@dataclass(frozen=True)
class Parts:
    """What a verdict is made of, shown wherever a verdict is."""

    kept: int = 0  # pass-to-pass: tests that passed at the base and pass now
    broken: tuple[str, ...] = ()  # passed at the base and fail, are skipped or did not run now; or skipped and fail
    shown: tuple[str, ...] = ()  # fail-to-pass: failing or absent at the base, passing now
    left: tuple[str, ...] = ()  # the task is about them, and they still fail
    own: tuple[str, ...] = ()  # the attempt's new tests that fail in the tree as committed
    lost: tuple[str, ...] = ()  # old tests that pass as the base wrote them, and not in the commit's copy
    others: tuple[str, ...] = ()  # failed at the base, not this task's, fail still: the note lists them
    proof: Proof = "not needed"
    unnamed: bool = False  # the tests failed and the runner did not name every failure
    ids: bool = True  # the runner reported each test by id
    silent: bool = False  # it reported them at the base, and not now: the run ended early

    @property
    def holds(self) -> bool:
        wrong = self.broken or self.left or self.own or self.lost or self.unnamed or self.silent
        return not wrong and self.proof != "missing"

    def as_event(self) -> dict[str, Any]:
        """The parts in the run log and the records (camelCase, lists cut to `LISTED`)."""
        return {"passToPass": self.kept, "broken": list(self.broken[:LISTED]), "failToPass": list(self.shown[:LISTED]),
                "aboutFailing": list(self.left[:LISTED]), "ownFailing": list(self.own[:LISTED]),
                "lostInCommit": list(self.lost[:LISTED]),
                "stillFailing": list(self.others[:LISTED]), "proof": self.proof, "testIds": self.ids}

    def line(self, said: str = "") -> str:
        """One line: `pass-to-pass 11, fail-to-pass 2 (tests/test_calc.py::test_add and …)`;
        `said`: the part a sentence before it named already (broken, own, left or proof)."""
        broken = f", {len(self.broken)} broken" if self.broken and said != "broken" else ""
        words = f"pass-to-pass {self.kept}{broken}"
        if self.shown:
            words += f", fail-to-pass {len(self.shown)} ({few(self.shown)})"
        elif self.proof == "not reported" or (self.proof == "missing" and said != "proof"):
            words += ", no test shows the change" + (" (the runner names no passing test)"
                                                    if self.proof == "not reported" else "")
        if self.left and said != "left":
            words += f"; still failing, the task's: {few(self.left)}"
        if self.own and said != "own":
            words += f"; its new tests failing: {few(self.own)}"
        if self.lost and said != "lost":
            words += f"; failing or skipped in the commit's copy: {few(self.lost)}"
        if self.others:
            words += f"; still failing, not this task's: {few(self.others)}"
        return words


def decide(base: Run, old: Run, candidate: Run, about: About, *, final: bool, proof_needed: bool,
           on_base: Run | None = None, scope: frozenset[str] | None = None,
           changed: frozenset[str] = frozenset()) -> Parts:
    """The parts of a candidate's verdict. `old`: its code under the base's tests (the
    candidate's own run when it changed no test); `candidate`: its own copies of the tests,
    of the test files in `scope` (None: all); `on_base`: its new tests on the base's code,
    when they were run; `changed`: the paths the candidate changed (a doctest in one of them
    says what its own docstring expects, so it is no proof)."""
    if base.reported and not (old.reported and candidate.reported):  # pytest ended before its report
        return Parts(silent=True, proof="not needed")
    if not (base.reported and old.reported and candidate.reported):
        return _without_ids(base, old, about, final=final, proof_needed=proof_needed)
    at_base = base.outcomes
    now = functools.partial(state, old.outcomes)

    def shows(test_id: str) -> bool:  # passes now, and what it expects is not the attempt's own words
        return now(test_id) == PASSED and not (is_doctest(test_id) and _file(test_id) in changed)

    uncollected = {t for t in at_base if "::" not in t}  # files whose tests could not even be collected
    was = sorted(t for t, o in at_base.items() if o == PASSED)
    # A test skipped at the base that fails now ran because of the attempt (a skip condition
    # it changed, a base run taken where the test did not yet run): the attempt's failure.
    woke = tuple(sorted(t for t, o in at_base.items() if o == SKIPPED and now(t) == FAILED))
    broken = tuple(t for t in was if now(t) != PASSED) + woke
    fixed = [t for t, o in at_base.items() if o != PASSED and shows(t)]  # failed or skipped
    # A file some of whose failing tests the attempt fixed is the task's: all of them, or it is half a fix.
    touched = {_file(t) for t in fixed} | {_file(t) for t, o in old.outcomes.items()
                                           if o == PASSED and _file(t) in uncollected}
    ours = about.tests | {t for t, o in at_base.items() if o == FAILED and _file(t) in touched}
    left = tuple(sorted(_inside(old.outcomes, t) for t in ours if not shows(t))) if final else ()
    new = [t for t, o in candidate.outcomes.items() if o == PASSED and t not in at_base and _file(t) not in uncollected]
    shown_new = [t for t in new if on_base is not None and on_base.outcomes.get(t) != PASSED]
    others = tuple(sorted(t for t, o in at_base.items() if o == FAILED and t not in ours and now(t) != PASSED))
    own = tuple(sorted(t for t, o in candidate.outcomes.items()
                       if o == FAILED and t not in at_base and _file(t) not in uncollected)) if final else ()
    lost = tuple(sorted(t for t, o in old.outcomes.items() if o == PASSED and t in at_base
                        and (scope is None or t.split("::", 1)[0] in scope) and candidate.outcomes.get(t) != PASSED))
    shown = tuple(sorted(fixed) + sorted(shown_new))
    proof: Proof = "not needed" if not (final and proof_needed) else "shown" if shown else "missing"
    return Parts(len(was) - len(broken) + len(woke), broken, shown, left, own, lost, others, proof)


def _without_ids(base: Run, old: Run, about: About, *, final: bool, proof_needed: bool) -> Parts:
    """The parts from exit codes and the failing ids the output names."""
    before, _ = base.failing()
    kept = old.verdict.tests_passed or 0
    needed: Proof = "not needed" if not (final and proof_needed) else "not reported"
    if old.verdict.passed:
        shown = tuple(sorted(before))
        return Parts(kept, shown=shown, proof="shown" if shown and needed != "not needed" else needed, ids=False)
    now, complete = old.failing()
    if not complete:
        return Parts(kept, unnamed=True, proof=needed, ids=False)
    broken = tuple(sorted(now - before))
    left = tuple(sorted(about.tests & now)) if final else ()
    others = tuple(sorted((now & before) - about.tests))
    shown = tuple(sorted(before - now))
    proof: Proof = "shown" if shown and needed != "not needed" else needed
    return Parts(kept, broken, shown, left, others=others, proof=proof, ids=False)


def state(outcomes: Mapping[str, str], test_id: str) -> str | None:
    """A test's outcome in a run; a file whose collection failed at the base (its id has no
    `::`) passes when its tests ran and every one passed (a skip is no pass), and fails
    when any of them failed."""
    if test_id in outcomes or "::" in test_id:
        return outcomes.get(test_id)
    mine = [o for t, o in outcomes.items() if t.startswith(f"{test_id}::")]
    if not mine:
        return None
    return FAILED if FAILED in mine else PASSED if all(o == PASSED for o in mine) else SKIPPED


def _file(test_id: str) -> str:
    return test_id.split("::", 1)[0]


def _inside(outcomes: Mapping[str, str], test_id: str) -> str:
    """A file's id as its first failing test, where its tests ran (a file that could not be
    collected at the base): the retry is told which test still fails."""
    if "::" in test_id:
        return test_id
    return next((t for t, o in sorted(outcomes.items()) if t.startswith(f"{test_id}::") and o != PASSED), test_id)


def few(tests: Sequence[str], shown: int = 3) -> str:
    """`a, b and c` or `a, b, c and 4 more`."""
    tests = list(tests)
    if len(tests) <= shown:
        return english_list(tests)
    return ", ".join(tests[:shown]) + f" and {len(tests) - shown} more"
