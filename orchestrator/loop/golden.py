"""GoldenLoop: one task, start to finish.

decompose -> for each subtask: execute -> verify -> commit, or reflect and retry from the
failed attempt's tree; after `maxRetries` failed retries, escalate: restore the subtask's
base, block the task and write the packet a human needs.

The loop owns no I/O policy of its own: git is `Repo`, files of state are `TaskBoard`
and `SubtaskPlan`, checks are `verify`, memory is `ReflectionService`, and every step
is an event in the `RunLog`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio

from orchestrator.checks.convergence import AttemptScore, Convergence, Decision, ProgressTracker
from orchestrator.checks.judge import Judge, Judgement
from orchestrator.checks.preflight import Baseline, preflight
from orchestrator.checks.verify import Verdict, verify
from orchestrator.config import ProjectConfig
from orchestrator.executors import ExecutionRequest, ExecutionResult, Executor
from orchestrator.loop.decompose import decompose, is_small
from orchestrator.loop.escalation import AttemptSnapshot, write_packet
from orchestrator.loop.plan import AttemptRecord, Subtask, SubtaskPlan
from orchestrator.loop.prompt import LastAttempt, attempt_prompt, start_over
from orchestrator.metering import Meter
from orchestrator.repo import Repo
from orchestrator.runlog import RunLog
from orchestrator.tasks import Task, TaskBoard
from reflection.llm import ChatModel, ModelError
from reflection.redact import redact
from reflection.schema import FailureContext
from reflection.service import ReflectionService
from reflection.text import cut_block

DIFF_BYTES = 200_000  # bound on a diff kept in memory or sent anywhere
# Asking again after a retry returned an earlier attempt's code: greedy decoding of much
# the same prompt tends to give the same answer, so the second ask samples.
REASK_TEMPERATURE = 0.7
REPLY_LOGGED = 4_000  # characters of an unapplied reply kept in the run log, to see why
# A prompt too long for the model is this task's problem: block it, do not stop the run.
TASK_MODEL_ERRORS = frozenset({"context_window"})
T = TypeVar("T")

Status = Literal["closed", "blocked", "model_unavailable", "budget", "interrupted"]


@dataclass
class TaskOutcome:
    task_id: str
    status: Status
    reason: str
    commits: list[str] = field(default_factory=list)
    attempts: int = 0
    reflections: int = 0
    meter: Meter = field(default_factory=Meter)
    duration_s: float = 0.0
    escalation: Path | None = None
    convergence: str | None = None  # why the last subtask stopped (Convergence)


@dataclass
class _SubtaskResult:
    status: Literal["passed", "escalated", "model_unavailable", "budget"]
    reason: str
    commit: str | None = None
    escalation: Path | None = None
    convergence: Convergence | None = None


@dataclass
class _Attempts:
    """What one subtask's attempts in this run have learned so far."""

    base: str
    before: set[str]  # the user's dirty paths at the start: never ours
    tracker: ProgressTracker
    last: LastAttempt | None = None
    changed: list[str] = field(default_factory=list)  # the next attempt's hints
    snapshots: list[AttemptSnapshot] = field(default_factory=list)
    patches: dict[int, str] = field(default_factory=dict)  # attempt -> binary patch
    previous_signature: str | None = None
    last_decision: Decision | None = None
    start: int | None = None  # the attempt whose tree the next attempt starts from; None: base
    user_files: dict[str, bytes] = field(default_factory=dict)  # dirty before: their content
    failed_states: dict[str, int] = field(default_factory=dict)  # tree snapshot hash -> attempt
    failures: dict[int, str] = field(default_factory=dict)  # attempt -> what its retry was told
    scores: dict[int, AttemptScore] = field(default_factory=dict)  # attempt -> as the tracker saw it
    current_patch: str | None = None  # the snapshot of the attempt in flight, once made


