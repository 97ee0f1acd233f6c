"""The steps of one attempt, in the order the subtask run (loop/subtask.py) calls them:

    prepare -> execute -> guard -> judge -> review

Each takes the subtask's state and the attempt, and hands the next step what it found.
A step that ends the attempt raises an outcome of loop/attempt.py; what a failed
attempt leaves for the next one (progress, reflection, the next prompt's words) is
loop/failure.py's.
"""

from __future__ import annotations

import time
from typing import NoReturn

import anyio

from orchestrator.budget import BudgetExceeded
from orchestrator.checks.convergence import StopReason
from orchestrator.checks.verify import Verdict
from orchestrator.executors import ExecutionRequest, ExecutionResult
from orchestrator.executors.agent_end import refused_again
from orchestrator.git.repo import HistoryRewritten
from orchestrator.judging.judgement import Judgement
from orchestrator.judging.test_paths import is_test_path
from orchestrator.loop.attempt import Attempt, Escalate, KeepBest, PutBack, Retry
from orchestrator.loop.escalation import AttemptSnapshot
from orchestrator.loop.escapes import escape_sentence, refused_writes
from orchestrator.loop.failure import fail, not_applied, repeated
from orchestrator.loop.prompt import LastAttempt, focus_text, start_over
from orchestrator.loop.reflecting import prompt_for, reflect_on, reflect_on_unapplied, settle_pending
from orchestrator.loop.secrets_written import secret_written
from orchestrator.loop.state import SubtaskState, task_text
from reflection.llm import ModelError, preload_litellm
from reflection.pattern.evaluation import ReflectionEvaluation
from reflection.pattern.history import ReflectionVersion, select_best

# Asking again after a retry returned an earlier attempt's code: greedy decoding of much
# the same prompt tends to give the same answer, so the second ask samples.
REASK_TEMPERATURE = 0.7
# retry.strategy "adaptive": a fresh start is a new sample of the first prompt, so it is
# drawn as resampling draws (bench/humaneval: 0.8); at 0.7, 6 of about 40 fresh starts
# gave back a failed attempt's code and lost that attempt.
FRESH_TEMPERATURE = 0.8
# A prompt too long for the model is this task's problem: block it, do not stop the run.
TASK_MODEL_ERRORS = frozenset({"context_window"})
AGENT_FIELDS = ("agent", "sessionId", "finalMessage", "costUsd", "model")  # a coding agent's report, kept
NO_CHANGE = ("the attempt changed no file, so it cannot have done the task (a task that only checks "
             "the repository is marked verification-only); make the change the task asks for")


def prepare(s: SubtaskState) -> Attempt:
    """Ask the budget first; then count the attempt, note the tree it starts from in the
    journal, and write its prompt."""
    p = s.p
    stop = p.budget_check() if p.budget_check else None
    if stop:
        raise PutBack("budget", stop)
    s.attempt += 1
    applying, s.next_applying = s.next_applying, []
    spent = p.meter.copy()
    if s.last is not None and s.last.afresh:  # not shown the failure, it cannot reflect on it: the heuristic lesson
        settle_pending(s, None)
    prompt = prompt_for(s, s.last)
    s.event("attempt_started", attempt=s.attempt, of=s.max_attempts, number=s.subtask.next_number,
            executor=_worker(s), promptChars=len(prompt.text))
    request = ExecutionRequest(repo_dir=p.repo.root, prompt=prompt.text, attempt=s.attempt, hint_paths=s.changed,
                               focus=focus_text(s.task, s.plan, s.subtask), latest=prompt.latest,
                               follow_up=prompt.follow_up, chat=f"{s.task.id}/{s.subtask.id}",
                               reflect_first=s.pending is not None, temperature=_sample_temperature(s))
    return Attempt(s.attempt, request, spent, applying, started=time.monotonic(), patch=s.latest_patch)


def _sample_temperature(s: SubtaskState) -> float | None:
    """retry.strategy "adaptive": a fresh start (chosen, or after a repeat) is a new sample, so
    a model configured cooler is asked it at FRESH_TEMPERATURE: greedy decoding of the
    first prompt writes the first draft again. None: the configured temperature."""
    configured = s.p.config.model_temperature
    if s.last is None or not s.last.afresh:
        return None
    return FRESH_TEMPERATURE if configured is not None and configured < FRESH_TEMPERATURE else None


