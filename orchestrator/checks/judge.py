"""Judge an attempt: is the verdict the attempt's fault, and what should a retry get?

The raw verdict of the checks is not the whole story. An attempt that edits the tests
did not fix anything; a failure that was already there before the task, or that does
not come back on a rerun, is not the attempt's; a missing tool cannot be fixed by any
edit; a timeout needs the time limit named. Every such decision is
switched by `retry` in project.json and explained in one line for the run log.

A failure is aimed at what the attempt broke: with a baseline, the failing tests the
attempt caused lead the summary, the retry's text and what a reflection is told, and the
tests that were failing the same way before the task come next (they are still the
task's to fix), and the known failures the user waived come last, marked as such.

Only the user waives a failing test (`checks.knownFailures`, see `waivers.py`): an attempt
passes when the checks pass, or when every test still failing is one the user waived.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.checks.envcheck import environment_error
from orchestrator.checks.flaky import is_flaky, rerun_failing
from orchestrator.checks.integrity import DEFAULT_TEST_GLOBS, check_integrity, has_marker, is_test_path
from orchestrator.checks.preflight import (
    Baseline,
    FailureSplit,
    about_task,
    known_failures,
    split_failures,
    waived_failures,
)
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.tests_run import fewer_tests_ran
from orchestrator.checks.verify import Verdict, verify
from orchestrator.checks.waivers import Waivers, waive_command
from orchestrator.config import RetryConfig
from reflection.digest import error_of_test
from reflection.schema import FailureType
from reflection.text import clip_middle, english_list

JudgedOutcome = Literal[
    "passed", "flaky", "waived", "failed", "integrity", "environment", "timeout", "no_change"
]
PASSING_OUTCOMES = ("passed", "flaky", "waived")


@dataclass(frozen=True)
class Judgement:
    outcome: JudgedOutcome
    summary: str  # one line for people and the run log
    failure: str = ""  # what the retry prompt says went wrong
    escalate: bool = False  # no retry can help
    # What a reflection is told about a failed attempt, aimed at what it broke:
    failing_tests: tuple[str, ...] = ()  # the failures the attempt caused first, waived ones last
    first_error: str | None = None  # "path:line: Kind: message" of the first failure it caused
    waived: tuple[str, ...] = ()  # known failures the user waived: not the attempt's to fix
    # Set when the only tests failing are ones that failed the same way before the task:
    # the attempt fixed none of them, and the user may mean to waive them.
    only_before: tuple[str, ...] = ()
    # False when the attempt was refused for what it did besides its code (the config, git's
    # history): the same code sent again without that is no repeat of a failure.
    tree_judged: bool = True

    @property
    def passed(self) -> bool:
        return self.outcome in PASSING_OUTCOMES


class Judge:
    def __init__(
        self,
        cwd: Path,
        checks: CheckSettings,
        retry: RetryConfig,
        *,
        baseline: Baseline | None,
        task_text: str,
        about_tests: bool,
        waivers: Waivers | None = None,
    ) -> None:
        self.cwd = cwd
        self.checks = checks
        self.retry = retry
        self.baseline = baseline
        self.task_text = task_text
        self.about_tests = about_tests
        self.waivers = waivers or Waivers()

    async def judge(self, verdict: Verdict, changed: list[str], diff: str) -> Judgement:
        broken = self._integrity(changed, diff)
        if broken:
            return Judgement("integrity", broken, failure=broken)
        if verdict.passed:
            vanished = self._vanished(verdict)
            if vanished:
                return Judgement("integrity", vanished, failure=vanished)
            return Judgement("passed", verdict.summary())
        environment = self._environment(verdict)
        if environment:
            return Judgement("environment", environment, failure=environment, escalate=True)
        waived = waived_failures(verdict, self.baseline, self.waivers, self.checks, self.task_text)
        if waived:
            return Judgement("waived", waived_summary(waived), waived=tuple(waived))
        flaky = await self._flaky(verdict)
        if flaky:
            return Judgement("flaky", flaky)
        failure = verdict.digest.text if verdict.digest else verdict.summary()
        if verdict.failure_type == FailureType.TIMEOUT and self.retry.route_by_failure:
            return Judgement("timeout", verdict.summary(), failure=self._timeout_text(verdict, failure))
        aim = self.aim(verdict)
        return Judgement(
            "failed",
            aim.summary,
            failure=aim.lead + failure,
            failing_tests=aim.failing_tests,
            first_error=aim.first_error,
            waived=aim.waived,
            only_before=aim.only_before,
        )

    def aim(self, verdict: Verdict) -> Aim:
        """A failed verdict told from the attempt's side: its own failures first."""
        digest = verdict.digest
        tests = tuple(digest.failing_tests) if digest else ()
        first_error = digest.first_error if digest else None
        if verdict.failure_type == FailureType.TIMEOUT:  # the hang, not an earlier error, is the news
            return Aim(verdict.summary(), "", tests, first_error, ())
        split = self._split(verdict)
        if split is None:
            return Aim(_with_error(verdict.summary(), tests, first_error), "", tests, first_error, ())
        ordered = tuple(split.ordered)
        if digest is not None and ordered[0] != tests[0]:  # the digest's first error is another test's
            step = verdict.steps[-1]
            own = split.caused or split.before
            first_error = error_of_test(step.output, own[0], command=step.command) if own else first_error
            digest = digest.model_copy(update={"failing_tests": list(ordered)})
            verdict = verdict.model_copy(update={"digest": digest})  # its summary names ordered[0]
        aimed = verdict.summary()
        note = "".join(f"; {phrase}" for phrase in _split_phrases(split))
        complete = not split.caused and self._all_known(verdict)
        return Aim(
            summary=_with_error(aimed, ordered, first_error) + note,
            lead=_lead(split, first_error),
            failing_tests=ordered,
            first_error=first_error,
            waived=tuple(split.waived),
            only_before=tuple(split.before) if complete else (),
        )

    def _split(self, verdict: Verdict) -> FailureSplit | None:
        """The attempt's failing tests by cause; None when there is nothing to tell apart."""
        if verdict.passed or verdict.digest is None or (self.baseline is None and not self.waivers):
            return None
        split = split_failures(verdict, self.baseline, self.task_text, self.waivers)
        return split if split.before or split.waived else None

    def _all_known(self, verdict: Verdict) -> bool:
        """Every failing test is named and every check ran: nothing else may be wrong."""
        covered = [(s.kind, s.command) for s in verdict.steps] == self.checks.steps
        return covered and known_failures(verdict)[1]

    def touches_tests(self, changed: list[str]) -> bool:
        """Whether the integrity check will want the attempt's diff: a test file changed, or
        a changed file of any kind may hold a skip marker (markers are looked for everywhere)."""
        if not self.retry.test_integrity or self.about_tests:
            return False
        globs = self.retry.test_globs or DEFAULT_TEST_GLOBS
        return any(is_test_path(path, globs) or _may_hold_marker(self.cwd / path) for path in changed)

    def _integrity(self, changed: list[str], diff: str) -> str | None:
        if not self.retry.test_integrity:
            return None
        globs = self.retry.test_globs or DEFAULT_TEST_GLOBS
        result = check_integrity(changed, (), diff, globs=globs, about_tests=self.about_tests)
        return f"rejected: {result.reason}" if result else None

    def _vanished(self, verdict: Verdict) -> str | None:
        """Why a passing verdict ran fewer tests than the preflight (see `tests_run`)."""
        if not self.retry.test_integrity or self.about_tests or self.baseline is None:
            return None
        return fewer_tests_ran(self.baseline.verdict, verdict)

    def _environment(self, verdict: Verdict) -> str | None:
        if not self.retry.route_by_failure or not verdict.steps:
            return None
        if verdict.failure_type not in (FailureType.RUNTIME_ERROR, FailureType.TYPECHECK_FAILURE):
            return None
        return environment_error(verdict.steps[-1], root=self.cwd, task_text=self.task_text)

    async def _flaky(self, verdict: Verdict) -> str | None:
        if verdict.failure_type != FailureType.TEST_FAILURE:
            return None
        failing = verdict.digest.failing_tests if verdict.digest else []
        if self.baseline and any(t in self.baseline.failing_tests for t in failing):
            return None  # it failed before the change too: no sign of chance, a pass must be earned
        for _ in range(self.retry.flaky_reruns):
            rerun = await rerun_failing(self.cwd, verdict, self.checks)
            if not is_flaky(verdict, rerun):
                continue
            if rerun.steps and rerun.steps[-1].command != self.checks.last_command:
                rerun = await verify(self.cwd, self.checks)  # the commands after the flaky one never ran
                if not rerun.passed:
                    return None
            return f"flaky: {verdict.summary()} failed, then passed on a rerun"
        return None

    def _timeout_text(self, verdict: Verdict, digest: str) -> str:
        step = verdict.steps[-1] if verdict.steps else None
        if step is None:
            return digest
        return (
            f"`{step.command}` was killed after the {self.checks.timeout_s:g} s "
            f"limit. Something the attempt changed makes it hang or run far slower (an "
            f"endless loop, a blocking call, a much slower algorithm); find and remove that.\n"
            f"{digest}"
        )


