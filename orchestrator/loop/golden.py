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
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from orchestrator.checks.convergence import StopReason
from orchestrator.checks.preflight import Baseline
from orchestrator.checks.waivers import Waivers
from orchestrator.judging.about import about
from orchestrator.judging.export import JudgeTree, JudgeTrees
from orchestrator.judging.judge import Ground, judge_base
from orchestrator.judging.recorded import BaselineRecords
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
        with self._judges() as tree:
            records = BaselineRecords.of(p.project_dir, p.config)
            ground = Ground.of(p.repo, tree, p.config, checkout=p.project_dir, records=records)
            base = await anyio.to_thread.run_sync(p.repo.tree_of, p.repo.head())
            baseline = await self._preflight(task, ground, base)
            if isinstance(baseline, TaskOutcome):
                return self._finish(baseline, [], started)
            plan = await self._plan(task)
            self._again_if_not_done(task, plan, baseline)
            outcome, commits = await self._subtasks(task, plan, ground, baseline, base)
        await remember_task(p, task, plan, outcome)
        promote_rules_of(p, task)
        return self._finish(outcome, commits, started)

    @contextmanager
    def _judges(self) -> Iterator[JudgeTree]:
        """The judge's tree of this task: leased from the run's, or (a loop built without a
        session, a library user's) one of its own, removed when the task ends."""
        if self.p.judges is not None:
            with self.p.judges.lease() as tree:
                yield tree
            return
        own = JudgeTrees(self.p.repo)
        try:
            with own.lease() as tree:
                yield tree
        finally:
            own.close()

    async def _subtasks(self, task: Task, plan: SubtaskPlan, ground: Ground, baseline: Baseline | None,
                        base: str) -> tuple[TaskOutcome, list[str]]:
        p = self.p
        signatures = [baseline.verdict.digest.signature] if baseline and baseline.verdict.digest else []
        commits: list[str] = [s.commit for s in plan.subtasks if s.commit]
        notes = notes_for(p, task)
        ran = self.attempts  # this task's attempts are the ones counted from here
        last: SubtaskResult | None = None
        for subtask in plan.subtasks:
            if subtask.status == "done":
                continue
            final = all(other.status == "done" for other in plan.subtasks if other is not subtask)
            run = SubtaskRun(p, task, plan, subtask, baseline, notes=notes, signatures=signatures,
                             ground=ground, base_tree=base, final=final)
            result = await run.run()
            self.attempts += run.attempt
            self.reflections += run.reflections
            if result.end != "passed":
                return self._stop(task, result), commits
            if result.commit:
                commits.append(result.commit)
            last = result
        reason = f"all {len(plan.subtasks)} subtask(s) passed verification"
        if last is not None and last.verdict is not None:
            reason += f" ({last.verdict})"
        if last is not None and last.waived:  # the user's waiver, said wherever the task's end is shown
            reason += f", apart from known failures waived in checks.knownFailures: {', '.join(last.waived)}"
        p.board.close(task.id, redact(reason), commits)
        p.runlog.event("task_closed", taskId=task.id, commits=commits, reason=reason,
                       verdict=last.parts if last is not None else None)
        outcome = TaskOutcome(task.id, "closed", reason, stop_reason=StopReason.PASSED,
                              verdict=last.parts if last is not None else None,
                              others=last.others if last is not None else ())
        await reflect_on_task(p, task, commits, attempts=self.attempts - ran)
        return outcome, commits

    def _again_if_not_done(self, task: Task, plan: SubtaskPlan, baseline: Baseline | None) -> None:
        """A plan whose subtasks are all done, resumed while a test the task is about still
        fails (a reopen after the user unwaived it): its last subtask runs again. A task is
        never closed with 0 attempts on a base whose own run says it is not done."""
        if not plan.subtasks or any(s.status != "done" for s in plan.subtasks) or baseline is None:
            return
        topic = about(task_text(task), task.type, baseline.failing_tests, waivers=Waivers.of(
            self.p.config.checks_config.known_failures))
        if topic.tests:
            plan.subtasks[-1].status = "pending"
            self.p.runlog.event("plan_not_done", taskId=task.id, failing=sorted(topic.tests)[:20])

    def _finish(self, outcome: TaskOutcome, commits: list[str], started: float) -> TaskOutcome:
        outcome.commits = commits
        outcome.attempts, outcome.reflections = self.attempts, self.reflections
        outcome.meter, outcome.duration_s = self.p.meter, time.monotonic() - started
        return outcome

    async def _preflight(self, task: Task, ground: Ground, base: str) -> Baseline | TaskOutcome | None:
        """Run the checks on the task's base once, before any model call (in the judge's
        tree, on the commit: what every verdict compares with); a broken environment
        blocks the task."""
        p, c = self.p, self.p.config
        if not (c.retry.preflight and c.checks.any):
            return None
        early = EarlySessions(p.project_dir, task.id)  # a kill now must not leave the checks running
        recording = session_started.set(early.add)
        try:
            baseline = await judge_base(ground, base, task_text(task))
        finally:
            session_started.reset(recording)
            early.end()
        failing = sorted(baseline.failing_tests)
        topic = about(task_text(task), task.type, failing, waivers=ground.waivers)
        p.runlog.event(
            "preflight",
            taskId=task.id,
            passed=baseline.verdict.passed,
            failingAtBaseline=failing,
            waivedAtBaseline=ground.waivers.waived(failing),
            aboutTask=sorted(topic.tests),
            aboutRule=topic.rule,
            complete=baseline.complete,
            testIds=baseline.reported,
            recorded=baseline.recorded,
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
                               stop_reason=result.stop_reason, only_before=result.only_before, verdict=result.parts)
        p.board.reopen(task.id)
        p.runlog.event("task_reopened", taskId=task.id, reason=result.reason, convergence=result.stop_reason)
        status = result.end if result.end in ("budget", "usage_limit") else "model_unavailable"
        return TaskOutcome(task.id, status, result.reason, stop_reason=result.stop_reason, resume_at=result.resume_at)