def _worker(s: SubtaskState) -> str:
    """Who makes the attempt, as the live line names it: the agent or the model, and its model."""
    e = s.p.config.executor
    if e.kind == "builtin":
        return f"the model ({s.p.config.default_model})"
    return f"{e.kind} ({e.named_model})" if e.named_model else e.kind


async def execute(s: SubtaskState, a: Attempt) -> ExecutionResult:
    """The executor's answer. A model call the budget cannot cover, or a model that is
    down, puts the subtask back; a prompt the model refuses escalates."""
    try:
        executed = await _execute(s, a)
    except BudgetExceeded as exc:  # a model call the budget could not cover: refused, never made
        raise PutBack("budget", str(exc)) from None
    except ModelError as exc:
        if exc.kind in TASK_MODEL_ERRORS:  # this task's prompt is the problem: retries cannot help
            refused = f"the model refused this task's prompt: {exc}"
            s.record(a, "model_refused", refused, reflection_id=await reflect_on(s, "environment", refused))
            s.earlier.snapshots.append(AttemptSnapshot(a.number, refused, a.diff, 0.0))
            raise Escalate(StopReason.ENVIRONMENT) from None
        if exc.kind == "rate_limit" and exc.retry_after_s:  # a usage window: waited out, not failed on
            raise PutBack("usage_limit", f"the model's usage limit: {exc}", time.time() + exc.retry_after_s) from None
        raise PutBack("model_unavailable", f"the model failed: {exc}") from None
    if not executed.ok and executed.failure_kind == "limit":  # the agent's subscription window is spent
        raise PutBack("usage_limit", f"the agent's usage limit: {executed.error}", executed.resume_at)
    if executed.code_asked_for:  # a one-call reply with only its reflection: the edit asked for after it
        s.event("code_asked", attempt=a.number)
    if executed.notes:  # an edit applied elsewhere than its reply said
        a.notes = executed.notes
        s.event("edit_corrected", attempt=a.number, notes=executed.notes)
    if executed.usage and executed.usage.get("agent"):  # its session id and last word, for the user
        a.agent_run = {k: v for k, v in executed.usage.items() if k in AGENT_FIELDS}
        s.event("agent_run", attempt=a.number, **a.agent_run)
    return executed


async def _execute(s: SubtaskState, a: Attempt) -> ExecutionResult:
    """Run the executor; a retry that gives back a failed attempt's code is asked once more,
    from the subtask's start, told how that code failed but not shown it (with "adaptive",
    the next attempt is that ask). `a.same_as` says
    when its tree is still one a failed attempt left: verifying it again would only repeat
    a known verdict."""
    executed = await s.p.executor.execute(a.request)
    if s.pending is not None:  # the reply began with the last failure's reflection, or it is heuristic
        settle_pending(s, executed.reply, model=(executed.usage or {}).get("model"))
    same_as = await _same_as_failed(s, a, executed)
    retry = s.p.config.retry
    if same_as is not None and retry.strategy == "adaptive":  # one call per attempt: counted, and the next starts over
        a.same_as = same_as
        return executed
    if same_as is None or not retry.reask_repeats or retry.fresh:  # a fresh sample is told nothing
        return executed
    s.event("repeat", attempt=a.number, sameAs=same_as, action="asked again")
    await s.roll_back_to(None)
    block = start_over(same_as, s.earlier.failures.get(same_as, ""))
    again = a.request.model_copy(update={
        "prompt": f"{prompt_for(s, None).text}\n\n{block}", "latest": block, "follow_up": None,
        "reflect_first": False, "temperature": REASK_TEMPERATURE,
    })
    executed = await s.p.executor.execute(again)
    a.same_as = await _same_as_failed(s, a, executed)
    return executed


async def _same_as_failed(s: SubtaskState, a: Attempt, executed: ExecutionResult) -> int | None:
    """The failed attempt whose tree the executor's result reproduces, if any."""
    a.patch = s.latest_patch = None
    if not executed.ok or not s.earlier.failed_trees:
        return None
    a.patch = s.latest_patch = await s.tree.snapshot()
    return s.earlier.failed_tree(a.patch)