@dataclass
class LoopParts:
    """What the loop is made of; built once per run by `orchestrator.session`."""

    project_dir: Path
    config: ProjectConfig
    repo: Repo
    board: TaskBoard
    runlog: RunLog
    executor: Executor
    planner: ChatModel | None  # None: no decomposition call
    reflections: ReflectionService | None  # None: reflexion off
    session_id: str
    meter: Meter  # of the current task, fed by the metered models
    # Asked before every attempt; a reason to stop (e.g. the cost budget) or None.
    budget_check: Callable[[], str | None] | None = None


class GoldenLoop:
    def __init__(self, parts: LoopParts) -> None:
        self.p = parts
        self.max_attempts = parts.config.reflexion.max_retries + 1
        self._attempts = 0
        self._reflections = 0

    async def run_task(self, task: Task) -> TaskOutcome:
        started = time.monotonic()
        p = self.p
        p.board.claim(task.id)
        p.runlog.event("task_started", taskId=task.id, title=task.title)
        baseline = await self._preflight(task)
        if isinstance(baseline, TaskOutcome):
            return self._finish(baseline, [], started)
        plan = await self._plan(task)
        commits: list[str] = [s.commit for s in plan.subtasks if s.commit]
        outcome = None
        for subtask in plan.subtasks:
            if subtask.status == "done":
                continue
            result = await self._run_subtask(task, plan, subtask, baseline)
            if result.status != "passed":
                outcome = self._stop(task, result)
                break
            if result.commit:
                commits.append(result.commit)
        if outcome is None:
            reason = f"all {len(plan.subtasks)} subtask(s) passed verification"
            p.board.close(task.id, reason, commits)
            p.runlog.event("task_closed", taskId=task.id, commits=commits, reason=reason)
            outcome = TaskOutcome(task.id, "closed", reason, convergence=Convergence.PASSED)
        return self._finish(outcome, commits, started)

    def _finish(self, outcome: TaskOutcome, commits: list[str], started: float) -> TaskOutcome:
        outcome.commits = commits
        outcome.attempts, outcome.reflections = self._attempts, self._reflections
        outcome.meter, outcome.duration_s = self.p.meter, time.monotonic() - started
        return outcome

    async def _preflight(self, task: Task) -> Baseline | TaskOutcome | None:
        """Run the checks once before any model call; a broken environment blocks the task."""
        p, c = self.p, self.p.config
        if not (c.retry.preflight and (c.test_commands or c.typecheck_commands)):
            return None
        baseline = await preflight(
            p.repo.root,
            typecheck_commands=c.typecheck_commands,
            test_commands=c.test_commands,
            timeout_s=c.timeouts.verify_seconds,
            digest_tokens=c.digest_tokens,
            task_text=_task_text(task),
        )
        p.runlog.event(
            "preflight",
            taskId=task.id,
            passed=baseline.verdict.passed,
            failingAtBaseline=sorted(baseline.failing_tests),
            complete=baseline.complete,
            environmentError=baseline.environment_error,
            durationS=round(baseline.duration_s, 3),
        )
        if baseline.environment_error is None:
            return baseline
        reason = f"environment: {baseline.environment_error} No model was called."
        p.board.block(task.id, redact(reason))
        p.runlog.event("task_blocked", taskId=task.id, reason=reason, convergence=Convergence.ENVIRONMENT)
        return TaskOutcome(task.id, "blocked", reason, convergence=Convergence.ENVIRONMENT)

    async def _plan(self, task: Task) -> SubtaskPlan:
        p = self.p
        path = SubtaskPlan.path_for(p.project_dir, task.id)
        plan = SubtaskPlan.load(path)
        if plan is not None and plan.next_subtask() is not None:
            for subtask in plan.subtasks:
                if subtask.status == "failed":  # a fresh start on a rerun
                    subtask.status = "pending"
                lost = subtask.commit and not p.repo.contains(subtask.commit)
                if subtask.status == "done" and lost:  # its worktree branch is gone
                    subtask.status, subtask.commit = "pending", None
            done = sum(s.status == "done" for s in plan.subtasks)
            p.runlog.event("plan_resumed", taskId=task.id, done=done, total=len(plan.subtasks))
            return plan
        small = is_small(task, p.config.decompose_min_chars)
        planner = None if small else p.planner
        plan = await decompose(task, planner, timeout_s=p.config.timeouts.model_seconds)
        if plan.source == "llm":  # a model's plan is worth keeping before any subtask starts
            plan.save(path)
        p.runlog.event(
            "decomposed",
            taskId=task.id,
            source=plan.source,
            subtasks=[{"id": s.id, "title": s.title, "aboutTests": s.about_tests} for s in plan.subtasks],
        )
        return plan

    async def _run_subtask(
        self, task: Task, plan: SubtaskPlan, subtask: Subtask, baseline: Baseline | None
    ) -> _SubtaskResult:
        p, retry = self.p, self.p.config.retry
        base = await self._git(p.repo.head)
        # The user's own dirty paths (untracked, or modified with --allow-dirty) are
        # never counted, committed or restored.
        before = set(await self._git(p.repo.dirty_paths))
        subtask.status, subtask.base_commit = "in_progress", base
        subtask.dirty_before = sorted(before)
        self._save(plan)
        run = _Attempts(base, before, ProgressTracker(
            stop_on_plateau=retry.stop_on_plateau,
            stop_on_oscillation=retry.stop_on_oscillation,
            rollback_regressions=retry.rollback_regressions,
        ))
        run.user_files = _read_files(p.repo.root, before)
        judge = Judge(p.repo.root, p.config, baseline=baseline, task_text=_task_text(task),
                      about_tests=subtask.about_tests)
        for shown in range(1, self.max_attempts + 1):  # "attempt k/N" of this run
            result = await self._attempt(task, plan, subtask, run, judge, shown)
            if result is not None:
                return result
        final = Convergence.MAX_RETRIES
        if run.last_decision is not None and run.last_decision.action == "rollback":
            final = Convergence.REGRESSION  # the last retry made things worse
        return await self._escalate(task, plan, subtask, run, final)

    async def _attempt(
        self, task: Task, plan: SubtaskPlan, subtask: Subtask, run: _Attempts, judge: Judge, shown: int
    ) -> _SubtaskResult | None:
        """One attempt; a result ends the subtask, None means: retry."""
        p = self.p
        number = len(subtask.attempts) + 1  # the subtask's attempts across runs
        stop = p.budget_check() if p.budget_check else None
        if stop:
            return await self._put_back(plan, subtask, run, "budget", stop)
        prompt = self._prompt(task, plan, subtask, run.last)
        p.runlog.event("attempt_started", taskId=task.id, subtaskId=subtask.id, attempt=shown,
                       of=self.max_attempts, promptChars=len(prompt))
        self._attempts += 1
        started = time.monotonic()
        request = ExecutionRequest(repo_dir=p.repo.root, prompt=prompt, attempt=shown, hint_paths=run.changed)
        try:
            executed, same_as = await self._execute(task, plan, subtask, run, request)
        except ModelError as exc:
            if exc.kind in TASK_MODEL_ERRORS:  # this task's prompt is the problem: retries cannot help
                reason = f"the model refused this task's prompt: {exc}"
                self._record(plan, subtask, "model_refused", reason, run.changed, started)
                return await self._escalate(task, plan, subtask, run, Convergence.ENVIRONMENT)
            return await self._put_back(plan, subtask, run, "model_unavailable", f"the model failed: {exc}")
        run.changed = await self._git(p.repo.changed_files, run.base, run.before)
        # The diff costs several git calls: made when a retry, a reflection or the test
        # integrity check (an attempt that touched test files) needs it.
        diff = ""
        if not executed.ok or judge.touches_tests(run.changed):
            diff = await self._git(p.repo.diff, run.base, run.before, DIFF_BYTES)
        touched = _put_back_user_files(p.repo.root, run.user_files)
        if touched:  # their edits cannot be told from the user's: never ours to keep
            reason = (f"the attempt changed {', '.join(touched)}, which hold(s) uncommitted work of yours; "
                      "goldenloop never mixes its edits into your work: commit or stash it and run again")
            p.runlog.event("user_files_touched", taskId=task.id, subtaskId=subtask.id, paths=touched)
            self._record(plan, subtask, "user_files", reason, run.changed, started)
            return await self._escalate(task, plan, subtask, run, Convergence.ENVIRONMENT)
        if not executed.ok:  # nothing ran: say exactly why, and how to get it right
            await self._not_applied(task, plan, subtask, run, shown, executed, started, diff)
            return None
        if same_as is not None:  # a failed attempt's code again: its verdict is known
            return await self._repeated(task, plan, subtask, run, shown, same_as, executed, started)
        verdict = await self._verify()
        self._log_verdict(task, subtask, shown, verdict, run.changed)
        judged = await judge.judge(verdict, run.changed, diff)
        if judged.outcome not in ("passed", "failed"):
            p.runlog.event("judged", taskId=task.id, subtaskId=subtask.id, attempt=shown,
                           outcome=judged.outcome, summary=judged.summary)
        if judged.passed:
            sha = await self._commit(task, subtask, run.changed)
            subtask.status, subtask.commit, subtask.convergence = "done", sha, Convergence.PASSED
            self._record(plan, subtask, judged.outcome, judged.summary, run.changed, started, verdict,
                         executed=executed)
            return _SubtaskResult("passed", judged.summary, commit=sha, convergence=Convergence.PASSED)
        diff = diff or await self._git(p.repo.diff, run.base, run.before, DIFF_BYTES)
        reflection_id = None
        if judged.reflect and shown < self.max_attempts:  # a reflection serves the next retry
            reflection_id = await self._reflect(task, subtask, number, verdict, run, diff)
        self._record(plan, subtask, judged.outcome, judged.summary, run.changed, started,
                     verdict, reflection_id, executed=executed)
        return await self._after_failure(task, plan, subtask, run, shown, verdict, judged, diff)

    async def _after_failure(
        self,
        task: Task,
        plan: SubtaskPlan,
        subtask: Subtask,
        run: _Attempts,
        shown: int,
        verdict: Verdict,
        judged: Judgement,
        diff: str,
    ) -> _SubtaskResult | None:
        """Track progress: stop early, roll a regression back, or set up the retry."""
        p = self.p
        score = 0.0 if judged.outcome == "integrity" else verdict.score
        run.snapshots.append(AttemptSnapshot(shown, judged.summary, diff, score))
        patch = run.current_patch
        if patch is None:
            patch = await self._git(p.repo.snapshot, run.base, run.before)
        run.patches[shown] = patch
        run.failed_states[_state_key(patch)] = shown
        if judged.escalate:
            return await self._escalate(task, plan, subtask, run, Convergence.ENVIRONMENT)
        attempt = AttemptScore.from_verdict(shown, verdict)
        if judged.outcome == "integrity":
            attempt = AttemptScore(shown, 0.0, signature="integrity")
        run.scores[shown] = attempt
        decision = run.last_decision = run.tracker.record(attempt)
        if decision.action != "continue" or decision.repeated_signature:
            p.runlog.event("progress", taskId=task.id, subtaskId=subtask.id, attempt=shown, **decision.as_event())
        if decision.action == "stop" and shown < self.max_attempts:
            return await self._escalate(task, plan, subtask, run, decision.reason or Convergence.PLATEAU)
        failure = judged.failure
        if decision.repeated_signature:
            failure += "\n\nThis is exactly the failure of the attempt before: that fix did not work."
        if decision.action == "rollback" and decision.rollback_to in run.patches:
            await self._roll_back(task, subtask, run, decision.rollback_to)
            best = run.snapshots[[s.number for s in run.snapshots].index(decision.rollback_to)]
            failure += (f"\n\nThis attempt was worse than attempt {best.number}, so the tree was put "
                        f"back to attempt {best.number}'s changes (shown above); improve on those.")
            diff = best.diff
            run.start = decision.rollback_to
        elif judged.outcome == "integrity":  # weakened tests must not stay for the next attempt
            await self._undo(task, subtask, run, shown)
            failure += (f"\n\nThat diff was undone: the tree is back to how it was before attempt "
                        f"{shown}, tests included; make the tests pass by changing the code.")
        else:
            run.start = shown
        run.previous_signature = verdict.digest.signature if verdict.digest else None
        run.failures[shown] = failure
        run.last = LastAttempt(shown, diff, failure)
        return None

    async def _execute(
        self, task: Task, plan: SubtaskPlan, subtask: Subtask, run: _Attempts, request: ExecutionRequest
    ) -> tuple[ExecutionResult, int | None]:
        """Run the executor; a retry that gives back a failed attempt's code is asked once more,
        from the subtask's start, told how that code failed but not shown it.

        Returns the result and, when its tree is still one a failed attempt left, that
        attempt's number: verifying it again would only repeat a known verdict.
        """
        p = self.p
        executed = await p.executor.execute(request)
        same_as = await self._same_as_failed(run, executed)
        if same_as is None or not p.config.retry.reask_repeats:
            return executed, None
        p.runlog.event("repeat", taskId=task.id, subtaskId=subtask.id, attempt=request.attempt,
                       sameAs=same_as, action="asked again")
        await self._reset_tree(run, None)
        fresh = self._prompt(task, plan, subtask, None)
        block = start_over(same_as, run.failures.get(same_as, ""))
        again = request.model_copy(
            update={"prompt": f"{fresh}\n\n{block}", "temperature": REASK_TEMPERATURE}
        )
        executed = await p.executor.execute(again)
        return executed, await self._same_as_failed(run, executed)

    async def _same_as_failed(self, run: _Attempts, executed: ExecutionResult) -> int | None:
        """The failed attempt whose tree the executor's result reproduces, if any."""
        run.current_patch = None
        if not executed.ok or not run.failed_states:
            return None
        run.current_patch = await self._git(self.p.repo.snapshot, run.base, run.before)
        return run.failed_states.get(_state_key(run.current_patch))

    async def _repeated(
        self, task: Task, plan: SubtaskPlan, subtask: Subtask, run: _Attempts, shown: int, same_as: int,
        executed: ExecutionResult, started: float,
    ) -> _SubtaskResult | None:
        """Count an attempt that reproduced attempt `same_as` even when asked not to.

        Its verdict is `same_as`'s, so progress is tracked as if it had run: a repeat is
        no improvement, and going back to an older attempt's code is oscillation.
        """
        p = self.p
        summary = f"gave back attempt {same_as}'s code unchanged, even when asked for a different one"
        p.runlog.event("repeat", taskId=task.id, subtaskId=subtask.id, attempt=shown, sameAs=same_as,
                       action="counted as a failed attempt")
        self._record(plan, subtask, "repeat", summary, run.changed, started, executed=executed)
        earlier = next((s for s in run.snapshots if s.number == same_as), None)
        diff = earlier.diff if earlier else ""
        run.snapshots.append(AttemptSnapshot(shown, summary, diff, earlier.score if earlier else 0.0))
        run.patches[shown] = run.patches.get(same_as, "")
        failure = run.failures.get(same_as, "")
        run.failures[shown] = failure
        await self._reset_tree(run, None)  # the next attempt starts over, too
        run.start = None
        if same_as in run.scores:
            score = dataclasses.replace(run.scores[same_as], number=shown)
            decision = run.last_decision = run.tracker.record(score)
            p.runlog.event("progress", taskId=task.id, subtaskId=subtask.id, attempt=shown, **decision.as_event())
            if decision.action == "stop" and shown < self.max_attempts:
                return await self._escalate(task, plan, subtask, run, decision.reason or Convergence.PLATEAU)
        run.last = LastAttempt(shown, diff, failure, repeat_of=same_as)
        return None

    async def _not_applied(
        self, task: Task, plan: SubtaskPlan, subtask: Subtask, run: _Attempts, shown: int,
        executed: ExecutionResult, started: float, diff: str,
    ) -> None:
        """An attempt whose reply could not be applied (or whose agent failed): nothing ran."""
        p = self.p
        builtin = p.executor.name == "builtin"
        what = "the reply could not be applied" if builtin else "the agent run failed"
        reason = f"{what}: {executed.error}"
        p.runlog.event("edit_failed", taskId=task.id, subtaskId=subtask.id, attempt=shown, error=executed.error,
                       formatAsked=executed.format_asked, formatReceived=executed.format_received,
                       reply=cut_block(redact(executed.reply or ""), REPLY_LOGGED))
        reflection_id = None
        if builtin and shown < self.max_attempts:  # a format failure is a lesson too
            reflection_id = await self._reflect_on_edit(task, subtask, len(subtask.attempts) + 1, run, executed)
        self._record(plan, subtask, "edit_failed", reason, run.changed, started,
                     reflection_id=reflection_id, executed=executed)
        run.snapshots.append(AttemptSnapshot(shown, reason, diff, 0.0))
        failure = "\n".join(part for part in (executed.error, executed.repair) if part)
        run.last = LastAttempt(shown, diff, failure, applied=False)

    async def _roll_back(self, task: Task, subtask: Subtask, run: _Attempts, to: int) -> None:
        await self._reset_tree(run, to)
        self.p.runlog.event("rolled_back", taskId=task.id, subtaskId=subtask.id, toAttempt=to)

    async def _undo(self, task: Task, subtask: Subtask, run: _Attempts, shown: int) -> None:
        """Take a rejected attempt's changes out of the tree."""
        await self._reset_tree(run, run.start)
        self.p.runlog.event("attempt_undone", taskId=task.id, subtaskId=subtask.id, attempt=shown,
                            toAttempt=run.start)

    async def _reset_tree(self, run: _Attempts, to: int | None) -> None:
        """The tree as attempt `to` left it; None: as the subtask found it."""
        p = self.p
        await self._git(p.repo.restore, run.base, run.before)
        if to is not None:
            await self._git(p.repo.apply_snapshot, run.patches[to])
        run.changed = await self._git(p.repo.changed_files, run.base, run.before)

    def _log_verdict(self, task: Task, subtask: Subtask, shown: int, verdict: Verdict, changed: list[str]) -> None:
        self.p.runlog.event(
            "verdict",
            taskId=task.id,
            subtaskId=subtask.id,
            attempt=shown,
            passed=verdict.passed,
            failureType=verdict.failure_type,
            summary=verdict.summary(),
            testsPassed=verdict.tests_passed,
            testsFailed=verdict.tests_failed,
            errorSignature=verdict.digest.signature if verdict.digest else None,
            durationS=round(verdict.duration_s, 3),
            filesChanged=changed,
        )

    @staticmethod
    async def _git(fn: Callable[..., T], *args: Any) -> T:
        """Git work off the event loop, so parallel workers' tests keep running."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args))

    async def _put_back(
        self, plan: SubtaskPlan, subtask: Subtask, run: _Attempts, status: str, reason: str
    ) -> _SubtaskResult:
        """Stop without blaming the task: undo the subtask, leave it pending."""
        await self._git(self.p.repo.restore, run.base, run.before)
        convergence = Convergence.BUDGET if status == "budget" else None
        subtask.status, subtask.convergence = "pending", convergence
        self._save(plan)
        return _SubtaskResult(status, reason, convergence=convergence)  # type: ignore[arg-type]

    def _prompt(self, task: Task, plan: SubtaskPlan, subtask: Subtask, last: LastAttempt | None) -> str:
        block = ""
        service = self.p.reflections
        if service is not None and (last is not None or subtask.attempts):  # incl. a killed run's
            block = service.format_for_prompt(service.recent(subtask.id))
        return attempt_prompt(task, plan, subtask, last=last, reflections=block)

    async def _verify(self) -> Verdict:
        c = self.p.config
        return await verify(
            self.p.repo.root,
            typecheck_commands=c.typecheck_commands,
            test_commands=c.test_commands,
            timeout_s=c.timeouts.verify_seconds,
            digest_tokens=c.digest_tokens,
        )

    async def _commit(self, task: Task, subtask: Subtask, changed: list[str]) -> str | None:
        if not changed:
            self.p.runlog.event("no_changes", taskId=task.id, subtaskId=subtask.id)
            return None
        sha = await self._git(self.p.repo.commit, changed, f"{task.id}: {subtask.title}")
        self.p.runlog.event("committed", taskId=task.id, subtaskId=subtask.id, sha=sha, files=changed)
        return sha

    async def _reflect_on_edit(
        self, task: Task, subtask: Subtask, attempt: int, run: _Attempts, executed: ExecutionResult
    ) -> str | None:
        if self.p.reflections is None or not executed.error:
            return None
        ctx = FailureContext(
            session_id=self.p.session_id,
            task_id=task.id,
            subtask_id=subtask.id,
            attempt_number=attempt,
            subtask_title=subtask.title,
            subtask_description=subtask.description,
            stage="edit",
            digest=executed.error,
            files_modified=run.changed,
        )
        return await self._save_reflection(task, subtask, attempt, ctx)

    async def _reflect(
        self,
        task: Task,
        subtask: Subtask,
        attempt: int,
        verdict: Verdict,
        run: _Attempts,
        diff: str,
    ) -> str | None:
        service = self.p.reflections
        if service is None or verdict.digest is None or verdict.failure_type is None:
            return None
        ctx = FailureContext(
            session_id=self.p.session_id,
            task_id=task.id,
            subtask_id=subtask.id,
            attempt_number=attempt,
            subtask_title=subtask.title,
            subtask_description=subtask.description,
            failure_type=verdict.failure_type,
            digest=verdict.digest.text,
            error_signature=verdict.digest.signature,
            failing_tests=verdict.digest.failing_tests,
            first_error=verdict.digest.first_error,
            files_modified=run.changed,
            diff=diff,
            previous_signature=run.previous_signature,
        )
        return await self._save_reflection(task, subtask, attempt, ctx)

    async def _save_reflection(self, task: Task, subtask: Subtask, attempt: int, ctx: FailureContext) -> str | None:
        service = self.p.reflections
        assert service is not None
        try:
            reflection = await service.reflect(ctx)
        except Exception as exc:  # noqa: BLE001 - memory trouble must not stop the loop
            self.p.runlog.event("reflection_failed", taskId=task.id, subtaskId=subtask.id, error=str(exc))
            return None
        self._reflections += 1
        self.p.runlog.event(
            "reflection",
            taskId=task.id,
            subtaskId=subtask.id,
            attempt=attempt,
            id=reflection.id,
            category=reflection.category,
            analysis=reflection.analysis,
            suggestion=reflection.suggestion,
            source=reflection.source,
            path=str(getattr(service.store, "path", "")) or None,
        )
        return reflection.id

    def _record(
        self,
        plan: SubtaskPlan,
        subtask: Subtask,
        outcome: str,
        summary: str,
        changed: list[str],
        started: float,
        verdict: Verdict | None = None,
        reflection_id: str | None = None,
        *,
        executed: ExecutionResult | None = None,
    ) -> None:
        digest = verdict.digest if verdict else None
        subtask.attempts.append(
            AttemptRecord(
                number=len(subtask.attempts) + 1,  # the subtask's attempts across runs
                outcome=outcome,
                failure_type=verdict.failure_type if verdict and verdict.failure_type else None,
                summary=summary,
                error_signature=digest.signature if digest else None,
                tests_passed=verdict.tests_passed if verdict else None,
                tests_failed=verdict.tests_failed if verdict else None,
                files_changed=changed,
                reflection_id=reflection_id,
                duration_s=round(time.monotonic() - started, 3),
                format_asked=executed.format_asked if executed else None,
                format_received=executed.format_received if executed else None,
            )
        )
        if outcome != "passed":
            subtask.failure_count += 1
            subtask.last_failure_reason = summary
        self._save(plan)

    def _save(self, plan: SubtaskPlan) -> None:
        plan.save(SubtaskPlan.path_for(self.p.project_dir, plan.task_id))

    async def _escalate(
        self, task: Task, plan: SubtaskPlan, subtask: Subtask, run: _Attempts, why: Convergence
    ) -> _SubtaskResult:
        p = self.p
        reflections = p.reflections.recent(subtask.id, 10) if p.reflections else []
        packet = write_packet(
            p.project_dir, task, subtask,
            snapshots=run.snapshots, reflections=reflections, meter=p.meter, convergence=why,
        )
        if p.config.failure_cleanup == "restore":
            await self._git(p.repo.restore, run.base, run.before)
        subtask.status, subtask.convergence = "failed", why
        self._save(plan)
        reason = (
            f"subtask {subtask.id} stopped ({why.value}) after {len(run.snapshots)} attempt(s); "
            f"last: {subtask.last_failure_reason}; see {packet.relative_to(p.project_dir)}"
        )
        p.runlog.event(
            "escalated",
            taskId=task.id,
            subtaskId=subtask.id,
            convergence=why,
            packet=str(packet),
            restored=p.config.failure_cleanup == "restore",
            reason=reason,
        )
        return _SubtaskResult("escalated", reason, escalation=packet, convergence=why)

    def _stop(self, task: Task, result: _SubtaskResult) -> TaskOutcome:
        p = self.p
        if result.status in ("model_unavailable", "budget"):
            p.board.reopen(task.id)
            p.runlog.event("task_reopened", taskId=task.id, reason=result.reason, convergence=result.convergence)
            return TaskOutcome(task.id, result.status, result.reason, convergence=result.convergence)
        p.board.block(task.id, redact(result.reason))  # tasks.jsonl is shared: no secrets
        p.runlog.event("task_blocked", taskId=task.id, reason=result.reason, convergence=result.convergence)
        return TaskOutcome(task.id, "blocked", result.reason, escalation=result.escalation,
                           convergence=result.convergence)


USER_FILE_LIMIT = 5_000_000  # bytes of one dirty file kept to guard it; larger ones unguarded


def _read_files(root: Path, paths: set[str]) -> dict[str, bytes]:
    kept = {}
    for rel in paths:
        path = root / rel
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= USER_FILE_LIMIT:
            kept[rel] = path.read_bytes()
    return kept


def _put_back_user_files(root: Path, saved: dict[str, bytes]) -> list[str]:
    """Restore any of the user's dirty files an attempt changed; returns their names."""
    touched = []
    for rel, data in saved.items():
        path = root / rel
        try:
            same = path.read_bytes() == data
        except OSError:
            same = False
        if not same:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            touched.append(rel)
    return sorted(touched)


def _state_key(patch: str) -> str:
    """A tree's identity, from its snapshot against the subtask's base."""
    return hashlib.sha256(patch.encode("utf-8", "surrogateescape")).hexdigest()


def _task_text(task: Task) -> str:
    """What the task says, for telling its own tests and modules from others."""
    criteria = task.acceptance_criteria or ""
    if isinstance(criteria, list):
        criteria = "\n".join(criteria)
    return "\n".join((task.title, task.description, criteria))
