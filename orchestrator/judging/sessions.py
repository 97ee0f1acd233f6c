"""One run of the checks on one tree, in the judge's tree: its verdict, and each test's
outcome by id where the runner reports them (judging/outcomes.py).

Every configured command runs, typecheck commands first: a failing test command does not
stop the next one, since a test failing before the task may be another task's and the
judge still needs every command's tests. A failing typecheck stops the run (the code does
not check, so its tests say nothing), except for the base's run, which describes
everything. `checks.setup` runs first, after each checkout.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import anyio

from orchestrator.checks.preflight import known_failures
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import CommandResult, Verdict, combine, run_command, verify
from orchestrator.git.repo import RepoError
from orchestrator.judging.export import JudgeTree
from orchestrator.judging.outcomes import FAILED, PASSED, asking_for_report, read_report, refused_report
from orchestrator.judging.selection import Selection, read_again, selecting
from reflection.redact import redact


@dataclass(frozen=True)
class Run:
    """The checks on one tree."""

    tree: str
    verdict: Verdict  # every step that ran; the first failing one's type and digest
    outcomes: Mapping[str, str] = field(default_factory=dict)  # test id -> passed | failed | skipped
    reported: bool = False  # every test command reported each of its tests
    singles: tuple[Verdict, ...] = ()  # each command's own verdict, in order
    setup_failed: CommandResult | None = None  # a `checks.setup` command that failed: nothing else ran
    unexported: str | None = None  # why the tree could not be written out (a corrupt object): nothing ran
    again: Mapping[str, str] = field(default_factory=dict)  # failed tests run once more alone, in the session

    @property
    def passing(self) -> frozenset[str]:
        return frozenset(t for t, o in self.outcomes.items() if o == PASSED)

    def failing(self) -> tuple[frozenset[str], bool]:
        """The failing tests, and whether that list is complete (every one named)."""
        if self.reported:
            return frozenset(t for t, o in self.outcomes.items() if o == FAILED), True
        found: set[str] = set()
        complete = True
        for single in self.singles:
            if single.passed:
                continue
            tests, listed_all = known_failures(single)
            found |= tests
            complete = complete and listed_all and single.steps[-1].kind == "test"
        return frozenset(found), complete


async def run_checks(judge: JudgeTree, tree: str, checks: CheckSettings, setup: Sequence[str] = (),
                     *, every_step: bool = False, select: Selection | None = None) -> Run:
    """Check `tree` out in the judge's tree and run the checks there; `select`: pytest's tests
    by id: `only` those, or `all` (judging/selection.py)."""
    started = time.monotonic()
    try:
        await anyio.to_thread.run_sync(judge.check_out, tree)
    except RepoError as exc:
        return Run(tree, Verdict(passed=False, steps=[]), unexported=str(exc))
    env = judge.environment()
    tests_env = selecting(env, judge.home, select) if select is not None else env
    for command in setup:
        step = await run_command(command, judge.path, timeout_s=checks.timeout_s, env=env,
                                 output_cap_bytes=checks.output_cap_bytes)
        if not step.ok:
            step = step.model_copy(update={"output": redact(step.output)})
            return Run(tree, Verdict(passed=False, steps=[step]), setup_failed=step)
    singles: list[Verdict] = []
    outcomes: dict[str, str] = {}
    reported = True
    for number, (kind, command) in enumerate(checks.steps):
        report = judge.home / f"report-{number}.xml"
        report.unlink(missing_ok=True)
        single = await verify(judge.path, checks.only(kind, command),
                              env=asking_for_report(tests_env, report) if kind == "test" else env)
        if kind == "test" and refused_report(single):  # a runner that cannot write it: as the user runs it
            single = await verify(judge.path, checks.only(kind, command), env=tests_env)
        singles.append(single)
        if kind == "test":
            found = read_report(report, single.steps[-1].output) if single.steps else None
            reported = reported and found is not None
            outcomes.update(_merged(outcomes, found or {}))
        elif not single.passed and not every_step:
            break
    ran_tests = any(s.steps and s.steps[-1].kind == "test" for s in singles)
    again = read_again(judge.home) if select is not None and select.again else {}
    return Run(tree, combine(singles, time.monotonic() - started), outcomes, reported and ran_tests, tuple(singles),
               again=again)


def _merged(known: Mapping[str, str], found: Mapping[str, str]) -> dict[str, str]:
    """A test two commands ran fails when either run failed it."""
    return {t: FAILED if known.get(t) == FAILED else o for t, o in found.items()}