async def guard(s: SubtaskState, a: Attempt, executed: ExecutionResult) -> None:
    """What an attempt may not do, undone or refused before anything is judged: an agent's
    own commits become changes again (without the sandbox), the files that judge attempts
    are put back, a secret written or a reach into the user's checkout rejects it."""
    await _linked_untouched(s, a)
    unhidden = await s.tree.unhide()
    if unhidden:  # an edit git was told not to see is an edit all the same
        s.event("index_flags_cleared", attempt=a.number, paths=unhidden)
    try:
        folded = await s.tree.fold_commits()
    except HistoryRewritten as exc:  # HEAD is back; what the agent left is undone unjudged, not a failed tree
        await s.tree.restore()
        s.judging.put_back()  # a reset takes the run's own uncommitted backlog with it
        await _rejected(s, a, executed, "history_rewritten",
                        f"rejected: {exc}; goldenloop makes the commits itself: leave git's history, branches and "
                        "HEAD as they are")
    if folded:  # the agent committed its own work: still an attempt, judged like any other
        s.event("agent_commits_folded", attempt=a.number, paths=folded)
    s.changed = await s.tree.changed_files()
    await s.tree.hold(s.changed)  # its output, reproducible from now on: no undo loses it
    # The diff costs several git calls: made when a retry or a reflection needs it.
    a.diff = await s.tree.diff() if not executed.ok else ""
    tampered = s.judging.put_back()
    if tampered:  # the checks must stay the ones the run read, whatever the agent wrote
        await _rejected(s, a, executed, "config_tampered", tampered)
    leaked = await anyio.to_thread.run_sync(secret_written, s.p.repo, s.tree.base, s.changed)
    if leaked:  # never committed, whatever the checks say
        await _rejected(s, a, executed, "secret_written", f"rejected: {leaked}")
    await _stayed_in_its_tree(s, a, executed)


async def _stayed_in_its_tree(s: SubtaskState, a: Attempt, executed: ExecutionResult) -> None:
    """An agent in its sandbox that tried to change the user's checkout is rejected (the
    kernel refused the write; its output says so); other refused writes are noted."""
    if not getattr(s.p.executor, "sandboxed", False) or s.p.repo.root == s.p.project_dir:
        return
    inside, outside = refused_writes(executed.reply or "", s.p.project_dir, s.p.repo.common_dir)
    if outside:
        s.event("sandbox_refused", attempt=a.number, paths=outside[:20])
    if inside:
        await _rejected(s, a, executed, "sandbox_escape", escape_sentence(inside))


async def _linked_untouched(s: SubtaskState, a: Attempt) -> None:
    """The checkout's linked paths (a `.venv`) run the judge's tests too: an attempt that
    changed them changed what judges it, and your environment, which goldenloop cannot put
    back. The task stops with the path named."""
    if not s.shares_links:
        return
    from orchestrator.git.provided import changed_between

    assert s.p.judges is not None and s.p.judges.provided is not None
    changed = changed_between(s.linked, await anyio.to_thread.run_sync(s.p.judges.provided.contents))
    if not changed:
        return
    reason = (f"the attempt changed {changed[0]}{f' and {len(changed) - 1} more' if len(changed) > 1 else ''}, "
              "which your checkout shares with the checks (worktree.link): it changes what judges the attempt and "
              "your own environment, and goldenloop cannot put it back; check it, then `goldenloop reopen "
              f"{s.task.id}`")
    s.event("linked_changed", attempt=a.number, paths=changed[:20])
    s.record(a, "integrity", reason, reflection_id=await reflect_on(s, "integrity", reason))
    raise Escalate(StopReason.ENVIRONMENT)


async def _rejected(s: SubtaskState, a: Attempt, executed: ExecutionResult, event: str, reason: str) -> NoReturn:
    """An attempt refused before any check runs: a failed attempt the retry is told why of."""
    s.event(event, attempt=a.number)
    judged = Judgement("integrity", reason, failure=reason, tree_judged=False)
    s.log_verdict(Verdict(passed=False, steps=[]), judged)
    await fail(s, a, Verdict(passed=False, steps=[]), judged, executed)


def _refused_again(s: SubtaskState, executed: ExecutionResult) -> bool:
    """The agent's run failed on the model server's refusal or empty reply, as the last one did."""
    last = s.subtask.attempts[-1] if s.subtask.attempts else None
    before = last.summary if last is not None and last.outcome == "edit_failed" else None
    return refused_again(executed.failure_summary(), before)


