"""GoldenLoop: one task, start to finish.

decompose -> for each subtask: execute -> verify -> commit, or reflect and retry from the
failed attempt's tree; after `maxRetries` failed retries, escalate: restore the subtask's
base, block the task and write the packet a human needs.

The loop owns no I/O policy of its own: git is `Repo`, files of state are `TaskBoard`
and `SubtaskPlan`, checks are `verify`, memory is `ReflectionService`, and every step
is an event in the `RunLog`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from orchestrator.config import ProjectConfig
from orchestrator.decompose import (
    AttemptRecord,
    Subtask,
    SubtaskPlan,
    decompose,
    is_small,
)
from orchestrator.escalation import AttemptSnapshot, write_packet
from orchestrator.executors import ExecutionRequest, Executor
from orchestrator.metering import Meter
from orchestrator.prompt import LastAttempt, attempt_prompt
from orchestrator.repo import Repo
from orchestrator.runlog import RunLog
from orchestrator.tasks import Task, TaskBoard
from orchestrator.verify import Verdict, verify
from reflection.llm import ChatModel, ModelError
from reflection.schema import FailureContext
from reflection.service import ReflectionService

DIFF_BYTES = 200_000  # bound on a diff kept in memory or sent anywhere

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


@dataclass
class _SubtaskResult:
    status: Literal["passed", "escalated", "model_unavailable", "budget"]
    reason: str
    commit: str | None = None
    escalation: Path | None = None


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
        plan = await self._plan(task)
        commits: list[str] = [s.commit for s in plan.subtasks if s.commit]
        outcome = None
        for subtask in plan.subtasks:
            if subtask.status == "done":
                continue
            result = await self._run_subtask(task, plan, subtask)
            if result.status != "passed":
                outcome = self._stop(task, plan, subtask, result)
                break
            if result.commit:
                commits.append(result.commit)
        if outcome is None:
            reason = f"all {len(plan.subtasks)} subtask(s) passed verification"
            p.board.close(task.id, reason, commits)
            p.runlog.event("task_closed", taskId=task.id, commits=commits, reason=reason)
            outcome = TaskOutcome(task.id, "closed", reason, commits)
        outcome.commits = commits
        outcome.attempts, outcome.reflections = self._attempts, self._reflections
        outcome.meter, outcome.duration_s = p.meter, time.monotonic() - started
        return outcome

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
        plan.save(path)
        p.runlog.event(
            "decomposed",
            taskId=task.id,
            source=plan.source,
            subtasks=[{"id": s.id, "title": s.title} for s in plan.subtasks],
        )
        return plan

    async def _run_subtask(self, task: Task, plan: SubtaskPlan, subtask: Subtask) -> _SubtaskResult:
        p = self.p
        base = p.repo.head()
        # The user's own dirty paths (untracked, or modified with --allow-dirty) are
        # never counted, committed or restored.
        before = set(p.repo.dirty_paths())
        subtask.status, subtask.base_commit = "in_progress", base
        subtask.dirty_before = sorted(before)
        self._save(plan)
        last: LastAttempt | None = None
        changed: list[str] = []  # what the attempts so far changed: the next one's hints
        snapshots: list[AttemptSnapshot] = []
        previous_signature: str | None = None
        for shown in range(1, self.max_attempts + 1):  # "attempt k/N" of this run
            number = len(subtask.attempts) + 1  # the subtask's attempts across runs
            stop = p.budget_check() if p.budget_check else None
            if stop:
                return self._put_back(plan, subtask, base, before, "budget", stop)
            prompt = self._prompt(task, plan, subtask, last)
            p.runlog.event(
                "attempt_started",
                taskId=task.id,
                subtaskId=subtask.id,
                attempt=shown,
                of=self.max_attempts,
                promptChars=len(prompt),
            )
            self._attempts += 1
            started = time.monotonic()
            request = ExecutionRequest(
                repo_dir=p.repo.root, prompt=prompt, attempt=shown, hint_paths=changed
            )
            try:
                executed = await p.executor.execute(request)
            except ModelError as exc:
                return self._put_back(plan, subtask, base, before, "model_unavailable", f"the model failed: {exc}")
            changed = p.repo.changed_files(base, before)
            if not executed.ok:
                diff = p.repo.diff(base, before, max_bytes=DIFF_BYTES)
                what = "the edits could not be applied" if p.executor.name == "builtin" else "the agent run failed"
                reason = f"{what}: {executed.error}"
                p.runlog.event(
                    "edit_failed", taskId=task.id, subtaskId=subtask.id, attempt=shown, error=executed.error
                )
                self._record(plan, subtask, number, "edit_failed", reason, changed, started)
                snapshots.append(AttemptSnapshot(shown, reason, diff, 0.0))
                last = LastAttempt(shown, diff, reason)
                continue
            verdict = await self._verify()
            p.runlog.event(
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
            if verdict.passed:
                sha = self._commit(task, subtask, changed)
                subtask.status, subtask.commit = "done", sha
                self._record(plan, subtask, number, "passed", verdict.summary(), changed, started, verdict)
                return _SubtaskResult("passed", verdict.summary(), commit=sha)
            diff = p.repo.diff(base, before, max_bytes=DIFF_BYTES)
            reflection_id = await self._reflect(task, subtask, number, verdict, changed, diff, previous_signature)
            self._record(
                plan, subtask, number, "failed", verdict.summary(), changed, started, verdict, reflection_id
            )
            assert verdict.digest is not None
            previous_signature = verdict.digest.signature
            snapshots.append(AttemptSnapshot(shown, verdict.summary(), diff, verdict.score))
            last = LastAttempt(shown, diff, verdict.digest.text)
        return self._escalate(task, plan, subtask, base, before, snapshots)

    def _put_back(
        self, plan: SubtaskPlan, subtask: Subtask, base: str, before: set[str], status: str, reason: str
    ) -> _SubtaskResult:
        """Stop without blaming the task: undo the subtask, leave it pending."""
        self.p.repo.restore(base, before)
        subtask.status = "pending"
        self._save(plan)
        return _SubtaskResult(status, reason)  # type: ignore[arg-type]

    def _prompt(self, task: Task, plan: SubtaskPlan, subtask: Subtask, last: LastAttempt | None) -> str:
        block = ""
        service = self.p.reflections
        if service is not None and last is not None:
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

    def _commit(self, task: Task, subtask: Subtask, changed: list[str]) -> str | None:
        if not changed:
            self.p.runlog.event("no_changes", taskId=task.id, subtaskId=subtask.id)
            return None
        sha = self.p.repo.commit(changed, f"{task.id}: {subtask.title}")
        self.p.runlog.event("committed", taskId=task.id, subtaskId=subtask.id, sha=sha, files=changed)
        return sha

    async def _reflect(
        self,
        task: Task,
        subtask: Subtask,
        attempt: int,
        verdict: Verdict,
        changed: list[str],
        diff: str,
        previous_signature: str | None,
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
            files_modified=changed,
            diff=diff,
            previous_signature=previous_signature,
        )
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
        number: int,
        outcome: str,
        summary: str,
        changed: list[str],
        started: float,
        verdict: Verdict | None = None,
        reflection_id: str | None = None,
    ) -> None:
        digest = verdict.digest if verdict else None
        subtask.attempts.append(
            AttemptRecord(
                number=number,
                outcome=outcome,
                failure_type=verdict.failure_type if verdict and verdict.failure_type else None,
                summary=summary,
                error_signature=digest.signature if digest else None,
                tests_passed=verdict.tests_passed if verdict else None,
                tests_failed=verdict.tests_failed if verdict else None,
                files_changed=changed,
                reflection_id=reflection_id,
                duration_s=round(time.monotonic() - started, 3),
            )
        )
        if outcome != "passed":
            subtask.failure_count += 1
            subtask.last_failure_reason = summary
        self._save(plan)

    def _save(self, plan: SubtaskPlan) -> None:
        plan.save(SubtaskPlan.path_for(self.p.project_dir, plan.task_id))

    def _escalate(
        self,
        task: Task,
        plan: SubtaskPlan,
        subtask: Subtask,
        base: str,
        before: set[str],
        snapshots: list[AttemptSnapshot],
    ) -> _SubtaskResult:
        p = self.p
        reflections = p.reflections.recent(subtask.id, 10) if p.reflections else []
        packet = write_packet(
            p.project_dir,
            task,
            subtask,
            snapshots=snapshots,
            reflections=reflections,
            meter=p.meter,
        )
        if p.config.failure_cleanup == "restore":
            p.repo.restore(base, before)
        subtask.status = "failed"
        self._save(plan)
        reason = (
            f"subtask {subtask.id} failed {len(snapshots)} attempt(s); last: "
            f"{subtask.last_failure_reason}; see {packet.relative_to(p.project_dir)}"
        )
        p.runlog.event(
            "escalated",
            taskId=task.id,
            subtaskId=subtask.id,
            packet=str(packet),
            restored=p.config.failure_cleanup == "restore",
            reason=reason,
        )
        return _SubtaskResult("escalated", reason, escalation=packet)

    def _stop(self, task: Task, plan: SubtaskPlan, subtask: Subtask, result: _SubtaskResult) -> TaskOutcome:
        p = self.p
        if result.status in ("model_unavailable", "budget"):
            p.board.reopen(task.id)
            p.runlog.event("task_reopened", taskId=task.id, reason=result.reason)
            return TaskOutcome(task.id, result.status, result.reason)
        p.board.block(task.id, result.reason)
        p.runlog.event("task_blocked", taskId=task.id, reason=result.reason)
        return TaskOutcome(task.id, "blocked", result.reason, escalation=result.escalation)
