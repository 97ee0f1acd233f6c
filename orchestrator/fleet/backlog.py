"""A repository's backlog as its remote holds it: what is ready, and what is left open and why.

The fleet never trusts a local copy of a backlog: `enqueue` reads which tasks are ready
at the tip of the base branch, and the morning report reads, per repository, which
tasks are still not closed at the end of the run and why, both from this machine's
mirror (`orchestrator.fleet.mirror`), fetched first. A `TaskBoard` reads a file, so the
backlog of a commit (`tasks.jsonl` and the archive it consults for dependencies) is
copied into a temporary folder for it.

Why a task is left open, in the order it is decided:
- `blocked: <reason>`: a human must look (an escalation, a merge conflict);
- `waits on T-6 (blocked)`: a dependency is not closed, as `goldenloop list` says it;
- `on the queue` / `running`: the run is not over for it;
- what its last job in the run said: `left open by the budget`, `put back`, `not started`;
- `never reached`: it was ready, and no job of the run ran it (the run ended first).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.fleet.mirror import GitFailed, Mirrors, RepoRef
from orchestrator.fleet.queue import LIVE, RunJob
from orchestrator.fleet.records import OutcomeRow, RunRepository, last_results
from orchestrator.layout import PREFIX
from orchestrator.tasks import Task, TaskBoard, TaskFileError, waiting_on

PUT_BACK = {"budget": "left open by the budget", "interrupted": "put back",
            "model_unavailable": "put back (the model was unavailable)", "skipped": "not started",
            "lost": "its job did not end", "error": "its job did not end", "refused": "refused"}


@contextmanager
def board_at(mirrors: Mirrors, ref: RepoRef, commit: str) -> Iterator[TaskBoard]:
    """The backlog at `commit` of the mirror, with its archive; TaskFileError when it has none."""
    backlog = mirrors.read(ref, commit, f"{PREFIX}tasks.jsonl")
    if backlog is None:
        raise TaskFileError(f"{ref.url} has no {PREFIX}tasks.jsonl on {ref.branch}")
    with tempfile.TemporaryDirectory(prefix="goldenloop-backlog-") as tmp:
        root = Path(tmp)
        (root / "tasks.jsonl").write_bytes(backlog)
        for path in mirrors.files(ref, commit, f"{PREFIX}archive/"):
            target = root / "archive" / Path(path).name
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(mirrors.read(ref, commit, path) or b"")
        yield TaskBoard(root / "tasks.jsonl", archive=root / "archive")


def ready_at(mirrors: Mirrors, ref: RepoRef, commit: str) -> list[Task]:
    """The tasks ready at `commit`, most urgent first (the archive consulted for dependencies)."""
    with board_at(mirrors, ref, commit) as board:
        return board.ready()


@dataclass(frozen=True)
class LeftOpen:
    """A task not closed at the end of a run, and why."""

    task_id: str
    title: str
    status: str
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"taskId": self.task_id, "title": self.title, "status": self.status, "why": self.why}


@dataclass(frozen=True)
class RunOfTask:
    """What the run did with one task: its job's state, and how its last run ended."""

    job: str = ""  # the queue's state of its newest job in the run ("" when it had none)
    outcome: str = ""  # its last outcome row's status
    reason: str = ""


def left_open(board: TaskBoard, runs: dict[str, RunOfTask]) -> list[LeftOpen]:
    """Every task of the backlog that is not closed, in file order, each with why."""
    statuses = board.statuses()
    closed = {task_id for task_id, status in statuses.items() if status == "closed"} | board.archive.ids()
    return [LeftOpen(t.id, t.title, t.status, why_open(t, statuses, closed, runs.get(t.id, RunOfTask())))
            for t in board.tasks() if t.status != "closed"]


def why_open(task: Task, statuses: dict[str, str], closed: set[str], run: RunOfTask) -> str:
    if task.status == "blocked":
        return f"blocked: {task.close_reason or 'no reason recorded'}"
    waiting = waiting_on(task, closed, statuses)
    if waiting:
        return "waits on " + ", ".join(waiting)
    if run.job in LIVE:
        return "on the queue" if run.job == "todo" else "running"
    if run.outcome:
        said = PUT_BACK.get(run.outcome, run.outcome)
        return f"{said}: {run.reason}" if run.reason else said
    if run.job:
        return f"its job was {run.job}"
    return "never reached: the run ended before a job ran it"


@dataclass
class Backlog:
    """One repository of a run at the end: its tasks left open, or why they could not be read."""

    repo: str
    repo_key: str
    branch: str
    left: list[LeftOpen]
    error: str | None = None
    titles: dict[str, str] = field(default_factory=dict)  # every task's at the tip (a row may lack its own)

    def as_dict(self) -> dict[str, object]:
        return {"repository": self.repo, "branch": self.branch, "notClosed": [x.as_dict() for x in self.left],
                "backlogError": self.error}


def read_backlog(mirrors: Mirrors, ref: RepoRef, runs: dict[str, RunOfTask]) -> Backlog:
    """The repository's tasks left open at its remote tip (fetched now); a backlog that cannot
    be fetched or read says why instead, so a report is written all the same."""
    try:
        with board_at(mirrors, ref, mirrors.fetch_tip(ref)) as board:
            titles = {t.id: t.title for t in board.tasks()}
            return Backlog(ref.url, ref.key, ref.branch, left_open(board, runs), titles=titles)
    except (GitFailed, TaskFileError) as exc:
        return Backlog(ref.url, ref.key, ref.branch, [], error=str(exc))


def read_backlogs(workdir: Path, repositories: Sequence[RunRepository],
                  runs: dict[str, dict[str, RunOfTask]]) -> list[Backlog]:
    """Each repository's tasks left open, read through this machine's mirrors in `workdir`."""
    mirrors = Mirrors(workdir)
    return [read_backlog(mirrors, RepoRef(r.repo, r.branch), runs.get(r.repo_key, {})) for r in repositories]


def runs_of_tasks(rows: Sequence[OutcomeRow], jobs: Sequence[RunJob]) -> dict[str, dict[str, RunOfTask]]:
    """Per repository key and task: its newest job's state, and its last run's end (a run
    that left a result wins over a later one that did not: lost, or dropped)."""
    states = {(job.repo_key, job.task_id): job.state for job in jobs}  # oldest first: the newest stays
    last = last_results(rows)
    found: dict[str, dict[str, RunOfTask]] = {}
    for key in states.keys() | last.keys():
        row = last.get(key)
        found.setdefault(key[0], {})[key[1]] = RunOfTask(states.get(key, ""), row.status if row else "",
                                                         row.reason if row else "")
    return found