async def judge(s: SubtaskState, a: Attempt, executed: ExecutionResult) -> tuple[Verdict, Judgement]:
    """The checks' verdict as judged, when it passes. Nothing is run for a reply that was
    not applied, nor for a failed attempt's code given back: their verdict is known."""
    if not executed.ok and executed.failure_kind == "agent" and _refused_again(s, executed):
        executed = executed.model_copy(update={
            "failure_kind": "environment", "error": f"{executed.error} (on two runs in a row: no retry changes it)"})
    if not executed.ok and executed.failure_kind == "environment":  # no retry can install it
        s.record(a, "environment", executed.failure_summary(), executed=executed,
                 reflection_id=await reflect_on_unapplied(s, executed))
        s.earlier.snapshots.append(AttemptSnapshot(a.number, executed.failure_summary(), a.diff, 0.0))
        raise Escalate(StopReason.ENVIRONMENT)
    if not executed.ok:  # nothing ran: say exactly why, and how to get it right
        await not_applied(s, a, executed)
    if a.same_as is not None:
        await repeated(s, a, a.same_as, executed)
    verdict, judged = await s.judge.judge(s.changed)  # in the judge's tree, on what would be committed
    if judged.passed and not s.changed and not s.task.verification_only:
        judged = Judgement("no_change", NO_CHANGE, failure=NO_CHANGE, tree=judged.tree)
    s.log_verdict(verdict, judged)
    if judged.passed:  # the patch of exactly what would be committed: the tree judged, against the base
        if a.patch is None:
            a.patch = await (s.tree.patch_of(judged.tree, s.changed) if judged.tree else s.tree.snapshot(s.changed))
        s.latest_patch = a.patch
        return verdict, judged
    if s.p.config.reflections_by_model:  # a reflection is seconds away: litellm's import starts now
        preload_litellm()
    if s.passing:  # a revision that broke the checks: the passing version stands
        s.record(a, judged.outcome, judged.summary, verdict, executed=executed, judged=judged)
        raise KeepBest(f"the revision failed its checks ({judged.summary})")
    a.diff = a.diff or await s.tree.diff()
    await fail(s, a, verdict, judged, executed)


async def review(s: SubtaskState, a: Attempt, verdict: Verdict, judged: Judgement,
                 executed: ExecutionResult) -> str:
    """A passing attempt scored on the project's criteria (review.enabled); the summary it
    is committed with. One short of the bar asks for a revision while one is left; a
    revision that scores lower than an earlier pass keeps that pass."""
    gate, settings = s.p.review, s.p.config.review
    if gate is None or not s.changed:
        return judged.summary
    diff = await s.tree.diff()
    scored = a.review = await gate.review(task=task_text(s.task), diff=diff, waived=judged.outcome != "passed",
                                          tests_touched=any(is_test_path(p, s.judge.g.globs) for p in s.changed))
    s.event("reviewed", attempt=a.number, threshold=settings.success_threshold, **scored.as_event())
    best = select_best([*s.passing, _version(a, scored.evaluation)], "highest_score")
    revise = (not scored.evaluation.satisfactory and s.revisions < settings.revisions
              and a.number < s.max_attempts and best.iteration == a.number)
    summary = f"{judged.summary}; review {scored.score:.2f}"
    s.earlier.patches[a.number] = a.patch or ""
    s.passing.append(_version(a, scored.evaluation))
    if best.iteration == a.number and not revise:
        if not scored.evaluation.satisfactory:  # kept, yet short of the bar: no revision is left
            s.event("review_accepted_low", attempt=a.number, score=round(scored.score, 4),
                    threshold=settings.success_threshold, why="no revision left")
        return summary
    s.record(a, "reviewed", summary, verdict, executed=executed)
    if not revise:
        raise KeepBest(f"its review scored {scored.score:.2f}, below attempt "
                       f"{best.iteration}'s {best.evaluation.overall_score:.2f}")
    s.revisions += 1
    s.start, s.next_applying = a.number, list(scored.improvements)
    from orchestrator.checks.review import review_block  # only a project that reviews loads it

    s.last = LastAttempt(a.number, diff, "\n".join(review_block(scored, settings.success_threshold)), reviewed=True)
    s.event("revision_asked", attempt=a.number, score=round(scored.score, 4), improvements=scored.improvements)
    raise Retry


def _version(a: Attempt, evaluation: ReflectionEvaluation) -> ReflectionVersion:
    return ReflectionVersion(iteration=a.number, output="", evaluation=evaluation,
                             improvements_applied=list(a.applying))
