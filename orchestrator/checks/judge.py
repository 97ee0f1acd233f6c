"""Judge an attempt: is the verdict the attempt's fault, and what should a retry get?

The raw verdict of the checks is not the whole story. An attempt that edits the tests
did not fix anything; a failure that was already there before the task, or that does
not come back on a rerun, is not the attempt's; a missing tool cannot be fixed by any
edit; a timeout needs the time limit named, not a reflection. Every such decision is
switched by `retry` in project.json and explained in one line for the run log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.checks.envcheck import environment_error
from orchestrator.checks.flaky import is_flaky, rerun_failing
from orchestrator.checks.integrity import DEFAULT_TEST_GLOBS, check_integrity, has_marker, is_test_path
from orchestrator.checks.preflight import Baseline, relevant_failures
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import Verdict, verify
from orchestrator.config import RetryConfig
from reflection.schema import FailureType

JudgedOutcome = Literal["passed", "flaky", "preexisting", "failed", "integrity", "environment", "timeout"]


@dataclass(frozen=True)
class Judgement:
    outcome: JudgedOutcome
    summary: str  # one line for people and the run log
    failure: str = ""  # what the retry prompt says went wrong
    reflect: bool = False  # worth a reflection (a model call)
    escalate: bool = False  # no retry can help

    @property
    def passed(self) -> bool:
        return self.outcome in ("passed", "flaky", "preexisting")


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
    ) -> None:
        self.cwd = cwd
        self.checks = checks
        self.retry = retry
        self.baseline = baseline
        self.task_text = task_text
        self.about_tests = about_tests

    async def judge(self, verdict: Verdict, changed: list[str], diff: str) -> Judgement:
        broken = self._integrity(changed, diff)
        if broken:
            return Judgement("integrity", broken, failure=broken)
        if verdict.passed:
            return Judgement("passed", verdict.summary())
        environment = self._environment(verdict)
        if environment:
            return Judgement("environment", environment, failure=environment, escalate=True)
        waived = self._preexisting(verdict)
        if waived:
            return Judgement("preexisting", waived)
        flaky = await self._flaky(verdict)
        if flaky:
            return Judgement("flaky", flaky)
        failure = verdict.digest.text if verdict.digest else verdict.summary()
        if verdict.failure_type == FailureType.TIMEOUT and self.retry.route_by_failure:
            return Judgement("timeout", verdict.summary(), failure=self._timeout_text(verdict, failure))
        return Judgement("failed", verdict.summary(), failure=failure, reflect=True)

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

    def _environment(self, verdict: Verdict) -> str | None:
        if not self.retry.route_by_failure or not verdict.steps:
            return None
        if verdict.failure_type not in (FailureType.RUNTIME_ERROR, FailureType.TYPECHECK_FAILURE):
            return None
        return environment_error(verdict.steps[-1], root=self.cwd, task_text=self.task_text)

    def _preexisting(self, verdict: Verdict) -> str | None:
        if not (self.retry.ignore_preexisting_failures and self.baseline):
            return None
        relevant = relevant_failures(verdict, self.baseline, self.task_text)
        if not relevant.decisive:
            return None
        return f"passed apart from {len(relevant.ignored)} pre-existing failure(s) unrelated to the task"

    async def _flaky(self, verdict: Verdict) -> str | None:
        if verdict.failure_type != FailureType.TEST_FAILURE:
            return None
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


MARKER_SCAN_BYTES = 2_000_000  # a larger changed file is not read: its diff is made instead


def _may_hold_marker(path: Path) -> bool:
    try:
        if path.stat().st_size > MARKER_SCAN_BYTES:
            return True
        return has_marker(path.read_bytes().decode("utf-8", "replace"))
    except OSError:  # deleted: a deletion adds no marker
        return False
