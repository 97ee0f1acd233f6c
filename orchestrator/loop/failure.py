"""A failed attempt, written down for the next one: how far it got (the progress tracker),
a reflection when a retry will read it, the tree the retry starts from, and the words of
the next prompt. Each function ends the attempt: `Retry`, or `Escalate` when retrying
cannot help.
"""

from __future__ import annotations

import dataclasses
from typing import NoReturn

from orchestrator.checks.convergence import AttemptScore, Decision, StopReason
from orchestrator.checks.verify import Verdict
from orchestrator.executors import ExecutionResult
from orchestrator.judging.judgement import Judgement
from orchestrator.layout import Layout
from orchestrator.loop.attempt import Attempt, Escalate, Retry
from orchestrator.loop.escalation import AttemptSnapshot
from orchestrator.loop.prompt import LastAttempt
from orchestrator.loop.reflecting import reflect_on, reflect_on_unapplied, reflect_on_verdict
from orchestrator.loop.remember import remember_decision
from orchestrator.loop.retry_choice import RetryChoices, failure_class
from orchestrator.loop.state import SubtaskState
from reflection.redact import redact
from reflection.text import cut_block

REPLY_LOGGED = 4_000  # characters of an unapplied reply kept in the run log, to see why


async def fail(s: SubtaskState, a: Attempt, verdict: Verdict, judged: Judgement,
               executed: ExecutionResult) -> NoReturn:
    """Track progress and reflect (a retry reads it, or the escalation packet and the
    memory keep it), then stop or set the retry up."""
    decision = await _progress(s, a, verdict, judged)
    stop = _stop_reason(s, judged, decision)
    # retry.fresh: samples told nothing, so nothing to reflect for them
    retried = stop is None and a.number < s.max_attempts
    reflection_id = None if fresh(s) else await reflect_on_verdict(s, verdict, judged, a.diff, retried=retried)
    s.record(a, judged.outcome, judged.summary, verdict, reflection_id, executed=executed, judged=judged)
    if stop is not None:
        raise Escalate(stop)
    if fresh(s) and a.number < s.max_attempts:
        await start_fresh(s, a)
    await _set_up_retry(s, a, verdict, judged, decision)
    raise Retry


def fresh(s: SubtaskState) -> bool:
    """retry.fresh: every retry an independent sample, told nothing of the attempts before."""
    return s.p.config.retry.fresh


async def start_fresh(s: SubtaskState, a: Attempt) -> NoReturn:
    """Set a fresh retry up: the subtask's base tree and the first attempt's prompt."""
    await s.roll_back_to(None)
    s.start, s.last = None, None
    s.event("fresh_retry", attempt=a.number, sample=a.number + 1, of=s.max_attempts)
    raise Retry


async def _progress(s: SubtaskState, a: Attempt, verdict: Verdict, judged: Judgement) -> Decision | None:
    """Remember the failed attempt's tree and ask the tracker; None: nothing to track."""
    n = a.number
    score = 0.0 if judged.outcome in ("integrity", "no_change") else verdict.score
    s.earlier.snapshots.append(AttemptSnapshot(n, judged.summary, a.diff, score, failure=judged.failure))
    if judged.tree_judged:
        s.earlier.tree_failed(n, a.patch if a.patch is not None else await s.tree.snapshot())
    if judged.escalate:
        return None
    attempt = judged_score(n, verdict, judged)
    if judged.outcome in ("integrity", "no_change"):
        attempt = AttemptScore(n, 0.0, signature=judged.outcome)
    s.earlier.scores[n] = attempt
    return s.track(attempt, always_log=False)


def judged_score(number: int, verdict: Verdict, judged: Judgement) -> AttemptScore:
    """The attempt as the tracker sees it: the checks' score, or, where the judge's parts
    say more (a run that passed with a test that shows nothing, a commit's copy of the
    tests that skips them), the share of the judged tests it got right; never a pass."""
    scored = AttemptScore.from_verdict(number, verdict)
    parts = judged.parts
    if parts is None or judged.passed or not parts.ids:
        return dataclasses.replace(scored, passed=scored.passed and judged.passed)
    wrong = (*parts.broken, *parts.lost, *parts.own, *parts.left)
    good = parts.kept + len(parts.shown) - len(parts.lost)
    bad = len(wrong) + (1 if parts.proof == "missing" else 0)
    score = max(good, 0) / (max(good, 0) + bad) if bad else scored.score
    return dataclasses.replace(scored, score=min(score, 1.0), passed=False,
                               failing=frozenset(wrong) or scored.failing,
                               signature=scored.signature or f"judged: {' '.join(sorted(wrong)) or parts.proof}")


def _stop_reason(s: SubtaskState, judged: Judgement, decision: Decision | None) -> StopReason | None:
    """Why no retry follows this failed attempt, or None when one does."""
    if judged.escalate or decision is None:
        return StopReason.ENVIRONMENT
    if not s.converges:  # tree siblings and fresh samples are no sequence to converge
        return None
    if decision.action == "stop" and s.attempt < s.max_attempts:
        return decision.reason or StopReason.PLATEAU
    return None


