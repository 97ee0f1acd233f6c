"""The job queue: Procrastinate on the fleet's PostgreSQL, one job per task of one repository.

Why Procrastinate: it needs nothing but PostgreSQL (which holds the ledger and the
memory anyway), it is async, maintained, and has what a fleet needs: a `lock` (no two
jobs with one lock run at once), a `queueing_lock` (no two such jobs wait at once),
priorities, retries, and workers' heartbeats from which jobs of dead workers are found.

A job is `goldenloop.run_task(repo, branch, task, run)` on queue `goldenloop`. Its lock
and its queueing lock are the repository's key and the task's id, so the queue never
lets two workers run one task at once and putting a task on the queue twice is a no-op.
Its priority is the task's (0, the most urgent, runs first). An infrastructure failure
(git fetch failed, the database went away) is retried with a doubling wait; a task that
was stopped (a worker told to stop) goes back to the queue at once. A blocked task is no
failure: the job succeeded, the task needs a human.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import anyio
from procrastinate import App, BaseRetryStrategy, JobContext, PsycopgConnector, RetryDecision
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.jobs import Job

from orchestrator.fleet.mirror import Mirrors, RepoRef
from orchestrator.layout import PREFIX
from orchestrator.tasks import Task, TaskBoard, TaskFileError
from reflection.postgres.connection import Database

QUEUE = "goldenloop"
TASK_NAME = "goldenloop.run_task"
POOL_MAX = 4  # per process: a worker listens on one, defers and finishes jobs on others
INFRA_RETRIES = 8  # an infrastructure failure is retried this many times, after 1, 2, 4 ... 128 s (4 min in all)
PUT_BACK_RETRIES = 50  # a job whose workers keep being stopped: past this, it fails (a human looks)
RUNNER = "fleet"  # the key of the worker object in a job's context


class InfraError(Exception):
    """Something outside the task failed (git, the network, the database); the job is retried."""


class PutBack(Exception):
    """The worker was told to stop mid-task: the task was put back; the job goes back at once."""


class JobRunner(Protocol):
    async def run_job(self, job: Job, *, repo: str, branch: str, task: str, run: str) -> str: ...


def make_app(url: str) -> App:
    """The queue at `url`, its task registered; open it with `open_async`."""
    connector = PsycopgConnector(conninfo=url, min_size=1, max_size=POOL_MAX, kwargs={"connect_timeout": 10})
    app = App(connector=connector)
    app.task(name=TASK_NAME, queue=QUEUE, pass_context=True, retry=Retry())(_run_task)
    return app


async def _run_task(context: JobContext, repo: str, branch: str, task: str, run: str) -> str:
    runner: JobRunner = context.additional_context[RUNNER]
    return await runner.run_job(context.job, repo=repo, branch=branch, task=task, run=run)


class Retry(BaseRetryStrategy):
    """An infrastructure failure: again after 1, 2, 4 ... s; a task put back: again at once."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if isinstance(exception, PutBack) and job.attempts < PUT_BACK_RETRIES:
            return RetryDecision()
        if isinstance(exception, InfraError) and job.attempts < INFRA_RETRIES:
            return RetryDecision(retry_in={"seconds": 2 ** job.attempts})
        return None


def job_lock(ref: RepoRef, task_id: str) -> str:
    return f"goldenloop:{ref.key}:{task_id}"


@dataclass
class Deferred:
    """What putting a repository's ready tasks on the queue did."""

    queued: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # already on the queue (this run or another)


async def defer_ready(app: App, db: Database, run_id: str, ref: RepoRef, ready: Sequence[Task]) -> Deferred:
    """Queue each ready task that has had no job in this run yet. Called under the
    repository's integration lock, so that two workers never queue one task twice."""
    had = await anyio.to_thread.run_sync(jobs_of_run, db, run_id, ref)
    done = Deferred()
    for task in ready:
        if task.id in had:
            continue
        lock = job_lock(ref, task.id)
        deferrer = app.configure_task(TASK_NAME, lock=lock, queueing_lock=lock, priority=-task.priority)
        try:
            await deferrer.defer_async(repo=ref.url, branch=ref.branch, task=task.id, run=run_id)
        except AlreadyEnqueued:
            done.waiting.append(task.id)
            continue
        done.queued.append(task.id)
    return done


def ready_at(mirrors: Mirrors, ref: RepoRef, commit: str) -> list[Task]:
    """The tasks ready at `commit` of the mirror, most urgent first (the archive consulted
    for dependencies, as a run would); TaskFileError when the commit has no backlog."""
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
        return TaskBoard(root / "tasks.jsonl", archive=root / "archive").ready()


def jobs_of_run(db: Database, run_id: str, ref: RepoRef) -> set[str]:
    """The tasks of the repository that have or had a job in the run (by its lock: however
    the URL was spelt)."""
    prefix = job_lock(ref, "").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = db.run(lambda conn: conn.execute(
        "SELECT args->>'task' FROM procrastinate_jobs WHERE task_name = %s AND args->>'run' = %s AND lock LIKE %s",
        (TASK_NAME, run_id, prefix + "%")).fetchall())
    return {row[0] for row in rows}


def job_counts(db: Database, run_id: str) -> dict[str, int]:
    """How many of the run's jobs are in each state (todo, doing, succeeded, failed, ...)."""
    rows = db.run(lambda conn: conn.execute(
        "SELECT status::text, count(*) FROM procrastinate_jobs WHERE task_name = %s AND args->>'run' = %s"
        " GROUP BY status", (TASK_NAME, run_id)).fetchall())
    return {status: int(count) for status, count in rows}


def queue_busy(db: Database) -> bool:
    """Whether any job of the queue is waiting or running (a worker may still add more)."""
    row = db.run(lambda conn: conn.execute(
        "SELECT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE queue_name = %s AND status IN ('todo', 'doing'))",
        (QUEUE,)).fetchone())
    return bool(row and row[0])
