"""The morning report of a fleet run: a summary JSON and one HTML page, from the outcome rows.

The summary has, per repository, the block a local run's summary has
(`orchestrator.batch.summary.RepoReport.summary()`, with the repository's URL, and each
task's worker, title and escalation packet), the tasks of its backlog still not closed
at the end and why (read at the remote tip, `orchestrator.fleet.backlog`), and the
fleet's totals: tasks, closed, blocked, cost, tokens, workers, and the ledger's own
account (spent, and what dead workers' calls were assumed to cost). Its counts are of
tasks, by each task's last run; the job runs are listed one per row.

The page is the local morning report's (`orchestrator.batch.morning_report.render_page`)
with one row per job run, named `<repository>:<task id>`, with its worker, and its story
rebuilt from the lines its worker stored; then the tasks left open. An escalation packet
is named where a human finds it: in the repository, on its base branch, as pushed (never
in the worktree of the worker that wrote it, which is gone). Jobs that never started a
task are listed in the summary, not on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, cast

import orjson

from orchestrator.batch.morning_report import Section, TaskStory, render_page
from orchestrator.batch.summary import RepoReport
from orchestrator.fleet.backlog import Backlog
from orchestrator.fleet.mirror import name_of_key
from orchestrator.fleet.records import (
    CANCELLED,
    LOST,
    RUNNING,
    SKIPPED,
    OutcomeRow,
    Run,
    RunRepository,
    last_results,
)
from orchestrator.layout import PREFIX, safe_name
from orchestrator.loop.outcome import TaskOutcome, TaskStatus
from reflection.fileio import atomic_write
from reflection.meter import Meter

NOT_RUN = (SKIPPED,)


@dataclass
class FleetReport:
    run: Run
    rows: list[OutcomeRow]
    jobs: dict[str, int]  # the run's jobs per queue state
    repositories: list[RunRepository] = field(default_factory=list)
    backlogs: list[Backlog] | None = None  # read at the end (a report), not while following

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
        return {key: r.status for key, r in last_results(self.ran).items()}

    def left_open(self) -> int:
        return sum(len(b.left) for b in self.backlogs or [])

    def stop_reason(self, repo_key: str | None = None) -> str:
        """Why the run stopped; with `repo_key`, the backlog's words are that repository's."""
        if self.run.cancelled_at is not None:
            return CANCELLED
        if not self.finished:
            return "still running"
        reasons = [r.reason for r in self.rows if r.status == SKIPPED and ("budget" in r.reason or "count" in r.reason)]
        reasons += [r.reason for r in self.rows if r.status == "budget"]
        if reasons:
            return reasons[0]
        failed = self.jobs.get("failed", 0)
        if failed:
            return f"{failed} job(s) failed; see the workers' output"
        left = [x for b in self.backlogs or [] if repo_key in (None, b.repo_key) for x in b.left]
        if any(x.why.startswith("never reached") for x in left):
            return "tasks were left ready that no job ran; see the tasks not closed"
        if left:
            return f"no task left ready: {len(left)} not closed, blocked or waiting on a task that is not closed"
        return "backlog empty"

    def summary(self) -> dict[str, Any]:
        ran, last = self.ran, self.last_status()
        meter = total_meter(ran)
        return {
            "runId": self.run.id,
            "stopReason": self.stop_reason(),
            "cancelled": self.run.cancelled_at is not None,
            "limits": {"maxTasks": self.run.max_tasks, "maxCostUsd": self.run.max_cost,
                       "deadline": self.run.deadline.isoformat() if self.run.deadline else None},
            "totals": {
                "tasks": len(last),
                "closed": sum(status == "closed" for status in last.values()),
                "blocked": sum(status == "blocked" for status in last.values()),
                "notClosed": self.left_open() if self.backlogs is not None else None,
                "jobRuns": len(ran),
                "jobs": self.jobs,
                **meter.as_dict(),
                "workers": sorted({r.worker for r in ran}),
                "ledgerSpentUsd": round(self.run.spent_cost, 6),
                "ledgerLostUsd": round(self.run.lost_cost, 6),
            },
            "repositories": [self._repository(key, rows) for key, rows in self._by_repository().items()],
            "skipped": [{"repository": r.repo, "taskId": r.task_id, "reason": r.reason}
                        for r in self.rows if r.status in NOT_RUN],
        }

    def page(self) -> str:
        ran, last = self.ran, self.last_status()
        closed = sum(status == "closed" for status in last.values())
        tally = f"{closed} of {len(last)} task(s) closed, in {len(ran)} job run(s)"
        return render_page(self.run.id, [_outcome(r, qualified=True) for r in ran], [self._story(r) for r in ran],
                           stop_reason=self.stop_reason(), meter=total_meter(ran), tally=tally,
                           workers=[r.worker for r in ran], rows_heading="Job runs", sections=self._sections())

    def write(self, folder: Path, body: dict[str, Any]) -> tuple[Path, Path]:
        """`body` (its `summary()`) as `<runId>-summary.json` and the page as `<runId>.html`
        in `folder`; their paths."""
        name = safe_name(self.run.id)  # ids are checked where a user gives one; never a path, whatever the row says
        summary = folder / f"{name}-summary.json"
        page = folder / f"{name}.html"
        atomic_write(summary, orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
        atomic_write(page, self.page().encode("utf-8"))
        return summary, page

    # -- per repository ----------------------------------------------------------------

    def _by_repository(self) -> dict[str, list[OutcomeRow]]:
        """The run's repositories (as given, then any other a row names), each with its rows."""
        grouped: dict[str, list[OutcomeRow]] = {r.repo_key: [] for r in self.repositories}
        grouped.update({b.repo_key: [] for b in self.backlogs or [] if b.repo_key not in grouped})
        for r in self.ran:
            grouped.setdefault(r.repo_key, []).append(r)
        return grouped

    def _repository(self, key: str, rows: list[OutcomeRow]) -> dict[str, Any]:
        where = self._where(key, rows)
        report = RepoReport(Path(name_of_key(key)), self.run.id, [_outcome(r) for r in rows],
                            stop_reason=self.stop_reason(key))
        block = report.summary()
        block["projectDir"] = block["repository"] = where.repo  # the URL: a fleet's repositories are on no one disk
        block["branch"] = where.branch
        for row, task in zip(rows, block["tasks"], strict=True):
            task.update(worker=row.worker, title=row.title or self._title_at_tip(row),
                        escalation=_packet(row.escalation))
        backlog = next((b for b in self.backlogs or [] if b.repo_key == key), None)
        if backlog is not None:
            block["notClosed"] = [x.as_dict() for x in backlog.left]
            block["backlogError"] = backlog.error
        return block

    def _where(self, key: str, rows: list[OutcomeRow]) -> RunRepository:
        """The repository's URL and base branch, from the run's record, else its rows."""
        for r in self.repositories:
            if r.repo_key == key:
                return r
        for b in self.backlogs or []:
            if b.repo_key == key:
                return RunRepository(b.repo, key, b.branch)
        return RunRepository(rows[0].repo if rows else "", key, "")

    def _story(self, r: OutcomeRow) -> TaskStory:
        lines = list(r.story)
        if r.worker:
            lines.insert(0, f"run by {r.worker}")
        packet = _packet(r.escalation)
        if packet:
            where = self._where(r.repo_key, [r])
            lines.append(f"escalation packet: {packet} on {where.branch or 'the base branch'} of {where.repo}")
        title = r.title or self._title_at_tip(r)
        return TaskStory(f"{name_of_key(r.repo_key)}:{r.task_id}", title, r.started_at, r.finished_at or r.started_at,
                         lines)

    def _title_at_tip(self, r: OutcomeRow) -> str:
        """A row without a title (its worker died before it read the task): the backlog's."""
        return next((b.titles.get(r.task_id, "") for b in self.backlogs or [] if b.repo_key == r.repo_key), "")

    def _sections(self) -> list[Section]:
        if self.backlogs is None:
            return []
        rows: list[tuple[str, ...]] = []
        for b in self.backlogs:
            name = name_of_key(b.repo_key)
            if b.error:
                rows.append((name, "", "", f"its backlog could not be read: {b.error}"))
            rows += [(f"{name}:{x.task_id}", x.title, x.status, x.why) for x in b.left]
        return [Section("Not closed at the end", ("task", "title", "status", "why"), rows,
                        empty="Every task of every backlog is closed.")]


