"""Flaky checks: rerun a failing step once and see whether its failure comes back.

A test that fails and then passes on an unchanged tree says nothing about the attempt,
and a reflection written about it would teach the model a false lesson. So the loop can
rerun the failing step once before it blames the attempt.

The whole failing command is rerun, not just the failing test ids, because:

- it works for every runner (pytest, jest, go, cargo, a make target) without knowing
  how each one selects a single test or quotes a parametrized id;
- ids in a digest may be shortened, and a list may be partial (a crash, a cap);
- a failure that depends on test order or shared state reproduces only in the full
  run: rerunning one test alone would pass it and wrongly call it flaky.

The price is the time of one more run of that one command, which is small beside a
model call and another attempt.
"""

from __future__ import annotations

import logging
from pathlib import Path

from orchestrator.checks.preflight import known_failures
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import Verdict, verify

log = logging.getLogger("goldenloop.flaky")


async def rerun_failing(
    cwd: Path,
    verdict: Verdict,
    checks: CheckSettings,
) -> Verdict:
    """Run the verdict's failing step (its last one) again, on the tree as it is now.

    Returns the verdict with that step replaced by the rerun: earlier (passed) steps and
    their test counts are kept. Commands after the failing step never ran in `verdict`
    and are not run here either; when the rerun passes, the caller still has to run
    them. A passed verdict has nothing to rerun and is returned as it is.
    """
    if verdict.passed or not verdict.steps:
        return verdict
    failing = verdict.steps[-1]
    again = await verify(cwd, checks.only(failing.kind, failing.command))
    log.info("rerun of %r: %s (first: %s)", failing.command, again.summary(), verdict.summary())
    earlier_passed, earlier_failed = _earlier_counts(verdict)
    return Verdict(
        passed=again.passed,
        failure_type=again.failure_type,
        digest=again.digest,
        steps=[*verdict.steps[:-1], *again.steps],
        tests_passed=_add(earlier_passed, again.tests_passed),
        tests_failed=_add(earlier_failed, again.tests_failed),
        duration_s=verdict.duration_s + again.duration_s,
    )


def is_flaky(first: Verdict, rerun: Verdict) -> bool:
    """The first verdict's failure did not come back when its step was rerun.

    True when the rerun passed, or when both runs failed tests with complete lists and
    none of the first run's failing tests failed again. A rerun that crashed, timed
    out or failed without naming its tests is no evidence of flakiness: False.
    Flaky does not mean passing: a rerun with other failing tests still failed.
    """
    if first.passed or not _same_step(first, rerun):
        return False
    if rerun.passed:
        return True
    first_tests, first_complete = known_failures(first)
    rerun_tests, rerun_complete = known_failures(rerun)
    if not (first_complete and rerun_complete and first_tests):
        return False
    return first_tests.isdisjoint(rerun_tests)


def flaky_tests(first: Verdict, rerun: Verdict) -> list[str]:
    """Tests that failed in `first` and passed on the rerun, in `first`'s order.

    Empty when the rerun's list of failing tests is not complete: a test missing from a
    partial list may well have failed again.
    """
    if first.passed or first.digest is None or not _same_step(first, rerun):
        return []
    if rerun.passed:
        return list(first.digest.failing_tests)
    rerun_tests, rerun_complete = known_failures(rerun)
    if not rerun_complete:
        return []
    return [test for test in first.digest.failing_tests if test not in rerun_tests]


def _same_step(first: Verdict, rerun: Verdict) -> bool:
    if not first.steps or not rerun.steps:
        return False
    return first.steps[-1].command == rerun.steps[-1].command


def _earlier_counts(verdict: Verdict) -> tuple[int | None, int | None]:
    """The verdict's test counts without those of its failing step."""
    digest = verdict.digest
    if digest is None or verdict.steps[-1].kind == "typecheck":
        return verdict.tests_passed, verdict.tests_failed
    return _minus(verdict.tests_passed, digest.passed), _minus(verdict.tests_failed, digest.failed)


def _minus(total: int | None, part: int | None) -> int | None:
    if total is None or part is None:
        return total
    remaining = total - part
    return remaining if remaining > 0 else None  # None: no earlier step counted tests


def _add(total: int | None, value: int | None) -> int | None:
    if value is None:
        return total
    return value if total is None else total + value
