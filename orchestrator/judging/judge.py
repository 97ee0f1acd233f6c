"""The judge: an attempt's verdict, made where the agent never was, on exactly what would
be committed.

    candidate tree (what the commit would hold)
      -> its run in the judge's tree           (the commit's own tests; new tests' results)
      -> the old tests' run                    (the base's tests over its code; only when
                                                it changed a test or the runner's config)
      -> the new tests on the base's code      (only when a new test is the proof)
      -> the parts: pass-to-pass, fail-to-pass, the task's tests   (judging/verdict.py)

Nothing the attempt did to its tree but the commit reaches a run (judging/export.py), and
nothing it did to a test or the runner's configuration changes how an old test runs
(judging/trees.py). So the guards that inspected an attempt's test edits are gone: a
construction took their place.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio

from orchestrator.checks.envcheck import environment_error
from orchestrator.checks.preflight import Baseline, describe
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import Verdict
from orchestrator.checks.waivers import Waivers
from orchestrator.config import ProjectConfig, RetryConfig
from orchestrator.git.repo import Repo
from orchestrator.judging import words
from orchestrator.judging.about import About, about, needs_proof
from orchestrator.judging.export import JudgeTree
from orchestrator.judging.judgement import Judgement
from orchestrator.judging.missing import lacking, sentence
from orchestrator.judging.outcomes import FAILED, PASSED
from orchestrator.judging.recorded import BaselineRecords
from orchestrator.judging.selection import Selection
from orchestrator.judging.sessions import Run, run_checks
from orchestrator.judging.test_paths import DEFAULT_TEST_GLOBS, is_doctest, is_test_path
from orchestrator.judging.trees import SessionTrees
from orchestrator.judging.verdict import Parts, decide
from reflection.digest import error_of_test
from reflection.schema import FailureType

# A change of these only is no change of code: a docs or chore subtask needs pass-to-pass only.
_DOCS = re.compile(r"(?:^|/)(?:docs?|documentation)/|\.(?:md|rst|txt|adoc)$|(?:^|/)(?:LICENSE|AUTHORS|NOTICE)[^/]*$",
                   re.I)


@dataclass(frozen=True)
class Ground:
    """What every verdict of a task stands on: the repository the attempts work in (whose
    objects the judge's trees are made of), the judge's tree, the checks, and the user's
    checkout (where a file the checks need but the commit lacks is looked for)."""

    repo: Repo
    tree: JudgeTree
    checks: CheckSettings
    retry: RetryConfig
    setup: tuple[str, ...] = ()
    waivers: Waivers = field(default_factory=Waivers)
    checkout: Path | None = None  # None: the repository the attempts work in
    records: BaselineRecords | None = None  # whole runs recorded per tree (judging/recorded.py)

    @classmethod
    def of(cls, repo: Repo, tree: JudgeTree, config: ProjectConfig, checkout: Path | None = None,
           records: BaselineRecords | None = None) -> Ground:
        """The ground a project's config gives: its checks, retry rules, setup and waivers."""
        checks = config.checks_config
        return cls(repo, tree, config.checks, config.retry, tuple(checks.setup), Waivers.of(checks.known_failures),
                   checkout, records)

    @property
    def globs(self) -> tuple[str, ...]:
        return tuple(self.retry.test_globs or DEFAULT_TEST_GLOBS)

    async def run(self, tree: str, *, every_step: bool = False, tests_only: bool = False,
                  select: Selection | None = None) -> Run:
        """The checks on `tree` in the judge's tree; `tests_only`: no typecheck (it ran on this
        code in the run before); `select`: some of pytest's tests by id (judging/selection.py)."""
        checks = replace(self.checks, typecheck=()) if tests_only else self.checks
        run = await run_checks(self.tree, tree, checks, self.setup, every_step=every_step, select=select)
        if not tests_only and select is None:
            await self.record(tree, run)
        return run

    async def record(self, tree: str, run: Run) -> None:
        """A whole run of every check on `tree`, recorded: a later task's base may be this tree."""
        ran = {(single.steps[-1].kind, single.steps[-1].command) for single in run.singles if single.steps}
        if self.records is not None and ran >= set(self.checks.steps):  # none left out, none stopped early
            key = await anyio.to_thread.run_sync(self._key, tree)
            await anyio.to_thread.run_sync(self.records.write, key, run)

    async def base_run(self, tree: str) -> tuple[Run, bool]:
        """The checks on a base `tree`, every step: its recorded run when there is one to
        trust (True), else run now and recorded. One run per tree at a time: a parallel
        task on the same base waits for it and takes the record."""
        if self.records is None:
            return await self.run(tree, every_step=True), False
        key = await anyio.to_thread.run_sync(self._key, tree)
        async with self.records.held(key):
            run = await anyio.to_thread.run_sync(self.records.read, key, tree)
            if run is None:
                return await self.run(tree, every_step=True), False
        if not run.verdict.passed:  # what a failure names is looked for among the base's files
            await anyio.to_thread.run_sync(self.tree.check_out, tree)
        return run, True

    def _key(self, tree: str) -> dict[str, object]:
        assert self.records is not None
        return self.records.key(self.repo, tree, self.checks, self.setup, self.tree.provided)


@dataclass(frozen=True)
class Flaky:
    verdict: Verdict
    parts: Parts


@dataclass(frozen=True)
class Own:
    """The run of a candidate's own copies of the tests, and what it covers."""

    run: Run
    scope: frozenset[str] | None = None  # the test files it judges; None: every one
    drop: tuple[str, ...] | list[str] = ()  # the base's test files left out of it


async def judge_base(ground: Ground, tree: str, task_text: str) -> Baseline:
    """The checks on the task's base tree, every command run: what the verdicts compare with."""
    run, recorded = await ground.base_run(tree)
    if run.setup_failed is not None or run.unexported is not None:
        return Baseline(verdict=run.verdict, environment_error=run.unexported or _setup_failed(run), tree=tree)
    baseline = describe(list(run.singles), ground.tree.path, task_text, run.verdict.duration_s, ground.checks.timeout_s)
    if baseline.environment_error:  # a file the checkout has and the commit lacks, said so
        missing = lacking("\n".join(s.output for s in run.verdict.steps), ground.checkout or ground.repo.root,
                          ground.tree.path)
        if missing:
            baseline = baseline.model_copy(update={"environment_error": f"{baseline.environment_error.rstrip('.')}: "
                                                   f"{sentence(missing, for_attempt=False)}."})
    failing = frozenset(t for t, o in run.outcomes.items() if o == "failed") if run.reported else None
    return baseline.model_copy(update={
        "tree": tree, "singles": run.singles, "outcomes": dict(run.outcomes), "reported": run.reported,
        "recorded": recorded,
        **({"failing_tests": failing, "complete": True} if failing is not None else {})})


def as_run(baseline: Baseline) -> Run:
    return Run(baseline.tree, baseline.verdict, baseline.outcomes, baseline.reported, baseline.singles)


class Judge:
    """The verdicts of one subtask's attempts, against its task's base."""

    def __init__(self, ground: Ground, baseline: Baseline | None, *, base_tree: str, task_text: str,
                 task_type: str, final: bool) -> None:
        self.g, self.baseline = ground, baseline
        self.text, self.type, self.final = task_text, task_type, final
        self.trees = SessionTrees(ground.repo, base_tree, ground.globs, ground.checks.tests)
        self.pinned = False  # the base's runner files found (`SessionTrees.pin`), once the base has run
        self.failed_last: frozenset[str] = frozenset()  # the last attempt's failing tests: run first next time

    async def base(self) -> Baseline:
        """The base's run: the preflight's, else made now (retry.preflight off)."""
        if self.baseline is None:
            self.baseline = await judge_base(self.g, self.trees.base, self.text)
        return self.baseline

    def about(self, touched: list[str] = ()) -> About:  # type: ignore[assignment]
        """The failing tests at the base this task must make pass (judging/about.py)."""
        failing = self.baseline.failing_tests if self.baseline else frozenset()
        return about(self.text, self.type, failing, touched, self.g.waivers)

    async def judge(self, changed: list[str]) -> tuple[Verdict, Judgement]:
        """The verdict of the tree as `changed` left it, judged; `Judgement.tree` is the tree
        object judged, which is what a passing attempt commits."""
        tree = await anyio.to_thread.run_sync(self.g.repo.tree_with, changed)
        if not self.g.checks.any:
            return Verdict(passed=True, steps=[]), Judgement("passed", "passed: no checks configured", tree=tree)
        base = await self.base()
        if not self.pinned:
            files = [t.split("::", 1)[0] for t in base.outcomes if not is_doctest(t)]  # every file that held a test
            await anyio.to_thread.run_sync(self.trees.pin, files)
            self.pinned = True
        side = self.trees.test_side(tree) if self.g.retry.test_integrity else []
        old = await self._old(base, tree, side)  # the candidate's own run when side is empty
        if isinstance(old, tuple):  # the tests run first decided it
            return old
        early = self._early(old, tree, base) or self._leaving(tree)
        if early is not None:
            return old.verdict, early
        own = await self._own(base, tree, side, old)
        if own.run is not old and own.run.verdict.failure_type == FailureType.TIMEOUT:  # a new test that hangs
            return own.run.verdict, self._early(own.run, tree, base) or Judgement("timeout", own.run.verdict.summary())
        parts, topic = await self._parts(base, tree, old, own, side)
        if not parts.holds and self._may_be_flaky(parts):
            flaky = await self._again(base, tree, old, own, side, parts.broken)
            if flaky is not None:
                return flaky.verdict, Judgement(
                    "flaky", f"flaky: {words.few(parts.broken)} failed, then passed on "
                    f"{self.g.retry.flaky_reruns} rerun(s); "
                    f"{flaky.parts.line()}", parts=flaky.parts, tree=tree)
        return self._judged(parts, topic, old, own.run, tree)

    async def _old(self, base: Baseline, tree: str, side: list[str]) -> Run | tuple[Verdict, Judgement]:
        """The old tests' run. With `retry.failingFirst`, pytest's tests that failed before and
        those in the test files the attempt changed run first, in a session of their own;
        when one whose failure decides the verdict fails (a test the task is about, one that
        passed at the base) the rest does not run. Else the whole suite runs in its own order,
        in the judge's tree written again: what those few tests wrote there is gone, so the
        order decides only how soon a verdict is known (judging/selection.py)."""
        old_tree = self.trees.old_tests(tree, side)
        first = self._first(base, tree)
        if first:
            quick = await self.g.run(old_tree, tests_only=True, select=Selection("only", first))
            self.failed_last = quick.failing()[0]
            settled = await self._settled(base, tree, quick, first)
            if settled is not None:
                return settled
        by_id = self._by_id(base)
        passed = frozenset(t for t, o in base.outcomes.items()  # failing now: run again alone, as the session ends
                           if o == PASSED) if by_id and self.g.retry.flaky_reruns else frozenset()
        run = await self.g.run(old_tree, select=Selection("all", again=passed) if passed else None)
        self.failed_last = run.failing()[0]
        if passed:
            await self.g.record(old_tree, run)
        return run

    def _first(self, base: Baseline, tree: str) -> frozenset[str]:
        """The tests to run first: failing at the base or in the last attempt, and in the test
        files the attempt changed; none unless the failure of one of them would decide a
        verdict (the task's, in its last subtask, or one that passed at the base). None where
        pytest did not report the base's tests by id, or several test commands run (each
        would be told the same ids)."""
        if not self._by_id(base):
            return frozenset()
        touched = [p for p in self.trees.changed(tree) if is_test_path(p, self.g.globs)]
        first = frozenset(t for t, o in base.outcomes.items()
                          if o == FAILED or t in self.failed_last or t.split("::", 1)[0] in touched)
        if len(first) >= len(base.outcomes):
            return frozenset()
        ours = self.about(touched).tests if self.final else frozenset()
        deciding = any(base.outcomes[t] == PASSED or t in ours for t in first)
        return first if deciding else frozenset()  # none could decide: no run of their own

    def _by_id(self, base: Baseline) -> bool:
        """Whether tests may run by id: pytest reported the base's by id, for one test command.
        Not for retry.strategy "tree": it picks a starting tree by the attempts' scores, which
        only the whole suite gives (a test the failing ones first left unrun may be broken)."""
        retry = self.g.retry
        return retry.failing_first and retry.strategy != "tree" and base.reported and len(self.g.checks.tests) == 1

    async def _settled(self, base: Baseline, tree: str, quick: Run, first: frozenset[str]
                       ) -> tuple[Verdict, Judgement] | None:
        """The verdict, when the tests run first already decide it."""
        early = self._early(quick, tree, base) or self._leaving(tree)
        if early is not None:
            return quick.verdict, early
        if not quick.reported:
            return None
        changed = self.trees.changed(tree)
        topic = self.about([p for p in changed if is_test_path(p, self.g.globs)])
        on_first = replace(as_run(base), outcomes={t: o for t, o in base.outcomes.items() if t in first})
        decided = functools.partial(decide, on_first, final=self.final, proof_needed=False, changed=frozenset(changed))
        parts, run = decided(quick, quick, topic), quick
        if not (parts.left or parts.broken):
            return None
        if not parts.left:  # only tests that passed at the base: chance, unless they fail again
            again = await self._ids_again(quick, parts.broken, reruns=1)
            if again is None:
                return None
            parts, run = decided(again, again, topic), again
        # The tests that did not run count as the base had them, so that progress is scored on
        # the whole suite as a full run would score it (they are passing tests no part names).
        unrun = sum(1 for t, o in base.outcomes.items() if o == PASSED and t not in first)
        verdict, judged = self._judged(replace(parts, kept=parts.kept + unrun), topic, run, run, tree)
        verdict = verdict.model_copy(update={"tests_passed": (verdict.tests_passed or 0) + unrun})
        ran = (f"only the {len(first)} test(s) that failed before or that it changed ran (of "
               f"{len(base.outcomes)}), and they decide it; the others did not run")
        return verdict, replace(judged, summary=f"{judged.summary} ({ran})",
                                failure=f"{ran[0].upper()}{ran[1:]}: {words.few(sorted(first), 10)}.\n{judged.failure}")

    async def _ids_again(self, run: Run, ids: tuple[str, ...], *, reruns: int) -> Run | None:
        """`ids` run again, alone, up to `reruns` times: the run (with the rest of `run`'s
        outcomes) where one of them failed again, None when they passed every time. The first
        rerun is the one `run`'s own session made at its end, when it made one of each."""
        if reruns and ids and all(t in run.again for t in ids):
            if any(run.again[t] != PASSED for t in ids):
                return run
            reruns -= 1
        for _ in range(reruns):
            again = await self.g.run(run.tree, tests_only=True, select=Selection("only", frozenset(ids)))
            if not again.reported or any(again.outcomes.get(t) != PASSED for t in ids):
                return Run(run.tree, again.verdict, {**run.outcomes, **again.outcomes},
                           again.reported and run.reported, again.singles)
        return None

    async def _own(self, base: Baseline, tree: str, side: list[str], old: Run) -> Own:
        """The run of the candidate's own copies of the tests: none to make when it changed no
        test (the old tests' run is its own); its new and edited test files alone when it
        changed only test files (the rest ran in the old tests' run); the whole tree when it
        changed how tests run."""
        if not side:
            return Own(old)
        files = frozenset(t.split("::", 1)[0] for t in base.outcomes) if base.reported else None
        if files is None or self.trees.runner_changed(side):
            return Own(await self.g.run(tree, tests_only=True))
        held = self.trees.holds(tree, side)
        drop = sorted(files - set(side))
        if not held:  # test files deleted, none written: their tests are simply absent
            return Own(Run(tree, Verdict(passed=True, steps=[]), reported=True), frozenset(side), drop)
        run = await self.g.run(self.trees.own_tests(tree, side, drop), tests_only=True)
        return Own(run, frozenset(side), drop)

    async def _parts(self, base: Baseline, tree: str, old: Run, own: Own, side: list[str]) -> tuple[Parts, About]:
        changed = self.trees.changed(tree)
        topic = self.about([p for p in changed if is_test_path(p, self.g.globs)])
        proof = self.final and needs_proof(self.type) and any(not _DOCS.search(p) for p in changed)
        decided = functools.partial(decide, as_run(base), old, own.run, topic, final=self.final, proof_needed=proof,
                                    scope=own.scope, changed=frozenset(changed))
        parts = decided()
        new = [t for t, o in own.run.outcomes.items() if o == "passed" and t not in base.outcomes]
        if parts.proof == "missing" and new and side:  # are they new tests that fail before the change?
            on_base = await self.g.run(self.trees.new_tests_on_base(tree, side, own.drop), tests_only=True)
            parts = decided(on_base=on_base)
        return parts, topic

    async def _again(self, base: Baseline, tree: str, old: Run, own: Own, side: list[str],
                     broken: tuple[str, ...]) -> Flaky | None:
        """The old tests' run again, `retry.flakyReruns` times: a failure that never comes back
        is chance, not the attempt (one that comes back even once is not)."""
        reruns = self.g.retry.flaky_reruns
        if self._by_id(base):
            if await self._ids_again(old, broken, reruns=reruns - 1) is not None:  # failed again: not chance
                return None
            reruns = 1  # then the whole run once: a failure that needs the others' order is no chance either
        parts, again = None, old
        for _ in range(reruns):
            again = await self.g.run(old.tree)
            parts, _ = await self._parts(base, tree, again, own if side else Own(again), side)
            if not parts.holds:
                return None
        return Flaky(again.verdict, parts) if parts is not None else None

    def _leaving(self, tree: str) -> Judgement | None:
        """A link the change adds whose target leaves the repository: what it points at is no
        part of the commit, so nothing judged there would hold in a clone."""
        leaving = sorted(self.g.tree.escaping & set(self.trees.changed(tree)))
        if not leaving:
            return None
        target = os.readlink(self.g.tree.path / leaving[0])
        reason = (f"the change adds a link that leaves the repository (`{leaving[0]}` -> `{target}`): the commit "
                  "would hold a pointer to a file it does not hold; put the file itself in the repository")
        return Judgement("failed", f"failed: {reason}", failure=reason, tree=tree)

    def _may_be_flaky(self, parts: Parts) -> bool:
        """Only tests that passed before the task broke: run them again before believing it."""
        return (self.g.retry.flaky_reruns > 0 and bool(parts.broken) and parts.proof != "missing"
                and not (parts.left or parts.own or parts.lost or parts.unnamed or parts.silent))

    def _early(self, run: Run, tree: str, base: Baseline) -> Judgement | None:
        """A run that says nothing of the tests: a setup that failed, a typecheck that failed,
        a check that cannot run, a file the commit lacks, a timeout."""
        if run.setup_failed is not None or run.unexported is not None:
            reason = run.unexported or _setup_failed(run)
            return Judgement("environment", reason, failure=reason, escalate=True, tree=tree)
        verdict = run.verdict
        if verdict.passed:
            return None
        failed = [single for single in run.singles if not single.passed]
        said_before = "\n".join(step.output for step in base.verdict.steps)
        for single in failed:
            missing = [(path, why) for path, why in lacking(single.steps[-1].output, self.g.repo.root, self.g.tree.path)
                       if path not in said_before]  # a file the base's run missed too is not the attempt's
            if missing:
                reason = sentence(missing, for_attempt=True)
                return Judgement("failed", f"failed: {reason}", failure=f"{reason}\n\n{_text(single)}", tree=tree)
            if self.g.retry.route_by_failure and single.failure_type in (FailureType.RUNTIME_ERROR,
                                                                          FailureType.TYPECHECK_FAILURE):
                environment = environment_error(single.steps[-1], root=self.g.tree.path, task_text=self.text)
                if environment:
                    return Judgement("environment", environment, failure=environment, escalate=True, tree=tree)
            if single.failure_type == FailureType.TIMEOUT and self.g.retry.route_by_failure:
                return Judgement("timeout", single.summary(), failure=_timeout_text(single, self.g.checks), tree=tree)
            if single.steps[-1].kind == "typecheck":
                return Judgement("failed", single.summary(), failure=_text(single), tree=tree,
                                 first_error=single.digest.first_error if single.digest else None)
        return None

    def _judged(self, parts: Parts, topic: About, old: Run, candidate: Run, tree: str) -> tuple[Verdict, Judgement]:
        deciding = candidate if (parts.own or parts.lost) and not (parts.broken or parts.left) else old
        # The first error of the test a summary names first, where the runner printed one.
        if parts.holds:
            still = tuple(t for t in topic.waived if t in parts.others or t in old.failing()[0])
            shown = replace(parts, others=tuple(t for t in parts.others if t not in still))
            line = words.summary(shown, passed=candidate.verdict.tests_passed) + (
                f"; apart from {len(still)} known failure(s) waived in checks.knownFailures: {words.few(still)}"
                if still else "")
            return old.verdict, Judgement("waived" if still else "passed", line, waived=still, parts=parts, tree=tree)
        failing = words.ordered(parts)
        first_error = _first_error(deciding, failing[0], anyone=failing[0] not in parts.lost) if failing else None
        only = parts.left if parts.left and not (parts.broken or parts.own or parts.lost or parts.unnamed) else ()
        return deciding.verdict, Judgement(
            "failed", words.summary(parts, first_error), failure=words.lead(parts, first_error) + _digest(deciding),
            failing_tests=failing, first_error=first_error, waived=topic.waived, only_before=only, parts=parts,
            tree=tree)


def _first_error(run: Run, test_id: str, *, anyone: bool = True) -> str | None:
    """The first error of `test_id` where the runner printed it, else (`anyone`) the digest's first."""
    for single in run.singles:
        if single.passed or not single.steps:
            continue
        step = single.steps[-1]
        error = error_of_test(step.output, test_id, command=step.command)
        if error:
            return error
    digest = run.verdict.digest
    return digest.first_error if digest and anyone else None


def _digest(run: Run) -> str:
    return run.verdict.digest.text if run.verdict.digest else ""


def _text(single: Verdict) -> str:
    return single.digest.text if single.digest else single.summary()


def _setup_failed(run: Run) -> str:
    step = run.setup_failed
    assert step is not None
    said = next((line.strip() for line in reversed(step.output.splitlines()) if line.strip()), "no output")
    how = "timed out" if step.timed_out else f"exited with {step.exit_code}"
    return (f"The setup command `{step.command}` (checks.setup) {how} in the judge's tree, a clean export of the "
            f"commit: {said[:200]}")


def _timeout_text(single: Verdict, checks: CheckSettings) -> str:
    step = single.steps[-1]
    digest = _text(single)
    return (f"`{step.command}` was killed after the {checks.timeout_s:g} s limit. Something the attempt changed "
            f"makes it hang or run far slower (an endless loop, a blocking call, a much slower algorithm); find and "
            f"remove that.\n{digest}")