async def _set_up_retry(s: SubtaskState, a: Attempt, verdict: Verdict, judged: Judgement,
                        decision: Decision | None) -> None:
    """Roll a regression back or undo a rejected attempt, and tell the next prompt why."""
    n, diff, moved, afresh = a.number, a.diff, False, False
    failure = judged.failure + "".join(f"\n\nNote: {note}." for note in a.notes)
    if decision is not None and decision.repeated_signature:
        failure += "\n\nThis is exactly the failure of the attempt before: that fix did not work."
    if s.search is not None and n < s.max_attempts:  # retry.strategy "tree": the search picks the starting tree
        s.previous_signature = verdict.digest.signature if verdict.digest else None
        s.earlier.failures[n] = failure
        s.last = await s.search.branch(s, n, diff, failure, judged.outcome)
        return
    if decision is not None and decision.action == "rollback" and decision.rollback_to in s.earlier.patches:
        best = s.earlier.snapshot(decision.rollback_to)
        assert best is not None
        await s.roll_back_to(best.number, event="rolled_back")
        remember_decision(s.p, s.task, f"rolled back to the tree of attempt {best.number}",
                          [f"keep the tree of attempt {n}"], decision.explanation)
        failure += (f"\n\nThis attempt was worse than attempt {best.number}, so the tree was put "
                    f"back to attempt {best.number}'s changes (shown above); improve on those.")
        diff, moved = best.diff, True
    elif judged.outcome == "integrity":  # weakened tests must not stay for the next attempt
        await s.roll_back_to(s.start, event="attempt_undone")
        failure += (f"\n\nThat diff was undone: the tree is back to how it was before attempt "
                    f"{n}, tests included; make the tests pass by changing the code.")
        moved = True
    elif s.p.config.retry.strategy == "adaptive" and await _afresh(s, n, verdict, judged, stalled=bool(
            decision is not None and decision.repeated_signature and s.start == n - 1)):
        afresh = True
    else:
        s.start = n
    s.previous_signature = verdict.digest.signature if verdict.digest else None
    s.earlier.failures[n] = failure
    s.last = LastAttempt(n, diff, failure, tree_moved=moved, afresh=afresh)


async def _afresh(s: SubtaskState, n: int, verdict: Verdict, judged: Judgement, *, stalled: bool) -> bool:
    """retry.strategy "adaptive": whether the next attempt starts afresh from the base
    rather than repairing attempt `n`; the choice is noted, and counted when that attempt ends.
    `stalled`: attempt `n` repaired the attempt before it and failed exactly as that one did,
    so the feedback did not move the draft: a fresh sample is tried, whatever the class."""
    score = s.earlier.scores[n].score if n in s.earlier.scores else 0.0
    klass = failure_class(verdict, judged, score)
    choice, why = RetryChoices(Layout(s.p.project_dir).retry_choices).choose(klass)
    if stalled and choice == "repair":
        choice, why = "resample", f"attempt {n} repaired attempt {n - 1} and failed exactly as it did"
    s.choice = (klass, choice)
    s.event("retry_choice", attempt=n, failureClass=klass, choice=choice, why=why)
    if choice == "repair":
        s.start = n
        return False
    await s.roll_back_to(None)
    s.start = None
    return True


async def not_applied(s: SubtaskState, a: Attempt, executed: ExecutionResult) -> NoReturn:
    """An attempt whose reply could not be applied (or whose agent failed): nothing ran."""
    reason = executed.failure_summary()
    s.event("edit_failed", attempt=a.number, error=executed.error, failureKind=executed.failure_kind,
            formatAsked=executed.format_asked, formatReceived=executed.format_received,
            reply=cut_block(redact(executed.reply or ""), REPLY_LOGGED))
    # a format failure or a failed run is a lesson too (not for retry.fresh's samples)
    reflection_id = None if fresh(s) else await reflect_on_unapplied(s, executed, retried=a.number < s.max_attempts)
    s.record(a, "edit_failed", reason, reflection_id=reflection_id, executed=executed)
    failure = "\n".join(part for part in (executed.error, executed.repair) if part)
    s.earlier.snapshots.append(AttemptSnapshot(a.number, reason, a.diff, 0.0, failure=executed.error or ""))
    if fresh(s) and a.number < s.max_attempts:
        await start_fresh(s, a)
    s.last = LastAttempt(a.number, a.diff, failure, applied=False, agent_failed=executed.failure_kind == "agent")
    raise Retry


async def repeated(s: SubtaskState, a: Attempt, same_as: int, executed: ExecutionResult) -> NoReturn:
    """Count an attempt that reproduced attempt `same_as` even when asked not to.

    Its verdict is `same_as`'s, so progress is tracked as if it had run: a repeat is
    no improvement, and going back to an older attempt's code is oscillation.
    """
    n, e = a.number, s.earlier
    summary = f"gave back attempt {same_as}'s code unchanged, even when asked for a different one"
    if same_as in e.judgements:  # what that code does, so the task's reason names the failure
        summary += f"; that code: {e.judgements[same_as].summary}"
    s.event("repeat", attempt=n, sameAs=same_as, action="counted as a failed attempt")
    reflection_id = await reflect_on(s, "repeat", summary, retried=n < s.max_attempts)
    s.record(a, "repeat", summary, reflection_id=reflection_id, executed=executed)
    earlier = e.snapshot(same_as)
    diff = earlier.diff if earlier else ""
    e.snapshots.append(AttemptSnapshot(n, summary, diff, earlier.score if earlier else 0.0,
                                       failure=e.failures.get(same_as, "")))
    e.patches[n] = e.patches.get(same_as, "")
    e.failures[n] = e.failures.get(same_as, "")
    if same_as in e.judgements:  # the same code fails the same way
        e.judgements[n] = e.judgements[same_as]
    await s.roll_back_to(None)  # the next attempt starts over, too
    s.start = None
    if s.search is not None:  # ... from the search's current starting tree
        await s.search.restart(s)
    if same_as in e.scores:
        decision = s.track(dataclasses.replace(e.scores[same_as], number=n), always_log=True)
        if decision.action == "stop" and n < s.max_attempts and s.converges:
            raise Escalate(decision.reason or StopReason.PLATEAU)
    s.last = LastAttempt(n, diff, e.failures[n], repeat_of=same_as, afresh=s.p.config.retry.strategy == "adaptive")
    raise Retry