@dataclass(frozen=True)
class Aim:
    """A failed verdict told from the attempt's side (see `Judge.aim`)."""

    summary: str  # the verdict's line, naming the attempt's first failure and its error
    lead: str  # the lines put before the digest in the retry's text; "" when nothing to mark
    failing_tests: tuple[str, ...]
    first_error: str | None
    waived: tuple[str, ...]
    only_before: tuple[str, ...] = ()


LISTED = 10  # test ids named in one line of the retry's text
ERROR_CHARS = 200  # of the error added to a summary


def _ids(tests: list[str]) -> str:
    more = f" and {len(tests) - LISTED} more" if len(tests) > LISTED else ""
    return ", ".join(tests[:LISTED]) + more


def _few(tests: list[str] | tuple[str, ...]) -> str:
    return english_list(list(tests[:3])) + (f" and {len(tests) - 3} more" if len(tests) > 3 else "")


def _split_phrases(split: FailureSplit) -> list[str]:
    phrases = []
    if split.before and not split.caused:  # the headline names them: every failure is an old one
        phrases.append("each failed before the task too, and the task must make it pass")
    elif split.before:
        phrases.append(f"{len(split.before)} failed before the task too, and the task must make them pass: "
                       f"{_few(split.before)}")
    if split.waived:
        phrases.append(f"{len(split.waived)} waived as known: {_few(split.waived)}")
    return phrases


