"""What the commands do once their arguments are parsed (imported lazily by cli.py)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from orchestrator.loop import TaskOutcome
from orchestrator.progress import write_progress
from orchestrator.render import HumanLines, JsonLines
from orchestrator.runlog import RunLog
from orchestrator.session import (
    EXIT_BLOCKED,
    EXIT_DONE,
    EXIT_INTERRUPTED,
    Overrides,
    ProjectSession,
    UserError,
)

T = TypeVar("T")


def setup_output(json_mode: bool) -> Callable[[dict], None]:
    """Warnings from the library go to stderr as one line each; events to stdout."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    root = logging.getLogger("goldenloop")
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    root.propagate = False
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")  # type: ignore[union-attr]
    return JsonLines() if json_mode else HumanLines()


def say(message: str, json_mode: bool, **fields: object) -> None:
    """A message outside the run log: to stderr, or as a JSON line in --json mode."""
    if json_mode:
        JsonLines()({"event": "message", "message": message, **fields})
    else:
        print(message, file=sys.stderr if fields.get("level") == "error" else sys.stdout)


def overrides_from(args: argparse.Namespace) -> Overrides:
    return Overrides(
        model=args.model,
        reflexion=False if args.no_reflexion else None,
        max_retries=args.max_retries,
        allow_dirty=getattr(args, "allow_dirty", False),
    )


async def interruptible(work: Callable[[], Awaitable[T]]) -> tuple[T | None, bool]:
    """Run `work`; SIGINT or SIGTERM cancels it cleanly. Returns (result, interrupted)."""
    result: list[T] = []
    interrupted = False

    async def watch_signals(scope: anyio.CancelScope) -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                interrupted = True
                scope.cancel()
                return

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch_signals, group.cancel_scope)
            result.append(await work())
            group.cancel_scope.cancel()
    except BaseExceptionGroup as errors:  # one worker failed: surface its own exception
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise
    return (result[0] if result else None), interrupted


def do_one_task(args: argparse.Namespace) -> int:
    listener = setup_output(args.json)
    try:
        return anyio.run(_do_one_task, args, listener)
    except UserError as exc:
        say(f"do-one-task: {exc}", args.json, level="error", exitCode=exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt:
        say("do-one-task: interrupted", args.json, level="error")
        return EXIT_INTERRUPTED


async def _do_one_task(args: argparse.Namespace, listener: Callable[[dict], None]) -> int:
    runlog = RunLog(args.dir.resolve(), persist=False)  # until the session accepts the folder
    runlog.subscribe(listener)
    session = ProjectSession(args.dir.resolve(), overrides_from(args), runlog)
    with session:
        for notice in session.notices:
            say(f"note: {notice}", args.json, level="notice")
        task = session.select(args.task)
        outcome, interrupted = await interruptible(lambda: session.run_task(task))
        if interrupted or outcome is None:
            _summarise(session, [], "interrupted by a signal")
            say("do-one-task: interrupted; the tree was restored and the task put back to open", args.json)
            return EXIT_INTERRUPTED
        _summarise(session, [outcome], f"task {outcome.status}")
        _print_outcome(outcome, session, args.json)
        return EXIT_DONE if outcome.status == "closed" else EXIT_BLOCKED


def _summarise(session: ProjectSession, outcomes: list[TaskOutcome], reason: str) -> None:
    assert session.runlog is not None
    write_progress(
        session.project_dir, session.runlog.run_id, outcomes, stop_reason=reason, meter=session.run_meter
    )


def _print_outcome(outcome: TaskOutcome, session: ProjectSession, json_mode: bool) -> None:
    m = outcome.meter
    fields = {
        "taskId": outcome.task_id,
        "status": outcome.status,
        "attempts": outcome.attempts,
        "reflections": outcome.reflections,
        "commits": outcome.commits,
        "modelCalls": m.calls,
        "inputTokens": m.input_tokens,
        "outputTokens": m.output_tokens,
        "costUsd": m.cost_usd if m.calls else 0.0,
        "durationS": round(outcome.duration_s, 2),
    }
    if json_mode:
        JsonLines()({"event": "summary", **fields})
        return
    verb = {"closed": "done", "blocked": "escalated", "model_unavailable": "stopped"}.get(outcome.status, outcome.status)
    print(
        f"\n{outcome.task_id} {verb}: {outcome.attempts} attempt(s), {outcome.reflections} "
        f"reflection(s), {len(outcome.commits)} commit(s), {m.calls} model call(s), "
        f"{m.input_tokens} tokens in, {m.output_tokens} out, cost {m.cost_text()}, {outcome.duration_s:.1f} s"
    )
    if outcome.status != "closed":
        print(f"  reason: {outcome.reason}")
    assert session.runlog is not None
    print(f"  run log: {session.runlog.path}")


def overnight(args: argparse.Namespace) -> int:
    from orchestrator.overnight import run_overnight

    return run_overnight(args)
