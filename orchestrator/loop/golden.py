"""GoldenLoop: one task, start to finish.

preflight -> decompose -> each subtask's attempts (a `SubtaskRun`) -> close the task and
reflect on it for its next run (loop/learn.py), or block it when a subtask escalates, or
put it back to open when the run must stop (model unavailable, budget).

The loop owns no I/O policy of its own: git is `Repo`, files of state are `TaskBoard`
and `SubtaskPlan`, checks are `verify`, memory is `ReflectionService`, and every step
is an event in the `RunLog`.
"""

from __future__ import annotations

import time

from orchestrator.checks.convergence import StopReason
from orchestrator.checks.preflight import Baseline, preflight
from orchestrator.checks.waivers import Waivers
from orchestrator.loop.decompose import decompose, is_small
from orchestrator.loop.learn import notes_for, reflect_on_task
from orchestrator.loop.outcome import SubtaskResult, TaskOutcome
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.plan import SubtaskPlan
from orchestrator.loop.remember import (
    promote_rules_of,
    remember_decision,
    remember_task,
)
from orchestrator.loop.state import task_text
from orchestrator.loop.subtask import SubtaskRun
from orchestrator.processes import process_mark, session_started, task_mark
from orchestrator.recovery.journal import EarlySessions
from orchestrator.tasks import Task
from reflection.redact import redact


class GoldenLoop:
    def __init__(self, parts: LoopParts) -> None:
        self.p = parts
        self.attempts = 0  # of every subtask run so far
        self.reflections = 0

    async def run_task(self, task: Task) -> TaskOutcome:
        marking = process_mark.set(task_mark(self.p.project_dir, task.id))  # on every command it starts
        try:
            return await self._run_task(task)
        finally:
            process_mark.reset(marking)

    async def _run_task(self, task: Task) -> TaskOutcome:
        started = time.monotonic()
        p = self.p
        p.board.claim(task.id)
        p.runlog.event("task_started", taskId=task.id, title=task.title)
        baseline = await self._preflight(task)
        if isinstance(baseline, TaskOutcome):
            return self._finish(baseline, [], started)
        signatures = [baseline.verdict.digest.signature] if baseline and baseline.verdict.digest else []
        plan = await self._plan(task)
        commits: list[str] = [s.commit for s in plan.subtasks if s.commit]
        outcome = None
        waived: dict[str, None] = {}  # known failures still failing when a subtask passed, in order
        notes = notes_for(p, task)
        ran = self.attempts  # this task's attempts are the ones counted from here
        for subtask in plan.subtasks:
            if subtask.status == "done":
                continue
            run = SubtaskRun(p, task, plan, subtask, baseline, notes=notes, signatures=signatures)
            result = await run.run()
            self.attempts += run.attempt
            self.reflections += run.reflections
            if result.end != "passed":
                outcome = self._stop(task, result)
                break
            if result.commit:
                commits.append(result.commit)
            waived |= dict.fromkeys(result.waived)
        if outcome is None:
            reason = f"all {len(plan.subtasks)} subtask(s) passed verification"
            if waived:  # the user's waiver, said wherever the task's end is shown
                reason += f", apart from known failures waived in checks.knownFailures: {', '.join(waived)}"
            p.board.close(task.id, reason, commits)
            p.runlog.event("task_closed", taskId=task.id, commits=commits, reason=reason)
            outcome = TaskOutcome(task.id, "closed", reason, stop_reason=StopReason.PASSED)
            await reflect_on_task(p, task, commits, attempts=self.attempts - ran)
        await remember_task(p, task, plan, outcome)
        promote_rules_of(p, task)
        return self._finish(outcome, commits, started)

    def _finish(self, outcome: TaskOutcome, commits: list[str], started: float) -> TaskOutcome:
        outcome.commits = commits
        outcome.attempts, outcome.reflections = self.attempts, self.reflections
        outcome.meter, outcome.duration_s = self.p.meter, time.monotonic() - started
        return outcome

    async def _preflight(self, task: Task) -> Baseline | TaskOutcome | None:
        """Run the checks once before any model call; a broken environment blocks the task."""
        p, c = self.p, self.p.config
        if not (c.retry.preflight and c.checks.any):
            return None
        early = EarlySessions(p.project_dir, task.id)  # a kill now must not leave the checks running
        recording = session_started.set(early.add)
        try:
            baseline = await preflight(p.repo.root, c.checks, task_text=task_text(task))
        finally:
            session_started.reset(recording)
            early.end()
        failing = sorted(baseline.failing_tests)
        waived = Waivers.of(c.checks_config.known_failures).waived(failing)
        p.runlog.event(
            "preflight",
            taskId=task.id,
            passed=baseline.verdict.passed,
            failingAtBaseline=failing,
            waivedAtBaseline=waived,
            complete=baseline.complete,
            environmentError=baseline.environment_error,
            durationS=round(baseline.duration_s, 3),
        )
        if baseline.environment_error is None:
            return baseline
        reason = f"environment: {baseline.environment_error} No model was called."
        p.board.block(task.id, redact(reason))
        p.runlog.event("task_blocked", taskId=task.id, reason=reason, convergence=StopReason.ENVIRONMENT)
        return TaskOutcome(task.id, "blocked", reason, stop_reason=StopReason.ENVIRONMENT)

    async def _plan(self, task: Task) -> SubtaskPlan:
        p = self.p
        path = p.layout.plan(task.id)
        plan = SubtaskPlan.load(path)
        if plan is not None:  # resumed, even when every subtask is done (a commit recovered after a kill)
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
        if len(plan.subtasks) > 1:
            remember_decision(p, task, f"split the task into {len(plan.subtasks)} subtasks: "
                              + "; ".join(s.title for s in plan.subtasks), ["do the task as one subtask"],
                              f"the task is longer than decomposeMinChars ({p.config.decompose_min_chars} "
                              "characters), and smaller steps are each verified and committed on their own")
        p.runlog.event(
            "decomposed",
            taskId=task.id,
            source=plan.source,
            subtasks=[{"id": s.id, "title": s.title, "aboutTests": s.about_tests} for s in plan.subtasks],
        )
        return plan

    def _stop(self, task: Task, result: SubtaskResult) -> TaskOutcome:
        p = self.p
        if result.end == "escalated":
            p.board.block(task.id, redact(result.reason))  # tasks.jsonl is shared: no secrets
            p.runlog.event("task_blocked", taskId=task.id, reason=result.reason, convergence=result.stop_reason)
            return TaskOutcome(task.id, "blocked", result.reason, escalation=result.escalation,
                               stop_reason=result.stop_reason, only_before=result.only_before)
        p.board.reopen(task.id)
        p.runlog.event("task_reopened", taskId=task.id, reason=result.reason, convergence=result.stop_reason)
        status = "budget" if result.end == "budget" else "model_unavailable"
        return TaskOutcome(task.id, status, result.reason, stop_reason=result.stop_reason)
