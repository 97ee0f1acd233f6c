"""The morning report of a fleet run: a summary JSON and one HTML page, from the outcome rows.

The summary has, per repository, the block a local run's summary has
(`orchestrator.batch.summary.RepoReport.summary()`, with the repository's URL), and
the fleet's totals: tasks, closed, blocked, cost, tokens, workers, and the ledger's own
account (spent, and what dead workers' calls were assumed to cost). The page is the
local morning report's (`orchestrator.batch.morning_report.render_page`), with each
task named `<repository>:<task id>` and its story rebuilt from the lines its worker
stored; jobs that never started a task are listed in the summary, not on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson

from orchestrator.batch.morning_report import TaskStory, render_page
from orchestrator.batch.summary import RepoReport
from orchestrator.fleet.records import LOST, RUNNING, SKIPPED, OutcomeRow, Run
from orchestrator.loop.outcome import TaskOutcome, TaskStatus
from reflection.fileio import atomic_write
from reflection.meter import Meter

NOT_RUN = (SKIPPED,)


@dataclass
class FleetReport:
    run: Run
    rows: list[OutcomeRow]
    jobs: dict[str, int]  # the run's jobs per queue state

    def __post_init__(self) -> None:
        if self.finished:  # nothing runs them any more: their worker died, and no lease check said so yet
            for row in self.rows:
                if row.status == RUNNING:
                    row.status, row.reason = LOST, "its worker stopped before the job ended"

    @property
    def ran(self) -> list[OutcomeRow]:
        return [r for r in self.rows if r.status not in NOT_RUN]

    @property
    def finished(self) -> bool:
        return not (self.jobs.get("todo") or self.jobs.get("doing"))

    def last_status(self) -> dict[tuple[str, str], str]:
        """How each task that ran ended: its last run's status, not counting the runs that
        left no result (a worker that died, a result dropped because another landed first)."""
        found: dict[tuple[str, str], str] = {}
        for r in self.ran:
            key = (r.repo_key, r.task_id)
            if r.status not in (LOST, "dropped") or key not in found:
                found[key] = r.status
        return found

    def stop_reason(self) -> str:
        if not self.finished:
            return "still running"
        reasons = [r.reason for r in self.rows if r.status == SKIPPED and ("budget" in r.reason or "count" in r.reason)]
        reasons += [r.reason for r in self.rows if r.status == "budget"]
        if reasons:
            return reasons[0]
        failed = self.jobs.get("failed", 0)
        return f"{failed} job(s) failed; see the workers' output" if failed else "backlog empty"

    def summary(self) -> dict[str, Any]:
        ran = self.ran
        meter = total_meter(ran)
        return {
            "runId": self.run.id,
            "stopReason": self.stop_reason(),
            "limits": {"maxTasks": self.run.max_tasks, "maxCostUsd": self.run.max_cost,
                       "deadline": self.run.deadline.isoformat() if self.run.deadline else None},
            "totals": {
                "tasks": len({(r.repo_key, r.task_id) for r in ran}),
                "closed": sum(r.status == "closed" for r in ran),
                "blocked": sum(r.status == "blocked" for r in ran),
                "jobs": self.jobs,
                **meter.as_dict(),
                "workers": sorted({r.worker for r in ran}),
                "ledgerSpentUsd": round(self.run.spent_cost, 6),
                "ledgerLostUsd": round(self.run.lost_cost, 6),
            },
            "repositories": [_repository(rows, self.run.id, self.stop_reason()) for rows in _by_repository(ran)],
            "skipped": [{"repository": r.repo, "taskId": r.task_id, "reason": r.reason}
                        for r in self.rows if r.status in NOT_RUN],
        }

    def page(self) -> str:
        ran = self.ran
        outcomes = [_outcome(r, qualified=True) for r in ran]
        stories = [_story(r) for r in ran]
        return render_page(self.run.id, outcomes, stories, stop_reason=self.stop_reason(), meter=total_meter(ran))

    def write(self, folder: Path) -> tuple[Path, Path]:
        """`<runId>-summary.json` and `<runId>.html` in `folder`; their paths."""
        summary = folder / f"{self.run.id}-summary.json"
        page = folder / f"{self.run.id}.html"
        atomic_write(summary, orjson.dumps(self.summary(), option=orjson.OPT_INDENT_2) + b"\n")
        atomic_write(page, self.page().encode("utf-8"))
        return summary, page


def total_meter(rows: Sequence[OutcomeRow]) -> Meter:
    meter = Meter()
    for r in rows:
        meter.merge(_meter(r))
    return meter


def _meter(r: OutcomeRow) -> Meter:
    return Meter(r.calls, r.input_tokens, r.output_tokens, r.cost)


def _by_repository(rows: list[OutcomeRow]) -> list[list[OutcomeRow]]:
    grouped: dict[str, list[OutcomeRow]] = {}
    for r in rows:
        grouped.setdefault(r.repo_key, []).append(r)
    return list(grouped.values())


def _repository(rows: list[OutcomeRow], run_id: str, stop_reason: str) -> dict[str, Any]:
    name = _name(rows[0])
    report = RepoReport(Path(name), run_id, [_outcome(r) for r in rows], stop_reason=stop_reason)
    block = report.summary()
    block["projectDir"] = rows[0].repo  # the URL: a fleet's repositories are on no one disk
    block["repository"] = rows[0].repo
    for row, task in zip(rows, block["tasks"], strict=True):
        task["worker"] = row.worker
    return block


def _name(r: OutcomeRow) -> str:
    return r.repo_key.rsplit("-", 1)[0]


def _outcome(r: OutcomeRow, *, qualified: bool = False) -> TaskOutcome:
    task_id = f"{_name(r)}:{r.task_id}" if qualified else r.task_id
    return TaskOutcome(task_id, cast(TaskStatus, r.status), r.reason, list(r.commits), r.attempts, r.reflections,
                       _meter(r), r.duration_s, Path(r.escalation) if r.escalation else None)


def _story(r: OutcomeRow) -> TaskStory:
    lines = list(r.story)
    if r.worker:
        lines.insert(0, f"run by {r.worker}")
    return TaskStory(f"{_name(r)}:{r.task_id}", r.title, r.started_at, r.finished_at or r.started_at, lines)