def total_meter(rows: Sequence[OutcomeRow]) -> Meter:
    meter = Meter()
    for r in rows:
        meter.merge(_meter(r))
    return meter


def _meter(r: OutcomeRow) -> Meter:
    # A row keeps calls, not model requests: whether every call said what its cache served is
    # told against the calls.
    return Meter(r.calls, r.input_tokens, r.output_tokens, r.cost, requests=r.calls, cached_tokens=r.cached_tokens,
                 cache_reported=r.cache_reported)


def _packet(path: str | None) -> str | None:
    """An escalation packet's path in the repository (rows of older workers hold the path
    in their worktree: what follows `.openagents/` is the same)."""
    if not path:
        return None
    posix = PurePosixPath(path)
    if not posix.is_absolute():
        return str(posix)
    text = str(posix)
    at = text.find("/" + PREFIX)
    return text[at + 1:] if at >= 0 else text


def _outcome(r: OutcomeRow, *, qualified: bool = False) -> TaskOutcome:
    """The row as a local run's outcome; its packet is named in its story, with its branch."""
    task_id = f"{name_of_key(r.repo_key)}:{r.task_id}" if qualified else r.task_id
    return TaskOutcome(task_id, cast(TaskStatus, r.status), r.reason, list(r.commits), r.attempts, r.reflections,
                       _meter(r), r.duration_s, None)
