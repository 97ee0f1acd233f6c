"""One subtask's attempts in one run: the golden loop's inner circle.

    prepare -> execute -> guard -> judge -> review -> commit     (passed: done)
        ^                                    |
        +---- reflect, and retry <-----------+ (failed: loop/failure.py)

`SubtaskRun.attempt_once` is one turn of that circle, a step per line (loop/steps.py);
a step that ends the attempt early raises an outcome (loop/attempt.py), and `attempts`
does what it says. What the attempts share lives on the `SubtaskState` (loop/state.py);
what belongs to one attempt, on its `Attempt`. Retries start from the failed attempt's
tree (with `retry.fresh`, from the base, as independent samples). The tree is changed in three ways only:

- **restore**: back to the subtask's base commit (the user's dirty files untouched);
- **roll back**: back to the tree an earlier attempt left (None: the base);
- **put back**: the subtask stops without blame (budget, model down): tree restored,
  subtask pending, to be run again later.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from orchestrator.checks.convergence import StopReason
from orchestrator.checks.preflight import Baseline
from orchestrator.judging.judge import Ground
from orchestrator.judging.judgement import Judgement
from orchestrator.judging.words import blocked
from orchestrator.loop.attempt import Escalate, KeepBest, PutBack, PutBackEnd, Retry
from orchestrator.loop.escalation import write_packet
from orchestrator.loop.judging_files import JudgingFiles
from orchestrator.loop.outcome import SubtaskResult
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.plan import Subtask, SubtaskPlan
from orchestrator.loop.reflecting import recalled, settle_left_pending, settle_pending
from orchestrator.loop.remember import lessons_for
from orchestrator.loop.state import SubtaskState
from orchestrator.loop.steps import execute, guard, judge, prepare, review
from orchestrator.processes import escaped, escaped_pids, session_started
from orchestrator.recovery.journal import Heartbeat, Journal
from orchestrator.tasks import Task
from reflection.pattern.history import select_best


class SubtaskRun:
    def __init__(self, parts: LoopParts, task: Task, plan: SubtaskPlan, subtask: Subtask,
                 baseline: Baseline | None, *, ground: Ground, base_tree: str, final: bool, notes: str = "",
                 signatures: Sequence[str] = ()) -> None:
        self.state = SubtaskState(parts, task, plan, subtask, baseline, notes=notes, signatures=signatures,
                                  ground=ground, base_tree=base_tree, final=final)

    @property
    def attempt(self) -> int:
        """This run's attempts so far."""
        return self.state.attempt

    @property
    def reflections(self) -> int:
        """Reflections this run wrote."""
        return self.state.reflections

    async def run(self) -> SubtaskResult:
        s = self.state
        await self.begin()
        s.strangers = escaped_pids()  # not this subtask's: never recorded, never killed
        recording = session_started.set(s.journal.add_process_group)
        try:
            with Heartbeat(s.journal, also=self.record_escapees):
                result = await self.attempts()
        finally:
            session_started.reset(recording)
        settle_pending(s, None)  # a reflection its retry never wrote (reflexion.oneCall)
        s.journal.end()
        return result

    async def begin(self) -> None:
        s, p = self.state, self.state.p
        dirty = await s.tree.start()
        # On disk before anything changes: what recovery needs if this process is killed.
        s.journal = Journal.start(p.project_dir, s.task.id, s.subtask.id, s.tree.base)
        s.judging = JudgingFiles.read(p.repo.root, p.config, p.repo.common_dir)
        s.linked = await anyio.to_thread.run_sync(p.judges.provided.contents) if s.shares_links else {}
        s.subtask.status, s.subtask.base_commit = "in_progress", s.tree.base
        s.subtask.dirty_before = sorted(dirty)
        s.save()
        s.lessons, s.lesson_ids = lessons_for(p, s.task, s.subtask, s.signatures)
        settle_left_pending(s)  # a killed run's last failure still gets its reflection

    def record_escapees(self) -> None:
        """A `setsid` child is recorded while it is still attributable (called by the heartbeat)."""
        for pid, sid in escaped():
            if pid not in self.state.strangers:
                self.state.journal.add_process_group(sid)

    # -- the circle ---------------------------------------------------------------------

    async def attempts(self) -> SubtaskResult:
        s = self.state
        while s.attempt < s.max_attempts:
            try:
                return await self.attempt_once()
            except Retry:
                if s.passing and s.passing[-1].iteration < s.attempt:  # a revision that did not pass
                    return await self.keep_best("the revision did not pass its checks")
            except Escalate as stop:
                return await self.escalate(stop.why)
            except PutBack as stop:
                return await self.put_back(stop.end, stop.reason, stop.resume_at)
            except KeepBest as stop:
                return await self.keep_best(stop.why)
        why = StopReason.MAX_RETRIES
        if s.decision is not None and s.decision.action == "rollback" and s.converges:
            why = StopReason.REGRESSION  # the last retry made things worse
        return await self.escalate(why)

    async def attempt_once(self) -> SubtaskResult:
        """One attempt, a step per line; it passed if no step ended it."""
        s = self.state
        attempt = prepare(s)
        executed = await execute(s, attempt)
        await guard(s, attempt, executed)
        verdict, judged = await judge(s, attempt, executed)
        summary = await review(s, attempt, verdict, judged, executed)
        result = await self.accept(summary, judged)
        s.record(attempt, judged.outcome, summary, verdict, executed=executed, judged=judged)
        return result

    # -- ending -------------------------------------------------------------------------

    async def accept(self, summary: str, judged: Judgement | None) -> SubtaskResult:
        sha = await self.commit(judged.tree if judged else None)
        sub = self.state.subtask
        sub.status, sub.commit, sub.convergence = "done", sha, StopReason.PASSED
        self.state.save()
        parts = judged.parts if judged else None
        line = judged.summary if judged and judged.outcome == "flaky" else parts.line() if parts else None
        return SubtaskResult("passed", summary, commit=sha, stop_reason=StopReason.PASSED,
                             waived=judged.waived if judged else (), verdict=line,
                             parts=parts.as_event() if parts else None, others=parts.others if parts else ())

    async def commit(self, judged: str | None) -> str | None:
        """The tree the checks passed, committed exactly (`judged`, from the judge)."""
        s = self.state
        if not s.changed:
            s.event("no_changes")
            return None
        message, paths = f"{s.task.id}: {s.subtask.title}", s.changed
        sha = await s.tree.commit(paths, message, judged=judged)
        s.event("committed", sha=sha, files=s.changed)
        return sha

    async def keep_best(self, why: str) -> SubtaskResult:
        """Commit the best passing version after a revision that was worse."""
        s = self.state
        best = select_best(s.passing, "highest_score")
        await s.roll_back_to(best.iteration)
        s.event("review_kept_best", attempt=s.attempt, kept=best.iteration, reason=why,
                score=round(best.evaluation.overall_score, 4))
        kept = s.earlier.judgements.get(best.iteration)
        return await self.accept(f"attempt {best.iteration} kept: {why}", kept)

    async def escalate(self, why: StopReason) -> SubtaskResult:
        s = self.state
        if s.passing:  # only a revision can end this way after a pass: keep the pass
            return await self.keep_best(f"the revision stopped ({why.value})")
        p, sub = s.p, s.subtask
        settle_pending(s, None)  # the packet shows every failure's reflection
        packet = write_packet(p.project_dir, s.task, sub, snapshots=s.earlier.snapshots,
                              reflections=recalled(s, 10), meter=p.meter, stop_reason=why,
                              fresh=p.config.retry.fresh)
        restored = p.config.failure_cleanup == "restore"
        if restored:
            await s.tree.restore()
        sub.status, sub.convergence = "failed", why
        s.save()
        best = s.best_judgement()
        see = f"see {packet.relative_to(p.project_dir)}"
        only_before = best.only_before if best is not None and why != StopReason.ENVIRONMENT else ()
        if only_before:
            reason = (f"{blocked(s.task.id, only_before, s.judge.about().rule)}; subtask {sub.id} stopped ({why.value}) "
                      f"after {s.attempt} attempt(s) ({see})")
        else:
            last = best.summary if best is not None else sub.last_failure_reason
            reason = (f"subtask {sub.id} stopped ({why.value}) after {s.attempt} attempt(s); "
                      f"best: {last}; {see}")
        s.event("escalated", convergence=why, packet=str(packet), restored=restored, reason=reason)
        parts = best.parts.as_event() if best is not None and best.parts is not None else None
        return SubtaskResult("escalated", reason, escalation=packet, stop_reason=why, only_before=only_before,
                             parts=parts)

    async def put_back(self, end: PutBackEnd, reason: str, resume_at: float | None = None) -> SubtaskResult:
        """Stop without blaming the task: restore the tree, leave the subtask pending."""
        s = self.state
        if s.passing:  # a revision cut short: the passing version is the subtask's work
            return await self.keep_best(reason)
        await s.tree.restore()
        why = StopReason.BUDGET if end == "budget" else None
        s.subtask.status, s.subtask.convergence = "pending", why
        s.save()
        return SubtaskResult(end, reason, stop_reason=why, resume_at=resume_at)