def waived_summary(waived: list[str]) -> str:
    """The verdict of an attempt that passed apart from the failures the user waived."""
    return f"passed apart from {len(waived)} known failure(s) waived in checks.knownFailures: {_few(waived)}"


def still_failing_sentence(task_id: str, tests: tuple[str, ...], waivers: Waivers, task_text: str) -> str:
    """Why a task whose only failures were there before it is blocked, and what the user can do.

    Waiving is offered only for tests the task does not seem to be about: a bug task's own
    failing tests must be fixed, and a waiver for them would close it unfixed.
    """
    unwaived = tuple(t for t in tests if waivers.entry_for(t) is None)
    if not unwaived:  # waived, but the task names them: it is about them
        return (f"{len(tests)} test(s) the task names still fail as before the task: {_few(tests)}; they are "
                f"waived in checks.knownFailures, but not for a task about them: `goldenloop reopen {task_id}` "
                "tries again")
    sentence = (f"{len(tests)} test(s) that failed before the task still fail, so it is not done: {_few(tests)}; "
                f"`goldenloop reopen {task_id}` tries again")
    strangers = tuple(t for t in unwaived if not about_task(t, task_text))
    if strangers:
        sentence += (f"; only if {'they fail' if strangers == unwaived else _few(strangers) + ' fail'} for a reason "
                     f"this task need not fix, waive them first with `{waive_command(strangers)}` and run "
                     f"`goldenloop reopen {task_id} --forget`")
    return sentence


def _with_error(line: str, tests: tuple[str, ...], first_error: str | None) -> str:
    """`… — test_id (Kind: message)`: the summary says how the named test failed."""
    if not tests or not first_error:
        return line
    error = re.sub(r"^[^\s:]+\.\w+(?::\d+)?: ", "", first_error)  # its place is in the digest
    return f"{line} ({clip_middle(error, ERROR_CHARS)})"


def _lead(split: FailureSplit, first_error: str | None) -> str:
    """What the retry is told before the digest: which failures are the attempt's."""
    lines = []
    if split.caused:
        lines.append(f"New failures, caused by this attempt (fix these first): {_ids(split.caused)}")
        if first_error:
            lines.append(f"  {first_error}")
    if split.before:
        lines.append(
            "Failing before the task too, and still failing: the task is done only when they pass "
            f"(make them pass): {_ids(split.before)}"
        )
    if split.waived:
        lines.append(
            "Known failures the user waived (checks.knownFailures): they do not block the task; "
            f"leave them alone: {_ids(split.waived)}"
        )
    lines.append("The digest below lists every failure in the order the tests ran.")
    return "\n".join(lines) + "\n\n"


MARKER_SCAN_BYTES = 2_000_000  # a larger changed file is not read: its diff is made instead


def _may_hold_marker(path: Path) -> bool:
    try:
        if path.stat().st_size > MARKER_SCAN_BYTES:
            return True
        return has_marker(path.read_bytes().decode("utf-8", "replace"))
    except OSError:  # deleted: a deletion adds no marker
        return False
