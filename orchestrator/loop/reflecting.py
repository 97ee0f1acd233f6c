"""The memory side of an attempt: reflections written on a failure, and the prompt that
reads them back (with the lessons, rules and task notes) for the next attempt."""

from __future__ import annotations

from typing import Any

from orchestrator.checks.verify import Verdict
from orchestrator.executors import ExecutionResult
from orchestrator.judging.about import needs_proof
from orchestrator.judging.judgement import Judgement
from orchestrator.loop.prompt import AttemptPrompt, LastAttempt, attempt_parts, baseline_block, checks_block
from orchestrator.loop.state import SubtaskState
from reflection.redact import redact_data
from reflection.schema import FailureContext, FailureStage, FailureType, Reflection

# The judged outcomes whose failure the checks' output does not explain: the judge's own
# reason is what the reflection is about.
_JUDGED_STAGES: dict[str, FailureStage] = {"integrity": "integrity", "no_change": "no_change"}
_UNAPPLIED_STAGES: dict[str, FailureStage] = {"edit": "edit", "agent": "agent", "environment": "environment"}


async def reflect_on_verdict(s: SubtaskState, verdict: Verdict, judged: Judgement, diff: str,
                             *, retried: bool = False) -> str | None:
    """Reflect on a failed attempt as judged. What it broke when the checks say (the judge
    puts its own failures first and marks the tests that were failing before the task),
    else the judge's own reason (tests weakened, config changed, nothing changed).
    `retried`: a retry follows, which may write the reflection itself (`in_reply`)."""
    digest = verdict.digest
    stage = _JUDGED_STAGES.get(judged.outcome, "verify")
    if stage != "verify" or digest is None:  # the checks passed, the judge did not: no test shows the change
        kind = (verdict.failure_type or FailureType.TEST_FAILURE) if stage == "verify" else None
        return await reflect_on(s, stage, judged.failure or judged.summary, retried=retried, diff=diff,
                                failure_type=kind)
    return await reflect(
        s, failure_type=verdict.failure_type, digest=judged.failure or digest.text,
        error_signature=digest.signature, failing_tests=list(judged.failing_tests),
        first_error=judged.first_error, diff=diff,
        preexisting_tests=list(judged.parts.others if judged.parts else judged.waived),
        previous_signature=s.previous_signature, retried=retried,
    )


async def reflect_on_unapplied(s: SubtaskState, executed: ExecutionResult, *, retried: bool = False) -> str | None:
    """Reflect on an attempt whose work never reached the checks: a reply not applied, an
    agent's run that failed or hit its time limit, an agent that cannot run here."""
    timeout = FailureType.TIMEOUT if executed.timed_out else None
    return await reflect_on(s, _UNAPPLIED_STAGES[executed.failure_kind],
                            executed.error or executed.failure_summary(), retried=retried, failure_type=timeout)


async def reflect_on(s: SubtaskState, stage: FailureStage, reason: str, *, retried: bool = False,
                     **failure: Any) -> str | None:
    """Reflect on a failure no check explains; `reason` is its one plain account."""
    return await reflect(s, retried=retried, stage=stage, digest=reason, **failure)


async def reflect(s: SubtaskState, *, retried: bool = False, **failure: Any) -> str | None:
    """Write a reflection on the attempt in flight; its id, or None (reflexion off or failing,
    or left to the retry's reply, which writes it: `settle_pending`).

    Every failed attempt gets one, the last before an escalation too: a retry reads it, and
    the escalation packet and the memory keep why the last try failed. With reflexion.oneCall
    (`in_reply`) no call is made for one: a retry's reply writes it (`retried`), and the
    last failure's is the heuristic one, since a call for it would cost as much as a retry
    and the task's outcome reflection already asks the model what to learn."""
    service = s.p.reflections
    if service is None:
        return None
    settle_pending(s, None)  # an older failure's is never left behind a newer one
    sub = s.subtask
    number = sub.next_number
    ctx = FailureContext(session_id=s.p.session_id, task_id=s.task.id, subtask_id=sub.id,
                         attempt_number=number, subtask_title=sub.title, subtask_description=sub.description,
                         **{"files_modified": s.changed, **failure})
    if in_reply(s):
        s.pending = ctx
        if not retried:  # no reply will write it
            return settle_pending(s, None)
        sub.pending_reflection = redact_data(ctx.to_dict())  # a run killed before the reply leaves it to the next
        return None
    try:
        reflection = await service.reflect(ctx, previous=recalled(s, service.max_per_retry))
    except Exception as exc:  # noqa: BLE001 - memory trouble must not stop the loop
        s.event("reflection_failed", error=str(exc))
        return None
    s.reflections += 1
    s.next_applying = [reflection.suggestion, *reflection.action_items]
    s.event("reflection", attempt=number, id=reflection.id, failureId=ctx.id, stage=ctx.stage,
            category=reflection.category, analysis=reflection.analysis, suggestion=reflection.suggestion,
            source=reflection.source, model=reflection.model, path=service.location)
    return reflection.id


