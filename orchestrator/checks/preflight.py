"""Preflight: verify the untouched tree once, before any model call, and judge attempts by it.

The baseline answers two questions the golden loop cannot answer afterwards:

- Can the checks run at all? A missing program, third-party module or a rejected
  command line is an `environment_error`: no edit will fix it, so the task should stop
  before a model is paid to try. So is a command that runs past the time limit on the
  untouched tree: every attempt would be killed by the same limit and blamed for a hang
  it did not cause.
- Which tests already fail? The first prompt names them, and `split_failures` tells
  what an attempt broke from what was broken before it started, so that a retry and a
  reflection are pointed at the right thing.

Unlike `verify`, which stops at the first failing step, preflight runs every command
(typecheck commands first, then test commands), so the baseline's list of failing tests
covers every test command even when a typecheck or an earlier test command fails.

A test failing before the task is still the task's to fix: a baseline explains a
failure, it never excuses one. Only the user waives a failing test (`checks.knownFailures`,
see `waivers.py`), and even then only when the attempt's list of failing tests is provably
complete (see `known_failures`): crashes, timeouts, typecheck failures, collection errors
and lists the runner's counts do not match never get an attempt waved through.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.checks.envcheck import environment_error, mentions
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import CommandResult, Verdict, verify
from orchestrator.checks.waivers import Waivers
from reflection.digest import normalise
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
    # How each failing test failed, to tell "still broken" from "broken another way":
    messages: dict[str, str] = {}  # test id -> its normalised one-line message (pytest)
    signatures: dict[str, str] = {}  # test command -> the digest signature of its failure

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
    baseline = _baseline(verdicts, cwd, task_text, time.monotonic() - started, checks.timeout_s)
    log.info(
        "baseline of %s: %s; %d failing test(s)%s%s",
        cwd,
        baseline.verdict.summary(),
        len(baseline.failing_tests),
        "" if baseline.complete else " (list incomplete)",
        f"; environment: {baseline.environment_error}" if baseline.environment_error else "",
    )
    return baseline


def _baseline(
    verdicts: list[Verdict], cwd: Path, task_text: str, duration_s: float, timeout_s: float
) -> Baseline:
    failing_tests: set[str] = set()
    messages: dict[str, str] = {}
    signatures: dict[str, str] = {}
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
            messages |= failure_messages(step.output)
            if single.digest:
                signatures[step.command] = single.digest.signature
    return Baseline(
        verdict=_combine(verdicts, duration_s),
        environment_error=environment,
        failing_tests=frozenset(failing_tests),
        complete=complete,
        typecheck_failing=any(not v.passed and v.steps[-1].kind == "typecheck" for v in verdicts),
        duration_s=duration_s,
        messages=messages,
        signatures=signatures,
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


# pytest's short summary: `FAILED tests/test_x.py::test_y[1] - assert 6 == 5`
_PYTEST_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+::\S+)(?: - (.*))?$", re.M)


def failure_messages(output: str) -> dict[str, str]:
    """Each failing test's one-line message where the runner prints one (pytest)."""
    return {m[1]: normalise(m[2] or "") for m in _PYTEST_SUMMARY.finditer(output)}


def fails_as_before(test_id: str, verdict: Verdict, messages: dict[str, str], baseline: Baseline) -> bool:
    """The attempt left this baseline failure as it was, rather than breaking it anew.

    With a message per test (pytest), the messages must match; otherwise the whole
    failing step must have the baseline's signature (same tests, same first error).
    `messages` are the attempt's, from `failure_messages`.
    """
    before, after = baseline.messages.get(test_id), messages.get(test_id)
    if before is not None and after is not None:
        return before == after
    if verdict.digest is None or not verdict.steps:
        return False
    return baseline.signatures.get(verdict.steps[-1].command) == verdict.digest.signature


def _combine(verdicts: list[Verdict], duration_s: float) -> Verdict:
    """One verdict over all steps; the first failing step gives its type and digest."""
    first_failure = next((v for v in verdicts if not v.passed), None)
    return Verdict(
        passed=first_failure is None,
        failure_type=first_failure.failure_type if first_failure else None,
        digest=first_failure.digest if first_failure else None,
        steps=[step for v in verdicts for step in v.steps],
        tests_passed=_sum(v.tests_passed for v in verdicts),
        tests_failed=_sum(v.tests_failed for v in verdicts),
        duration_s=duration_s,
    )


