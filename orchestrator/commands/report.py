"""`goldenloop report [RUN] [--open]`: write a run's morning report again, and open it.

The page is rebuilt from what the run left in `.openagents/runs/` (its summary and run
log) and the repository as it is now (the tasks' diffs, their files), so a report of an
older run also shows the commands that apply today.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

import orjson

from orchestrator.config import ConfigError, load_config
from orchestrator.layout import Layout, find_project, safe_name
from orchestrator.loop.outcome import TaskOutcome
from reflection.meter import Meter

EXIT_OK, EXIT_NO_RUN, EXIT_USAGE = 0, 1, 2
SUMMARY_END = "-summary.json"


def run_report(args: argparse.Namespace) -> int:
    from orchestrator.batch.morning_report import write_morning_report
    from orchestrator.batch.report_parts import RunHeader

    try:
        project = find_project(args.dir)
        config = load_config(project).config
    except (ValueError, ConfigError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    runs = Layout(project).runs
    run_id = args.run or _latest(runs)
    summary = runs / f"{safe_name(run_id)}{SUMMARY_END}" if run_id else None
    if summary is None or not summary.is_file():
        return _fail(f"no run {run_id} in {runs}" if run_id else f"no run has ended in {project} yet", EXIT_NO_RUN)
    body = orjson.loads(summary.read_bytes())
    outcomes = [_outcome(project, task) for task in body.get("tasks", [])]
    page = write_morning_report(project, run_id, outcomes, stop_reason=str(body.get("stopReason") or ""),
                                meter=_total(outcomes), header=RunHeader.of(project, config))
    print(page)
    if args.open and not webbrowser.open(page.as_uri()):
        print(f"no browser could be started here: open {page} yourself", file=sys.stderr)
    return EXIT_OK


def _fail(message: str, code: int) -> int:
    print(f"goldenloop report: {message}", file=sys.stderr)
    return code


def _latest(runs: Path) -> str | None:
    """The newest run that ended: run ids begin with their UTC start, so they sort by time."""
    names = sorted(path.name[: -len(SUMMARY_END)] for path in runs.glob(f"*{SUMMARY_END}"))
    return names[-1] if names else None


def _outcome(project: Path, task: dict) -> TaskOutcome:
    meter = Meter(calls=int(task.get("calls") or 0), input_tokens=int(task.get("inputTokens") or 0),
                  output_tokens=int(task.get("outputTokens") or 0), cost_usd=task.get("costUsd"),
                  agent_runs=int(task.get("agentRuns") or 0), requests=int(task.get("modelRequests") or 0),
                  unreported_runs=int(task.get("unreportedRuns") or 0),
                  cached_tokens=int(task.get("cachedTokens") or 0), cache_reported=int("cachedTokens" in task))
    packet = Layout(project).escalations / f"{safe_name(str(task['taskId']))}.md"
    return TaskOutcome(task_id=str(task["taskId"]), status=task.get("outcome", "blocked"),
                       reason=str(task.get("reason") or ""), commits=list(task.get("commits") or []),
                       attempts=int(task.get("attempts") or 0), reflections=int(task.get("reflections") or 0),
                       meter=meter, duration_s=float(task.get("durationS") or 0.0), verdict=task.get("verdict"),
                       escalation=packet if task.get("outcome") == "blocked" and packet.is_file() else None)


def _total(outcomes: list[TaskOutcome]) -> Meter:
    total = Meter()
    for o in outcomes:
        total.merge(o.meter)
    return total
