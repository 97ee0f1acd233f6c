"""Preflight: the checks on a tree as it is, before any model call, described.

The baseline answers two questions the golden loop cannot answer afterwards:

- Can the checks run at all? A missing program, third-party module or a rejected
  command line is an `environment_error`: no edit will fix it, so the task should stop
  before a model is paid to try. So is a command that runs past the time limit on the
  untouched tree: every attempt would be killed by the same limit and blamed for a hang
  it did not cause.
- Which tests already fail? The first prompt names them, and every verdict of the task
  compares with them (orchestrator/judging/: the loop's base run is made in the judge's
  tree and described here; `goldenloop checks baseline` runs on the checkout as it is).

Unlike `verify`, which stops at the first failing step, preflight runs every command
(typecheck commands first, then test commands), so the baseline's list of failing tests
covers every test command even when a typecheck or an earlier test command fails.
`known_failures` says when a failing run's list of failing tests is complete: crashes,
timeouts, typecheck failures, collection errors and lists the runner's counts do not
match are not.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.checks.envcheck import environment_error
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import CommandResult, Verdict, combine, verify
from reflection.schema import FailureType

log = logging.getLogger("goldenloop.preflight")

MAX_LISTED_TESTS = 500  # reflection.digest keeps at most this many failing test ids
PYTEST_TESTS_FAILED_EXIT = 1  # any other non-zero pytest exit means not all tests ran
_CLIPPED = " … "  # how reflection.digest marks an id it had to shorten


class Baseline(BaseModel):
    """The state of the checks on the untouched tree."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict  # every command's step, in order; digest of the first failing one
    environment_error: str | None = None  # one sentence: the checks cannot run at all
    failing_tests: frozenset[str] = frozenset()  # failing at baseline, from every test step
    complete: bool = True  # False: more tests may fail than `failing_tests` lists
    typecheck_failing: bool = False
    duration_s: float = 0.0
    # Run by the judge (orchestrator/judging/): the tree it ran on, each command's verdict,
    # and each test's outcome by id where every test command reported them.
    tree: str = ""
    singles: tuple[Verdict, ...] = ()
    outcomes: dict[str, str] = {}
    reported: bool = False
    recorded: bool = False  # taken from the run recorded for this tree, not run again

    @property
    def commands(self) -> list[tuple[str, str]]:
        """(kind, command) of every configured check, in the order they ran."""
        return [(step.kind, step.command) for step in self.verdict.steps]


async def preflight(
    cwd: Path,
    checks: CheckSettings,
    *,
    task_text: str = "",
) -> Baseline:
    """Run every check once on `cwd` as it is and describe the result.

    `task_text` (the task's title and description) keeps modules and scripts the task
    is meant to create from being reported as a broken environment.
    """
    started = time.monotonic()
    verdicts = [await verify(cwd, checks.only(kind, command)) for kind, command in checks.steps]
    baseline = describe(verdicts, cwd, task_text, time.monotonic() - started, checks.timeout_s)
    log.info(
        "baseline of %s: %s; %d failing test(s)%s%s",
        cwd,
        baseline.verdict.summary(),
        len(baseline.failing_tests),
        "" if baseline.complete else " (list incomplete)",
        f"; environment: {baseline.environment_error}" if baseline.environment_error else "",
    )
    return baseline


def describe(
    verdicts: list[Verdict], cwd: Path, task_text: str, duration_s: float, timeout_s: float
) -> Baseline:
    """The baseline of each command's verdict on the untouched tree in `cwd`."""
    failing_tests: set[str] = set()
    complete = True
    environment: str | None = None
    for single in verdicts:
        if single.passed:
            continue
        step = single.steps[-1]
        environment = (
            environment
            or environment_error(step, root=cwd, task_text=task_text)
            or baseline_timeout(step, timeout_s)
        )
        if step.kind == "test":
            tests, listed_all = known_failures(single)
            failing_tests |= tests
            complete = complete and listed_all
    return Baseline(
        verdict=combine(verdicts, duration_s),
        environment_error=environment,
        failing_tests=frozenset(failing_tests),
        complete=complete,
        typecheck_failing=any(not v.passed and v.steps[-1].kind == "typecheck" for v in verdicts),
        duration_s=duration_s,
    )


def baseline_timeout(step: CommandResult, timeout_s: float) -> str | None:
    """One sentence when a check ran past its time limit on the untouched tree.

    No edit caused that hang, so no attempt should be blamed for it (or retried against
    it): the suite hangs or is too slow for `timeouts.verifySeconds` as it is.
    """
    if not step.timed_out:
        return None
    return (
        f"The {step.kind} command `{step.command}` timed out after {timeout_s:g} s "
        f"(timeouts.verifySeconds) on the untouched tree, before any change: it hangs or "
        f"runs longer than the limit; fix the hang or raise timeouts.verifySeconds."
    )


def known_failures(verdict: Verdict) -> tuple[frozenset[str], bool]:
    """The failing tests of a verdict's failing step, and whether that list is complete.

    Complete means every failing test is named by a usable id: the step is a test run
    that finished (no timeout, crash or typecheck failure), the runner's failed count
    equals the number of ids, no id was shortened, the digest's cap was not reached,
    and pytest exited with "tests failed" (any other code means not all tests ran,
    e.g. a collection error, whose "test id" is a file).
    """
    if verdict.passed:
        return frozenset(), True
    digest = verdict.digest
    tests = frozenset(digest.failing_tests) if digest else frozenset()
    if digest is None or verdict.failure_type != FailureType.TEST_FAILURE or not verdict.steps:
        return tests, False
    step = verdict.steps[-1]
    complete = (
        step.kind == "test"
        and bool(tests)
        and digest.failed == len(tests)
        and len(digest.failing_tests) < MAX_LISTED_TESTS
        and not any(_CLIPPED in test for test in tests)
    )
    if digest.tool == "pytest":
        complete = complete and step.exit_code == PYTEST_TESTS_FAILED_EXIT
        complete = complete and all("::" in test for test in tests)
    return tests, complete
