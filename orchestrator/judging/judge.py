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

    @classmethod
    def of(cls, repo: Repo, tree: JudgeTree, config: ProjectConfig, checkout: Path | None = None) -> Ground:
        """The ground a project's config gives: its checks, retry rules, setup and waivers."""
        checks = config.checks_config
        return cls(repo, tree, config.checks, config.retry, tuple(checks.setup), Waivers.of(checks.known_failures),
                   checkout)

    @property
    def globs(self) -> tuple[str, ...]:
        return tuple(self.retry.test_globs or DEFAULT_TEST_GLOBS)

    async def run(self, tree: str, *, every_step: bool = False, tests_only: bool = False) -> Run:
        """The checks on `tree` in the judge's tree; `tests_only`: no typecheck (it ran on this
        code in the run before)."""
        checks = replace(self.checks, typecheck=()) if tests_only else self.checks
        return await run_checks(self.tree, tree, checks, self.setup, every_step=every_step)


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
    run = await ground.run(tree, every_step=True)
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
        old = await self.g.run(self.trees.old_tests(tree, side))  # the candidate's own run when side is empty
        early = self._early(old, tree, base) or self._leaving(tree)
        if early is not None:
            return old.verdict, early
        own = await self._own(base, tree, side, old)
        if own.run is not old and own.run.verdict.failure_type == FailureType.TIMEOUT:  # a new test that hangs
            return own.run.verdict, self._early(own.run, tree, base) or Judgement("timeout", own.run.verdict.summary())
        parts, topic = await self._parts(base, tree, old, own, side)
        if not parts.holds and self._may_be_flaky(parts):
            flaky = await self._again(base, tree, old, own, side)
            if flaky is not None:
                return flaky.verdict, Judgement(
                    "flaky", f"flaky: {words.few(parts.broken)} failed, then passed on "
                    f"{self.g.retry.flaky_reruns} rerun(s); "
                    f"{flaky.parts.line()}", parts=flaky.parts, tree=tree)
        return self._judged(parts, topic, old, own.run, tree)

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

    async def _again(self, base: Baseline, tree: str, old: Run, own: Own, side: list[str]) -> Flaky | None:
        """The old tests' run again, `retry.flakyReruns` times: a failure that never comes back
        is chance, not the attempt (one that comes back even once is not)."""
        parts, again = None, old
        for _ in range(self.g.retry.flaky_reruns):
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

