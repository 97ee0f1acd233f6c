"""`do-one-task`: one task through the golden loop, in the foreground."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import anyio
import orjson

from orchestrator.batch.engine import Budget, RepoRun
from orchestrator.batch.morning_report import write_morning_report
from orchestrator.batch.progress import write_progress
from orchestrator.batch.report_parts import RunHeader
from orchestrator.batch.summary import RepoReport
from orchestrator.commands.console import interruptible, overrides_from, say, setup_output
from orchestrator.layout import Layout
from orchestrator.loop.outcome import TaskOutcome
from orchestrator.render import JsonLines
from orchestrator.runlog import RunLog
from orchestrator.session import (
    EXIT_BLOCKED,
    EXIT_DONE,
    EXIT_INTERRUPTED,
    ProjectSession,
    UserError,
)
from reflection.fileio import atomic_write


def do_one_task(args: argparse.Namespace) -> int:
    listener = setup_output(args.json)
    try:
        if args.json or not sys.stdout.isatty():
            return anyio.run(_do_one_task, args, listener)
        from orchestrator.live_status import LiveStatus

        with LiveStatus(listener) as live:  # a terminal: what it waits for, under the run's lines
            return anyio.run(_do_one_task, args, live)
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
        run = RepoRun(session, Budget(), parallel=1)  # in a worktree of its own, landed when it closes
        outcome, interrupted = await interruptible(lambda: run.run_one(task))
        if interrupted or outcome is None:
            _summarise(session, [], "interrupted by a signal")
            say("do-one-task: interrupted; the task was put back to open and your checkout left as it was",
                args.json)
            return EXIT_INTERRUPTED
        _summarise(session, [outcome], f"task {outcome.status}")
        _print_outcome(outcome, session, args.json)
        return EXIT_DONE if outcome.status == "closed" else EXIT_BLOCKED


def _summarise(session: ProjectSession, outcomes: list[TaskOutcome], reason: str) -> None:
    assert session.runlog is not None
    write_progress(
        session.project_dir, session.runlog.run_id, outcomes, stop_reason=reason, meter=session.run_meter
    )
    report = RepoReport(session.project_dir, session.runlog.run_id, list(outcomes), stop_reason=reason)
    summary = Layout(session.project_dir).run_summary(report.run_id)
    atomic_write(summary, orjson.dumps(report.summary(), option=orjson.OPT_INDENT_2) + b"\n", durable=False)
    write_morning_report(session.project_dir, session.runlog.run_id, outcomes, stop_reason=reason,
                         meter=session.run_meter, header=RunHeader.of(session.project_dir, session.config))


def _print_outcome(outcome: TaskOutcome, session: ProjectSession, json_mode: bool) -> None:
    m = outcome.meter
    fields = {
        "taskId": outcome.task_id,
        "status": outcome.status,
        "attempts": outcome.attempts,
        "reflections": outcome.reflections,
        "commits": outcome.commits,
        "modelCalls": m.calls,
        **({"agentRuns": m.agent_runs, "modelRequests": m.requests} if m.agent_runs else {}),
        "inputTokens": m.input_tokens,
        **({"cachedTokens": m.cached_tokens} if m.cache_reported else {}),
        "outputTokens": m.output_tokens,
        "costUsd": m.cost_usd if m.calls else 0.0,
        "durationS": round(outcome.duration_s, 2),
    }
    if json_mode:
        JsonLines()({"event": "summary", **fields})
        return
    reflected = f"{outcome.reflections} reflection(s)"
    if session.config.retry.fresh and not outcome.reflections:
        reflected = "retries were fresh samples (retry.fresh): no reflections"
    verb = {"closed": "done", "blocked": "escalated", "model_unavailable": "stopped"}.get(outcome.status, outcome.status)
    print(
        f"\n{outcome.task_id} {verb}: {outcome.attempts} attempt(s), {reflected}, "
        f"{len(outcome.commits)} commit(s), {m.calls_text()}, "
        f"{m.tokens_text()}, cost {m.cost_text()}, {outcome.duration_s:.1f} s"
    )
    if outcome.status != "closed":
        print(f"  reason: {outcome.reason}")
    assert session.runlog is not None
    print(f"  run log: {session.runlog.path}")
    print(f"  report:  {Layout(session.project_dir).runs / (session.runlog.run_id + '.html')}")