def _sum(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


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


def waived_failures(
    verdict: Verdict, baseline: Baseline | None, waivers: Waivers, checks: CheckSettings, task_text: str
) -> list[str]:
    """The failing tests, when every one of them is a known failure the user waived; else [].

    Only then may a failed verdict count as passing, and only when nothing went unseen:
    the list of failing tests is complete (see `known_failures`) and every configured
    check ran, so no later command was skipped by the failing one.
    """
    if verdict.passed or not waivers:
        return []
    _, complete = known_failures(verdict)
    covered = [(s.kind, s.command) for s in verdict.steps] == checks.steps
    split = split_failures(verdict, baseline, task_text, waivers)
    if not (complete and covered) or split.caused or split.before:
        return []
    return split.waived


class FailureSplit(BaseModel):
    """An attempt's failing tests by who caused them, each group in the runner's order."""

    caused: list[str]  # not failing at baseline, or failing another way now: the attempt's
    before: list[str]  # failing the same way at baseline and not waived: still the task's to fix
    waived: list[str]  # known failures the user waived (checks.knownFailures)

    @property
    def ordered(self) -> list[str]:
        """What the attempt broke first, what was failing before next, the waived ones last."""
        return [*self.caused, *self.before, *self.waived]


def split_failures(verdict: Verdict, baseline: Baseline | None, task_text: str, waivers: Waivers) -> FailureSplit:
    """Which of an attempt's failing tests it caused, which were failing before it, and
    which the user waived. Tests failing before that the task names come first among
    those, so that a retry starts with what the task is about.

    A waived test that passed at baseline was broken by the attempt: it counts as caused.
    A waived test the task names (by id or function) is the task's to fix: not waived for it.
    """
    digest = verdict.digest
    tests = list(digest.failing_tests) if digest and not verdict.passed else []
    messages = failure_messages(verdict.steps[-1].output) if verdict.steps else {}

    def failed_before(test: str) -> bool:
        return baseline is not None and test in baseline.failing_tests

    def as_before(test: str) -> bool:
        return failed_before(test) and fails_as_before(test, verdict, messages, baseline)  # type: ignore[arg-type]

    waived = [t for t in tests if waivers.entry_for(t) and (baseline is None or failed_before(t))
              and not names_test(t, task_text)]
    before = [t for t in tests if t not in waived and as_before(t)]
    before.sort(key=lambda t: not about_task(t, task_text))  # stable: the runner's order otherwise
    return FailureSplit(caused=[t for t in tests if t not in waived and t not in before], before=before,
                        waived=waived)


# "make the tests pass", "fix the failing tests": a task about every failing test.
_ABOUT_ALL_TESTS = re.compile(
    r"\b(?:failing|broken|red)\s+tests?\b|\btests?\s+(?:to\s+)?(?:pass|green)\b|\bmake\s+(?:the\s+)?tests?\s+pass",
    re.I,
)


def about_task(test_id: str, task_text: str) -> bool:
    """The task is about this test: it names the test, its function, its file, the module
    the file tests (`calc` for `test_calc.py`), or asks for the failing tests to pass."""
    if _ABOUT_ALL_TESTS.search(task_text):
        return True
    if _names_tests_of_its_file(test_id, task_text):  # then only the tests it names are its own
        function = re.sub(r"\[.*\]$", "", test_id.split("::")[-1])
        return any(mentions(task_text, name) for name in (test_id, function, _tested_name(function)))
    return any(mentions(task_text, name) for name in _test_names(test_id))


def names_test(test_id: str, task_text: str) -> bool:
    """The task names this very test: its id or its function (`test_other`, `TestParse`)."""
    function = test_id.split("::")[-1] if "::" in test_id else test_id.split("/")[0]  # pytest, cargo; go
    return mentions(task_text, test_id) or mentions(task_text, re.sub(r"\[.*\]$", "", function))


def _names_tests_of_its_file(test_id: str, task_text: str) -> bool:
    """The task names single tests of this test's file (`tests/test_more.py::test_sub`)."""
    if "::" not in test_id:
        return False
    path = test_id.split("::")[0]
    return f"{path}::" in task_text or f"{path.rsplit('/', 1)[-1]}::" in task_text


def _tested_module(stem: str) -> str:
    """The module a test file is named after: calc for test_calc, calc_test, calc.test."""
    for affix in ("test_", "tests_"):
        if stem.startswith(affix):
            return stem[len(affix) :]
    for affix in ("_test", "_tests", ".test", ".spec"):
        if stem.endswith(affix):
            return stem[: -len(affix)]
    return ""


def _tested_name(function: str) -> str:
    """What a test function is named after: add for test_add, Add for TestAdd."""
    return re.sub(r"^(?:test_|Test)(?=\w)", "", function)


def _test_names(test_id: str) -> set[str]:
    names = {test_id}
    if "::" in test_id:  # pytest (path::Class::name[param]) and cargo (module::tests::name)
        parts = test_id.split("::")
        path = parts[0]
        function = re.sub(r"\[.*\]$", "", parts[-1])
        names |= {path, path.rsplit("/", 1)[-1], function, _tested_name(function)}
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        names.add(stem)  # test_calc for test_calc.py
        names.add(_tested_module(stem))  # calc for test_calc.py
    elif "/" in test_id and " " not in test_id:  # go: TestName/subtest
        function = test_id.split("/", 1)[0]
        names |= {function, _tested_name(function)}
    elif re.fullmatch(r"Test\w+", test_id):  # go: TestName
        names.add(_tested_name(test_id))
    return {name for name in names if name}
