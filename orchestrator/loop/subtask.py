"""One subtask's attempts in one run: execute -> verify -> commit, or reflect and retry.

A `SubtaskRun` owns everything its attempts learn (the tree each one left, how each
failed, the progress tracker, the user's own files), so each step reads as "the run does
X". Retries start from the failed attempt's tree. The tree is changed in three ways only:

- **restore**: back to the subtask's base commit (the user's dirty files untouched);
- **roll back**: back to the tree an earlier attempt left (None: the base);
- **put back**: the subtask stops without blame (budget, model down): tree restored,
  subtask pending, to be run again later.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

import anyio

from orchestrator.budget import BudgetExceeded
from orchestrator.checks.convergence import AttemptScore, Decision, ProgressTracker, StopReason
from orchestrator.checks.judge import PASSING_OUTCOMES, Judge, Judgement, still_failing_sentence
from orchestrator.checks.preflight import Baseline
from orchestrator.checks.review import Review, review_block
from orchestrator.checks.verify import Verdict, verify
from orchestrator.checks.waivers import Waivers
from orchestrator.config import ProjectConfig
from orchestrator.executors import ExecutionRequest, ExecutionResult
from orchestrator.layout import FOLDER
from orchestrator.loop.attempt_history import attempt_version, write_attempt
from orchestrator.loop.escalation import AttemptSnapshot, write_packet
from orchestrator.loop.outcome import SubtaskResult
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.plan import AttemptOutcome, AttemptRecord, Subtask, SubtaskPlan
from orchestrator.loop.prompt import LastAttempt, attempt_prompt, baseline_block, checks_block, start_over
from orchestrator.loop.remember import lessons_for, record_use, remember_decision
from orchestrator.loop.user_files import UserFiles
from orchestrator.processes import escaped, escaped_pids, session_started
from orchestrator.recovery.journal import Heartbeat, Journal
from orchestrator.recovery.recovered import Keeper, kept_event
from orchestrator.tasks import Task
from reflection.fileio import atomic_write
from reflection.llm import ModelError
from reflection.meter import Meter
from reflection.pattern.evaluation import ReflectionEvaluation
from reflection.pattern.history import ReflectionVersion, select_best
from reflection.redact import redact
from reflection.schema import FailureContext, Reflection
from reflection.text import cut_block

DIFF_BYTES = 200_000  # bound on a diff kept in memory or sent anywhere
# Asking again after a retry returned an earlier attempt's code: greedy decoding of much
# the same prompt tends to give the same answer, so the second ask samples.
REASK_TEMPERATURE = 0.7
REPLY_LOGGED = 4_000  # characters of an unapplied reply kept in the run log, to see why
# A prompt too long for the model is this task's problem: block it, do not stop the run.
TASK_MODEL_ERRORS = frozenset({"context_window"})
NO_CHANGE = ("the attempt changed no file, so it cannot have done the task (a task that only checks "
             "the repository is marked verification-only); make the change the task asks for")
T = TypeVar("T")
AGENT_FIELDS = ("agent", "sessionId", "finalMessage", "costUsd", "model")  # a coding agent's report, kept


class SubtaskRun:
    def __init__(self, parts: LoopParts, task: Task, plan: SubtaskPlan, subtask: Subtask,
                 baseline: Baseline | None, *, notes: str = "", signatures: Sequence[str] = ()) -> None:
        self.p, self.task, self.plan, self.subtask = parts, task, plan, subtask
        self.notes = notes  # the task's notes from earlier runs, shown before its description
        self.signatures = signatures  # of the checks failing before the task: lessons about them rank higher
        self.lessons, self.lesson_ids = "", []  # other tasks' lessons, for this run's first attempt
        c = parts.config
        self.max_attempts = c.reflexion.max_retries + 1
        self.baseline = baseline
        self.waivers = Waivers.of(c.checks_config.known_failures)
        self.judge = Judge(parts.repo.root, c.checks, c.retry, baseline=baseline, waivers=self.waivers,
                           task_text=task_text(task), about_tests=subtask.about_tests)
        r = c.retry
        self.tracker = ProgressTracker(plateau_window=r.plateau_window, stop_on_plateau=r.stop_on_plateau,
                                       stop_on_oscillation=r.stop_on_oscillation,
                                       rollback_regressions=r.rollback_regressions,
                                       improvement_threshold=r.improvement_threshold if r.stop_on_diminishing_returns else 0.0)
        self.attempt = 0  # this run's attempts: "attempt k/N"
        self.reflections = 0  # reflections written
        self.base = ""  # the commit the subtask started from
        self.user_files = UserFiles(parts.repo.root, set())
        self.journal: Journal  # written by `begin`, before the first attempt
        # What judges an attempt, as the run read it: project.json and the prompt files it names.
        self.judging: dict[str, bytes | None] = {}
        self.strangers: set[int] = set()  # processes already outside their session: not ours
        self.last: LastAttempt | None = None  # what the next prompt says about the last attempt
        self.changed: list[str] = []  # the tree's changes against the base; the next attempt's hints
        self.start: int | None = None  # the attempt whose tree the next attempt starts from; None: base
        self.snapshots: list[AttemptSnapshot] = []  # for the escalation packet
        self.patches: dict[int, str] = {}  # attempt -> its tree, as a binary patch against the base
        self.failed_states: dict[str, int] = {}  # tree hash -> the failed attempt that left it
        self.failures: dict[int, str] = {}  # attempt -> what its retry was told
        self.judgements: dict[int, Judgement] = {}  # attempt -> how its verdict was judged
        self.scores: dict[int, AttemptScore] = {}  # attempt -> as the tracker saw it
        self.decision: Decision | None = None  # the tracker's last word
        self.previous_signature: str | None = None
        self.current_patch: str | None = None  # the tree of the attempt in flight, once made
        self.passing: list[ReflectionVersion] = []  # reviewed attempts that passed the checks
        self.revisions = 0  # revision attempts a review asked for
        self.review: Review | None = None  # of the attempt in flight, once reviewed
        self.applying: list[str] = []  # what the attempt in flight was asked to improve
        self.next_applying: list[str] = []  # what the next attempt will be asked to improve
        self.spent = Meter()  # the task's meter when the attempt in flight started
        self.agent_run: dict[str, Any] = {}  # a coding agent's account of the attempt in flight

    async def run(self) -> SubtaskResult:
        await self.begin()
        self.strangers = escaped_pids()  # not this subtask's: never recorded, never killed
        recording = session_started.set(self.journal.add_process_group)
        try:
            with Heartbeat(self.journal, also=self.record_escapees):
                result = await self.attempts()
        finally:
            session_started.reset(recording)
        self.journal.end()
        return result

    async def attempts(self) -> SubtaskResult:
        while self.attempt < self.max_attempts:
            result = await self.next_attempt()
            if result is not None:
                return result
            if self.passing and self.passing[-1].iteration < self.attempt:  # a revision that did not pass
                return await self.keep_passing("the revision did not pass its checks")
        why = StopReason.MAX_RETRIES
        if self.decision is not None and self.decision.action == "rollback":
            why = StopReason.REGRESSION  # the last retry made things worse
        return await self.escalate(why)

    async def begin(self) -> None:
        p = self.p
        self.base = await self.git(p.repo.head)
        # The user's own dirty paths (untracked, or modified with --allow-dirty) are
        # never counted, committed or restored.
        dirty = set(await self.git(p.repo.dirty_paths))
        self.user_files = UserFiles(p.repo.root, dirty)
        # On disk before anything changes: what recovery needs if this process is killed.
        self.journal = Journal.start(p.project_dir, self.task.id, self.subtask.id, self.base, p.repo.root,
                                     self.user_files.content, dirty)
        self.judging = {rel: _read(p.repo.root / rel) for rel in judging_files(p.config)}
        self.subtask.status, self.subtask.base_commit = "in_progress", self.base
        self.subtask.dirty_before = sorted(dirty)
        self.save()
        self.lessons, self.lesson_ids = lessons_for(p, self.task, self.subtask, self.signatures)

    def record_escapees(self) -> None:
        """A `setsid` child is recorded while it is still attributable (called by the heartbeat)."""
        for pid, sid in escaped():
            if pid not in self.strangers:
                self.journal.add_process_group(sid)

    # -- one attempt ------------------------------------------------------------------

    async def next_attempt(self) -> SubtaskResult | None:
        """One attempt; a result ends the subtask, None means: retry."""
        p = self.p
        stop = p.budget_check() if p.budget_check else None
        if stop:
            return await self.put_back("budget", stop)
        self.attempt += 1
        self.review, self.spent, self.agent_run = None, p.meter.copy(), {}
        self.applying, self.next_applying = self.next_applying, []
        self.journal.remember_tree(p.repo.root, self.changed)  # the tree this attempt starts from
        prompt = self.prompt(self.last)
        self.event("attempt_started", attempt=self.attempt, of=self.max_attempts, promptChars=len(prompt))
        started = time.monotonic()
        request = ExecutionRequest(repo_dir=p.repo.root, prompt=prompt, attempt=self.attempt, hint_paths=self.changed)
        try:
            executed, same_as = await self.execute(request)
        except BudgetExceeded as exc:  # a model call the budget could not cover: refused, never made
            return await self.put_back("budget", str(exc))
        except ModelError as exc:
            if exc.kind in TASK_MODEL_ERRORS:  # this task's prompt is the problem: retries cannot help
                self.record("model_refused", f"the model refused this task's prompt: {exc}", started)
                return await self.escalate(StopReason.ENVIRONMENT)
            return await self.put_back("model_unavailable", f"the model failed: {exc}")
        if executed.usage and executed.usage.get("agent"):  # its session id and last word, for the user
            self.agent_run = {k: v for k, v in executed.usage.items() if k in AGENT_FIELDS}
            self.event("agent_run", attempt=self.attempt, **self.agent_run)
        folded = await self.git(self.p.repo.fold_commits_since, self.base)
        if folded:  # the agent committed its own work: still an attempt, judged like any other
            self.event("agent_commits_folded", attempt=self.attempt, paths=folded)
        self.changed = await self.changed_files()
        await self.git(p.repo.hold, self.changed)  # its output, reproducible from now on: no undo loses it
        # The diff costs several git calls: made when a retry, a reflection or the test
        # integrity check (an attempt that touched test files) needs it.
        diff = await self.diff() if not executed.ok or self.judge.touches_tests(self.changed) else ""
        touched = self.user_files.keep(self.keep)
        if touched:  # their edits cannot be told from the user's: never ours to keep
            return await self.touched_user_files(touched, started)
        tampered = self.put_back_judging()
        if tampered:  # the checks must stay the ones the run read, whatever the agent wrote
            self.event("config_tampered", attempt=self.attempt)
            judged = Judgement("integrity", tampered, failure=tampered)
            self.judgements[self.attempt] = judged
            self.log_verdict(Verdict(passed=False, steps=[]), judged)
            return await self.failed(Verdict(passed=False, steps=[]), judged, executed, started, diff)
        if not executed.ok and executed.failure_kind == "environment":  # no retry can install it
            self.record("environment", executed.failure_summary(), started, executed=executed)
            return await self.escalate(StopReason.ENVIRONMENT)
        if not executed.ok:  # nothing ran: say exactly why, and how to get it right
            await self.not_applied(executed, started, diff)
            return None
        if same_as is not None:  # a failed attempt's code again: its verdict is known
            return await self.repeated(same_as, executed, started)
        return await self.judge_attempt(executed, started, diff)

    async def judge_attempt(self, executed: ExecutionResult, started: float, diff: str) -> SubtaskResult | None:
        verdict = await verify(self.p.repo.root, self.p.config.checks)
        judged = await self.judge.judge(verdict, self.changed, diff)
        if judged.passed and not self.changed and not self.task.verification_only:
            judged = Judgement("no_change", NO_CHANGE, failure=NO_CHANGE)
        self.judgements[self.attempt] = judged
        self.log_verdict(verdict, judged)
        if judged.passed:
            self.current_patch = self.current_patch if self.current_patch is not None else await self.snapshot()
            if self.p.review is not None and self.changed:
                return await self.reviewed(verdict, judged, executed, started)
            result = await self.accept(judged.summary, judged.waived)
            self.record(judged.outcome, judged.summary, started, verdict, executed=executed)
            return result
        if self.passing:  # a revision that broke the checks: the passing version stands
            self.record(judged.outcome, judged.summary, started, verdict, executed=executed)
            return await self.keep_passing(f"the revision failed its checks ({judged.summary})")
        return await self.failed(verdict, judged, executed, started, diff or await self.diff())

    async def accept(self, summary: str, waived: tuple[str, ...] = ()) -> SubtaskResult:
        sha = await self.commit()
        self.subtask.status, self.subtask.commit, self.subtask.convergence = "done", sha, StopReason.PASSED
        self.save()
        return SubtaskResult("passed", summary, commit=sha, stop_reason=StopReason.PASSED, waived=waived)

    # -- the review gate ----------------------------------------------------------------

    async def reviewed(self, verdict: Verdict, judged: Judgement, executed: ExecutionResult,
                       started: float) -> SubtaskResult | None:
        """Score a passing attempt; commit the best passing version, or ask for one revision."""
        gate, settings = self.p.review, self.p.config.review
        assert gate is not None
        diff = await self.diff()
        review = self.review = await gate.review(task=task_text(self.task), diff=diff, waived=judged.outcome != "passed",
                                                 tests_touched=self.judge.touches_tests(self.changed))
        self.event("reviewed", attempt=self.attempt, threshold=settings.success_threshold, **review.as_event())
        best = select_best([*self.passing, self._version(review.evaluation)], "highest_score")
        revise = (not review.evaluation.satisfactory and self.revisions < settings.revisions
                  and self.attempt < self.max_attempts and best.iteration == self.attempt)
        kept = best.iteration == self.attempt and not revise
        summary = f"{judged.summary}; review {review.score:.2f}"
        self.patches[self.attempt] = self.current_patch or ""
        self.passing.append(self._version(review.evaluation))
        if kept:
            if not review.evaluation.satisfactory:  # kept, yet short of the bar: no revision is left
                self.event("review_accepted_low", attempt=self.attempt, score=round(review.score, 4),
                           threshold=settings.success_threshold, why="no revision left")
            result = await self.accept(summary, judged.waived)
            self.record(judged.outcome, summary, started, verdict, executed=executed)
            return result
        self.record("reviewed", summary, started, verdict, executed=executed)
        if revise:
            self.revisions += 1
            self.start, self.next_applying = self.attempt, list(review.improvements)
            self.last = LastAttempt(self.attempt, diff, "\n".join(review_block(review, settings.success_threshold)),
                                    reviewed=True)
            self.event("revision_asked", attempt=self.attempt, score=round(review.score, 4),
                       improvements=review.improvements)
            return None
        return await self.keep_passing(f"its review scored {review.score:.2f}, below attempt "
                                       f"{best.iteration}'s {best.evaluation.overall_score:.2f}")

    async def keep_passing(self, why: str) -> SubtaskResult:
        """Commit the best passing version after a revision that was worse."""
        best = select_best(self.passing, "highest_score")
        await self.restore()
        await self.git(self.p.repo.apply_snapshot, self.patches[best.iteration])
        self.changed = await self.changed_files()
        self.event("review_kept_best", attempt=self.attempt, kept=best.iteration, reason=why,
                   score=round(best.evaluation.overall_score, 4))
        kept = self.judgements.get(best.iteration)
        return await self.accept(f"attempt {best.iteration} kept: {why}", kept.waived if kept else ())

    def _version(self, evaluation: ReflectionEvaluation) -> ReflectionVersion:
        return ReflectionVersion(iteration=self.attempt, output="", evaluation=evaluation,
                                 improvements_applied=list(self.applying))

    async def failed(self, verdict: Verdict, judged: Judgement, executed: ExecutionResult, started: float,
                     diff: str) -> SubtaskResult | None:
        """Track progress, reflect only when a retry follows, then stop or set the retry up."""
        decision = await self.progress(verdict, judged, diff)
        stop = self.stop_reason(judged, decision)
        reflection_id = None
        if stop is None and judged.reflect and self.attempt < self.max_attempts:  # only a retry reads it
            reflection_id = await self.reflect_on_verdict(verdict, judged, diff)
        self.record(judged.outcome, judged.summary, started, verdict, reflection_id, executed=executed)
        if stop is not None:
            return await self.escalate(stop)
        await self.set_up_retry(verdict, judged, decision, diff)
        return None

    def put_back_judging(self) -> str | None:
        """The config and prompt files as the run read them; why the attempt is rejected if it
        changed one (in a worktree, the worktree's copies)."""
        changed = [rel for rel, before in self.judging.items() if _read(self.p.repo.root / rel) != before]
        self.keep(changed)
        for rel in changed:
            path, before = self.p.repo.root / rel, self.judging[rel]
            if before is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write(path, before)
        if not changed:
            return None
        return (f"rejected: the attempt changed {', '.join(changed)}, which says how attempts are judged; "
                "it was put back. Nothing under .openagents/, and no prompt file, is an attempt's to change")

    async def progress(self, verdict: Verdict, judged: Judgement, diff: str) -> Decision | None:
        """Remember the failed attempt's tree and ask the tracker; None: nothing to track."""
        n = self.attempt
        score = 0.0 if judged.outcome in ("integrity", "no_change") else verdict.score
        self.snapshots.append(AttemptSnapshot(n, judged.summary, diff, score, failure=judged.failure))
        patch = self.current_patch if self.current_patch is not None else await self.snapshot()
        self.patches[n] = patch
        self.failed_states[_tree_key(patch)] = n
        if judged.escalate:
            return None
        attempt = AttemptScore.from_verdict(n, verdict)
        if judged.outcome in ("integrity", "no_change"):
            attempt = AttemptScore(n, 0.0, signature=judged.outcome)
        self.scores[n] = attempt
        return self.track(attempt, always_log=False)

    def stop_reason(self, judged: Judgement, decision: Decision | None) -> StopReason | None:
        """Why no retry follows this failed attempt, or None when one does."""
        if judged.escalate or decision is None:
            return StopReason.ENVIRONMENT
        if decision.action == "stop" and self.attempt < self.max_attempts:
            return decision.reason or StopReason.PLATEAU
        return None

    async def set_up_retry(self, verdict: Verdict, judged: Judgement, decision: Decision | None, diff: str) -> None:
        """Roll a regression back or undo a rejected attempt, and tell the next prompt why."""
        n = self.attempt
        failure = judged.failure
        if decision is not None and decision.repeated_signature:
            failure += "\n\nThis is exactly the failure of the attempt before: that fix did not work."
        if decision is not None and decision.action == "rollback" and decision.rollback_to in self.patches:
            best = next(s for s in self.snapshots if s.number == decision.rollback_to)
            await self.roll_back_to(best.number, event="rolled_back")
            remember_decision(self.p, self.task, f"rolled back to the tree of attempt {best.number}",
                              [f"keep the tree of attempt {self.attempt}"], decision.explanation)
            failure += (f"\n\nThis attempt was worse than attempt {best.number}, so the tree was put "
                        f"back to attempt {best.number}'s changes (shown above); improve on those.")
            diff = best.diff
        elif judged.outcome == "integrity":  # weakened tests must not stay for the next attempt
            await self.roll_back_to(self.start, event="attempt_undone")
            failure += (f"\n\nThat diff was undone: the tree is back to how it was before attempt "
                        f"{n}, tests included; make the tests pass by changing the code.")
        else:
            self.start = n
        self.previous_signature = verdict.digest.signature if verdict.digest else None
        self.failures[n] = failure
        self.last = LastAttempt(n, diff, failure)

    def track(self, attempt: AttemptScore, *, always_log: bool) -> Decision:
        decision = self.decision = self.tracker.record(attempt)
        if always_log or decision.action != "continue" or decision.repeated_signature:
            self.event("progress", attempt=self.attempt, **decision.as_event())
        return decision

    # -- replies that never reach the checks --------------------------------------------

    async def execute(self, request: ExecutionRequest) -> tuple[ExecutionResult, int | None]:
        """Run the executor; a retry that gives back a failed attempt's code is asked once more,
        from the subtask's start, told how that code failed but not shown it.

        Returns the result and, when its tree is still one a failed attempt left, that
        attempt's number: verifying it again would only repeat a known verdict.
        """
        executed = await self.p.executor.execute(request)
        same_as = await self.same_as_failed(executed)
        if same_as is None or not self.p.config.retry.reask_repeats:
            return executed, None
        self.event("repeat", attempt=self.attempt, sameAs=same_as, action="asked again")
        await self.roll_back_to(None)
        block = start_over(same_as, self.failures.get(same_as, ""))
        again = request.model_copy(
            update={"prompt": f"{self.prompt(None)}\n\n{block}", "temperature": REASK_TEMPERATURE}
        )
        executed = await self.p.executor.execute(again)
        return executed, await self.same_as_failed(executed)

    async def same_as_failed(self, executed: ExecutionResult) -> int | None:
        """The failed attempt whose tree the executor's result reproduces, if any."""
        self.current_patch = None
        if not executed.ok or not self.failed_states:
            return None
        self.current_patch = await self.snapshot()
        return self.failed_states.get(_tree_key(self.current_patch))

    async def repeated(self, same_as: int, executed: ExecutionResult, started: float) -> SubtaskResult | None:
        """Count an attempt that reproduced attempt `same_as` even when asked not to.

        Its verdict is `same_as`'s, so progress is tracked as if it had run: a repeat is
        no improvement, and going back to an older attempt's code is oscillation.
        """
        n = self.attempt
        summary = f"gave back attempt {same_as}'s code unchanged, even when asked for a different one"
        if same_as in self.judgements:  # what that code does, so the task's reason names the failure
            summary += f"; that code: {self.judgements[same_as].summary}"
        self.event("repeat", attempt=n, sameAs=same_as, action="counted as a failed attempt")
        self.record("repeat", summary, started, executed=executed)
        earlier = next((s for s in self.snapshots if s.number == same_as), None)
        diff = earlier.diff if earlier else ""
        self.snapshots.append(AttemptSnapshot(n, summary, diff, earlier.score if earlier else 0.0,
                                              failure=self.failures.get(same_as, "")))
        self.patches[n] = self.patches.get(same_as, "")
        self.failures[n] = self.failures.get(same_as, "")
        if same_as in self.judgements:  # the same code fails the same way
            self.judgements[n] = self.judgements[same_as]
        await self.roll_back_to(None)  # the next attempt starts over, too
        self.start = None
        if same_as in self.scores:
            decision = self.track(dataclasses.replace(self.scores[same_as], number=n), always_log=True)
            if decision.action == "stop" and n < self.max_attempts:
                return await self.escalate(decision.reason or StopReason.PLATEAU)
        self.last = LastAttempt(n, diff, self.failures[n], repeat_of=same_as)
        return None

    async def not_applied(self, executed: ExecutionResult, started: float, diff: str) -> None:
        """An attempt whose reply could not be applied (or whose agent failed): nothing ran."""
        reason = executed.failure_summary()
        self.event("edit_failed", attempt=self.attempt, error=executed.error, failureKind=executed.failure_kind,
                   formatAsked=executed.format_asked, formatReceived=executed.format_received,
                   reply=cut_block(redact(executed.reply or ""), REPLY_LOGGED))
        reflection_id = None
        if executed.failure_kind == "edit" and self.attempt < self.max_attempts:  # a format failure is a lesson too
            reflection_id = await self.reflect_on_edit(executed)
        self.record("edit_failed", reason, started, reflection_id=reflection_id, executed=executed)
        failure = "\n".join(part for part in (executed.error, executed.repair) if part)
        self.snapshots.append(AttemptSnapshot(self.attempt, reason, diff, 0.0, failure=executed.error or ""))
        self.last = LastAttempt(self.attempt, diff, failure, applied=False,
                                agent_failed=executed.failure_kind == "agent")

    async def touched_user_files(self, touched: list[str], started: float) -> SubtaskResult:
        files = f"{touched[0]}, which holds" if len(touched) == 1 else f"{', '.join(touched)}, which hold"
        reason = (f"the attempt changed {files} uncommitted work of yours (put back as it was); goldenloop "
                  "never mixes its edits into your work: commit or stash it, set the task's status back "
                  "to open in .openagents/tasks.jsonl and run again")
        self.event("user_files_touched", paths=touched)
        self.record("user_files", reason, started)
        return await self.escalate(StopReason.ENVIRONMENT)

    # -- memory -------------------------------------------------------------------------

    async def reflect_on_verdict(self, verdict: Verdict, judged: Judgement, diff: str) -> str | None:
        """Reflect on what the attempt broke: the judge puts its own failures first and marks
        the tests that were failing before the task."""
        digest = verdict.digest
        if digest is None or verdict.failure_type is None:
            return None
        return await self.reflect(
            failure_type=verdict.failure_type, digest=judged.failure or digest.text,
            error_signature=digest.signature, failing_tests=list(judged.failing_tests),
            first_error=judged.first_error, preexisting_tests=list(judged.waived), diff=diff,
            previous_signature=self.previous_signature,
        )

    async def reflect_on_edit(self, executed: ExecutionResult) -> str | None:
        return await self.reflect(stage="edit", digest=executed.error) if executed.error else None

    async def reflect(self, **failure: Any) -> str | None:
        """Write a reflection on the attempt in flight; its id, or None (reflexion off or failing)."""
        service = self.p.reflections
        if service is None:
            return None
        number, s = self.subtask.next_number, self.subtask
        ctx = FailureContext(session_id=self.p.session_id, task_id=self.task.id, subtask_id=s.id,
                             attempt_number=number, subtask_title=s.title, subtask_description=s.description,
                             files_modified=self.changed, **failure)
        try:
            reflection = await service.reflect(ctx, previous=self.recalled(service.max_per_retry))
        except Exception as exc:  # noqa: BLE001 - memory trouble must not stop the loop
            self.event("reflection_failed", error=str(exc))
            return None
        self.reflections += 1
        self.next_applying = [reflection.suggestion, *reflection.action_items]
        self.event("reflection", attempt=number, id=reflection.id, category=reflection.category,
                   analysis=reflection.analysis, suggestion=reflection.suggestion, source=reflection.source,
                   path=service.location)
        return reflection.id

    def recalled(self, limit: int) -> list[Reflection]:
        """The subtask's last reflections, newest first. The plan says how many there are,
        so the store stops reading as soon as it has found them (it reads from the end)."""
        service = self.p.reflections
        written = sum(a.reflection_id is not None for a in self.subtask.attempts)
        if service is None or written == 0:
            return []
        return service.recent(self.subtask.id, min(limit, written))

    def prompt(self, last: LastAttempt | None) -> str:
        block = ""
        service = self.p.reflections
        if service is not None and (last is not None or self.subtask.attempts):  # incl. a killed run's
            block = service.format_for_prompt(self.recalled(service.max_per_retry))
        memory = self.p.memory
        c = self.p.config
        checks = "" if c.executor.kind == "builtin" else checks_block(  # an agent finds its own way: say the goal
            [*c.typecheck_commands, *c.test_commands])
        failing = sorted(self.baseline.failing_tests) if self.baseline else []
        before = baseline_block([t for t in failing if not self.waivers.entry_for(t)], self.waivers.waived(failing))
        checks = "\n\n".join(part for part in (checks, before) if part)
        return attempt_prompt(self.task, self.plan, self.subtask, last=last, reflections=block, notes=self.notes,
                              checks=checks,
                              lessons=self.lessons if self.attempt == 1 else "",
                              rules=memory.rules() if memory else "")

    # -- ending -------------------------------------------------------------------------

    async def escalate(self, why: StopReason) -> SubtaskResult:
        if self.passing:  # only a revision can end this way after a pass: keep the pass
            return await self.keep_passing(f"the revision stopped ({why.value})")
        p, s = self.p, self.subtask
        reflections = self.recalled(10)
        packet = write_packet(p.project_dir, self.task, s, snapshots=self.snapshots, reflections=reflections,
                              meter=p.meter, stop_reason=why)
        restored = p.config.failure_cleanup == "restore"
        if restored:
            await self.restore()
        s.status, s.convergence = "failed", why
        self.save()
        # The last judged tree: an attempt whose reply was not applied left it as it was.
        last = self.judgements[max(self.judgements)] if self.judgements else None
        if last is not None and last.only_before and why != StopReason.ENVIRONMENT:
            reason = f"{still_failing_sentence(self.task.id, last.only_before, self.waivers, task_text(self.task))} (see {packet.relative_to(p.project_dir)})"
        else:
            reason = (f"subtask {s.id} stopped ({why.value}) after {self.attempt} attempt(s); "
                      f"last: {s.last_failure_reason}; see {packet.relative_to(p.project_dir)}")
        self.event("escalated", convergence=why, packet=str(packet), restored=restored, reason=reason)
        return SubtaskResult("escalated", reason, escalation=packet, stop_reason=why)

    async def put_back(self, end: Literal["budget", "model_unavailable"], reason: str) -> SubtaskResult:
        """Stop without blaming the task: restore the tree, leave the subtask pending."""
        if self.passing:  # a revision cut short: the passing version is the subtask's work
            return await self.keep_passing(reason)
        await self.restore()
        why = StopReason.BUDGET if end == "budget" else None
        self.subtask.status, self.subtask.convergence = "pending", why
        self.save()
        return SubtaskResult(end, reason, stop_reason=why)

    async def commit(self) -> str | None:
        if not self.changed:
            self.event("no_changes")
            return None
        message, paths = f"{self.task.id}: {self.subtask.title}", self.changed
        sha = await anyio.to_thread.run_sync(functools.partial(
            self.p.repo.commit, paths, message,
            before_ref=lambda old, new: self.journal.committing(paths, old, new)))
        self.event("committed", sha=sha, files=self.changed)
        return sha

    # -- the tree -----------------------------------------------------------------------

    async def restore(self) -> None:
        kept: list[str] = []
        await self.git(self.p.repo.restore, self.base, self.user_files.paths,
                       lambda paths: kept.extend(self.keeper.keep(paths)))
        self.said_kept(kept)

    def keep(self, paths: list[str]) -> None:
        """Before `paths` are overwritten: the bytes nothing else holds, kept (orchestrator/recovery/recovered.py)."""
        self.said_kept(self.keeper.keep(paths))

    def said_kept(self, kept: list[str]) -> None:
        if kept:
            self.event("files_kept", **kept_event(self.keeper.folder, self.p.project_dir, kept))

    @functools.cached_property
    def keeper(self) -> Keeper:
        return Keeper(self.p.repo, self.p.layout.recovered(self.p.session_id))

    async def roll_back_to(self, attempt: int | None, *, event: str | None = None) -> None:
        """The tree as `attempt` left it; None: as the subtask found it."""
        await self.restore()
        if attempt is not None:
            await self.git(self.p.repo.apply_snapshot, self.patches[attempt])
        self.changed = await self.changed_files()
        if event == "rolled_back":
            self.start = attempt
            self.event(event, toAttempt=attempt)
        elif event is not None:
            self.event(event, attempt=self.attempt, toAttempt=attempt)

    async def changed_files(self) -> list[str]:
        return await self.git(self.p.repo.changed_files, self.base, self.user_files.paths)

    async def diff(self) -> str:
        return await self.git(self.p.repo.diff, self.base, self.user_files.paths, DIFF_BYTES)

    async def snapshot(self) -> str:
        return await self.git(self.p.repo.snapshot, self.base, self.user_files.paths)

    @staticmethod
    async def git(fn: Callable[..., T], *args: Any) -> T:
        """Git work off the event loop, so parallel workers' tests keep running."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args))

    # -- records ------------------------------------------------------------------------

    def record(self, outcome: AttemptOutcome, summary: str, started: float, verdict: Verdict | None = None,
               reflection_id: str | None = None, *, executed: ExecutionResult | None = None) -> None:
        s = self.subtask
        digest = verdict.digest if verdict else None
        s.attempts.append(AttemptRecord(
            number=s.next_number,
            outcome=outcome,
            failure_type=verdict.failure_type if verdict and verdict.failure_type else None,
            summary=summary,
            error_signature=digest.signature if digest else None,
            tests_passed=verdict.tests_passed if verdict else None,
            tests_failed=verdict.tests_failed if verdict else None,
            files_changed=self.changed,
            reflection_id=reflection_id,
            duration_s=round(time.monotonic() - started, 3),
            format_asked=executed.format_asked if executed else None,
            format_received=executed.format_received if executed else None,
        ))
        if outcome not in ("passed", "reviewed"):
            s.failure_count += 1
            s.last_failure_reason = summary
        self.save()
        self.keep_history(s.attempts[-1], verdict, executed.transcript if executed else None)
        if self.attempt == 1:  # the attempt the lessons were shown to: did they help?
            record_use(self.p, self.lesson_ids, self.task, s.attempts[-1].number, outcome in ("passed", "waived"))

    def save(self) -> None:
        self.plan.save(self.p.layout.plan(self.plan.task_id))

    def keep_history(self, record: AttemptRecord, verdict: Verdict | None, transcript: str | None = None) -> None:
        """The attempt as a version of the Reflection pattern, with its patch, on disk."""
        review = self.review if record.outcome in (*PASSING_OUTCOMES, "reviewed") else None
        version = attempt_version(record, verdict, review, spent=self.p.meter.since(self.spent),
                                  asked=self.applying, subtask=self.subtask)
        version.extra.update(self.agent_run)
        patch = self.patches.get(self.attempt, self.current_patch or "")
        try:
            write_attempt(self.p.project_dir, self.task.id, self.subtask.id, version, patch, transcript)
        except OSError as exc:  # the journey is for humans: a full disk must not stop the loop
            self.event("history_failed", attempt=self.attempt, error=str(exc))

    def log_verdict(self, verdict: Verdict, judged: Judgement) -> None:
        """The attempt's one verdict: the checks as judged, as every view shows it."""
        self.event("verdict", attempt=self.attempt, outcome=judged.outcome, passed=judged.passed,
                   checksPassed=verdict.passed, failureType=verdict.failure_type, summary=judged.summary,
                   waived=list(judged.waived), testsPassed=verdict.tests_passed, testsFailed=verdict.tests_failed,
                   errorSignature=verdict.digest.signature if verdict.digest else None,
                   durationS=round(verdict.duration_s, 3), filesChanged=self.changed)

    def event(self, name: str, **fields: Any) -> None:
        self.p.runlog.event(name, taskId=self.task.id, subtaskId=self.subtask.id, **fields)


def judging_files(config: ProjectConfig) -> list[str]:
    """The repository files that decide how an attempt is judged."""
    return [str(PurePosixPath(FOLDER, "project.json")),
            *(f for f in (config.reflexion.prompt_file, config.review.prompt_file) if f)]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _tree_key(patch: str) -> str:
    """A tree's identity, from its snapshot against the subtask's base."""
    return hashlib.sha256(patch.encode("utf-8", "surrogateescape")).hexdigest()


def task_text(task: Task) -> str:
    """What the task says, for telling its own tests and modules from others."""
    criteria = task.acceptance_criteria or ""
    if isinstance(criteria, list):
        criteria = "\n".join(criteria)
    return "\n".join((task.title, task.description, criteria))