def in_reply(s: SubtaskState) -> bool:
    """reflexion.oneCall: the retry's reply reflects on the failure before its edit, so a
    retry costs one model call. Only the builtin executor's replies are read for it; an
    agent's retry and heuristic-only reflexion keep their own way."""
    c, service = s.p.config, s.p.reflections
    return (service is not None and service.model is not None and c.reflexion.one_call
            and c.executor.kind == "builtin" and not c.retry.fresh)


def settle_pending(s: SubtaskState, reply: str | None, *, model: str | None = None) -> str | None:
    """Store the reflection the last failure waits for: the one `reply` began with, or the
    heuristic one (no reply, or none in it); its id. The failure's record gets it."""
    ctx, s.pending = s.pending, None
    s.subtask.pending_reflection = None
    service = s.p.reflections
    if ctx is None or service is None:
        return None
    from reflection.generate import reflection_in_reply  # loaded once a retry needs it

    made = reflection_in_reply(ctx, reply, model=model, previous=recalled(s, service.max_per_retry))
    reflection = service.save(made)
    s.reflections += 1
    record = next((r for r in s.subtask.attempts if r.number == ctx.attempt_number), None)
    if record is not None:
        record.reflection_id = reflection.id
    s.save()
    s.event("reflection", attempt=ctx.attempt_number, id=reflection.id, failureId=ctx.id, stage=ctx.stage,
            category=reflection.category, analysis=reflection.analysis, suggestion=reflection.suggestion,
            source=reflection.source, model=reflection.model, path=service.location, inReply=True)
    return reflection.id


def settle_left_pending(s: SubtaskState) -> None:
    """A reflection a killed run left waiting for its retry's reply: the heuristic one now."""
    left = s.subtask.pending_reflection
    if left is None:
        return
    try:
        s.pending = FailureContext.model_validate(left)
    except ValueError:  # a record from elsewhere that does not read: nothing to settle
        s.subtask.pending_reflection = None
        return
    settle_pending(s, None)


def recalled(s: SubtaskState, limit: int) -> list[Reflection]:
    """The subtask's last reflections, newest first. The plan says how many there are,
    so the store stops reading as soon as it has found them (it reads from the end)."""
    service = s.p.reflections
    written = sum(a.reflection_id is not None for a in s.subtask.attempts)
    if service is None or written == 0:
        return []
    return service.recent(s.subtask.id, min(limit, written))


def _lessons_kept(reflections: list[Reflection], last: LastAttempt | None) -> list[Reflection]:
    """What a retry is told of the reflections. A fresh start (retry.strategy "adaptive") is
    a new sample: only the model's own lessons. A heuristic reflection restates how a draft
    failed, which is what the fresh start is meant to forget, and without it the prompt is
    the first attempt's again, which a prompt cache serves whole."""
    if last is None or not last.afresh:
        return reflections
    return [r for r in reflections if r.source != "heuristic"]


def prompt_for(s: SubtaskState, last: LastAttempt | None) -> AttemptPrompt:
    """The attempt's prompt: the task, what the last attempt did, its reflections, the
    lessons of other tasks (first attempt only) and the project's rules. With retry.fresh
    every attempt gets the first attempt's prompt: no last attempt, no reflections."""
    block = ""
    service = s.p.reflections
    c = s.p.config
    fresh = c.retry.fresh  # every retry the first attempt's prompt again
    if service is not None and not fresh and (last is not None or s.subtask.attempts):  # incl. a killed run's
        block = service.format_for_prompt(_lessons_kept(recalled(s, service.max_per_retry), last))
    memory = s.p.memory
    checks = "" if c.executor.kind == "builtin" else checks_block(  # an agent finds its own way: say the goal
        [*c.typecheck_commands, *c.test_commands], sandboxed=getattr(s.p.executor, "sandboxed", False))
    failing = sorted(s.baseline.failing_tests) if s.baseline else []  # the preflight's: the same every attempt
    about = s.judge.about().tests if s.baseline else frozenset()
    before = baseline_block(sorted(about), [t for t in failing if t not in about],
                            proof=s.judge.final and needs_proof(s.task.type))
    checks = "\n\n".join(part for part in (checks, before) if part)
    return attempt_parts(s.task, s.plan, s.subtask, last=last, reflections=block, notes=s.notes,
                          checks=checks,
                          lessons=s.lessons if s.attempt == 1 or fresh or (last and last.afresh) else "",
                          rules=memory.rules() if memory else "")
