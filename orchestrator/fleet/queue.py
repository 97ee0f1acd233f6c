"""The job queue: Procrastinate on the fleet's PostgreSQL, one job per task of one repository.

Why Procrastinate: it needs nothing but PostgreSQL (which holds the ledger and the
memory anyway), it is async, maintained, and has what a fleet needs: a `lock` (no two
jobs with one lock run at once), a `queueing_lock` (no two such jobs wait at once),
priorities, retries, and workers' heartbeats from which jobs of dead workers are found.

A job is `goldenloop.run_task(repo, branch, task, run)` on queue `goldenloop`. Its lock
and its queueing lock are the repository's key and the task's id, so the queue never
lets two workers run one task at once and putting a task on the queue twice is a no-op.
Its priority is the task's (0, the most urgent, runs first). An infrastructure failure
(git fetch failed, the database went away, even for longer than a job's database work
waits for it) is retried with a doubling wait; a task that was stopped (a worker told to
stop) goes back to the queue at once. A blocked task is no failure: the job succeeded,
the task needs a human.

A task gets one job per run: `defer_ready` skips a task that has a job waiting or running
(in any run) or that had one in the run, except that `enqueue --run` may queue again a
task whose jobs in the run all ended without success (failed, cancelled, aborted). A
cancelled run gets no new job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio
from procrastinate import App, BaseRetryStrategy, JobContext, PsycopgConnector, RetryDecision
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.jobs import Job

from orchestrator.fleet.mirror import RepoRef
from orchestrator.tasks import Task
from reflection.postgres.connection import Database, PostgresUnavailable, first_line, server_gone

if TYPE_CHECKING:
    import psycopg

QUEUE = "goldenloop"
TASK_NAME = "goldenloop.run_task"
POOL_MAX = 4  # per process: a worker listens on one, defers and finishes jobs on others
INFRA_RETRIES = 8  # an infrastructure failure is retried this many times, after 1, 2, 4 ... 128 s (4 min in all)
PUT_BACK_RETRIES = 50  # a job whose workers keep being stopped: past this, it fails (a human looks)
RUNNER = "fleet"  # the key of the worker object in a job's context
LIVE = ("todo", "doing")
UNSUCCESSFUL = ("failed", "cancelled", "aborted")  # a job that ended so may be queued again by `enqueue --run`


class InfraError(Exception):
    """Something outside the task failed (git, the network, the database); the job is retried."""


class PutBack(Exception):
    """The worker was told to stop mid-task: the task was put back; the job goes back at once."""


class JobRunner(Protocol):
    async def run_job(self, job: Job, *, repo: str, branch: str, task: str, run: str) -> str: ...


def make_app(url: str) -> App:
    """The queue at `url`, its task registered; open it with `open_async`."""
    connector = PsycopgConnector(conninfo=url, min_size=1, max_size=POOL_MAX, kwargs={"connect_timeout": 10},
                                 configure=_autocommit)
    app = App(connector=connector)
    app.task(name=TASK_NAME, queue=QUEUE, pass_context=True, retry=Retry())(_run_task)
    return app


async def _autocommit(conn: psycopg.AsyncConnection) -> None:
    """Each of the queue's calls is one statement (one of its functions): as atomic alone
    as wrapped in BEGIN and COMMIT, which would cost two more round trips per call."""
    await conn.set_autocommit(True)


async def _run_task(context: JobContext, repo: str, branch: str, task: str, run: str) -> str:
    """The job: the worker's `run_job`; the database lost under it is an infrastructure error."""
    runner: JobRunner = context.additional_context[RUNNER]
    try:
        return await runner.run_job(context.job, repo=repo, branch=branch, task=task, run=run)
    except (InfraError, PutBack):
        raise
    except Exception as exc:
        if infrastructure(exc):
            raise InfraError(first_line(exc)) from exc
        raise


def infrastructure(exc: BaseException) -> bool:
    """Whether `exc` failed outside the task: ours (InfraError), PostgreSQL that did not answer
    for as long as a job's database work waits (PostgresUnavailable), or a connection lost
    (psycopg's error, or Procrastinate's wrapping of it)."""
    if isinstance(exc, InfraError | PostgresUnavailable):
        return True
    return any(server_gone(e) for e in (exc, exc.__cause__) if e is not None)


class Retry(BaseRetryStrategy):
    """An infrastructure failure: again after 1, 2, 4 ... s; a task put back: again at once."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if isinstance(exception, PutBack) and job.attempts < PUT_BACK_RETRIES:
            return RetryDecision()
        if infrastructure(exception) and job.attempts < INFRA_RETRIES:
            return RetryDecision(retry_in={"seconds": 2 ** job.attempts})
        return None


def job_lock(ref: RepoRef, task_id: str) -> str:
    return f"goldenloop:{ref.key}:{task_id}"


@dataclass
class Deferred:
    """What putting a repository's ready tasks on the queue did."""

    queued: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # a job of it waits or runs (in this run or another)
    ran: list[str] = field(default_factory=list)  # it had its job in this run already
    cancelled: bool = False  # the run was cancelled: nothing is queued into it


async def defer_ready(app: App, db: Database, run_id: str, ref: RepoRef, ready: Sequence[Task], *,
                      again: bool = False) -> Deferred:
    """Queue each ready task that has no live job and had none in this run (with `again`:
    none that succeeded). Called under the repository's integration lock, so that two
    workers never queue one task twice; a cancelled run gets nothing."""
    done = Deferred()
    jobs = await anyio.to_thread.run_sync(task_jobs, db, run_id, ref)
    if jobs is None:  # the run is cancelled, or gone
        done.cancelled = True
        return done
    for task in ready:
        found = jobs.get(task.id, TaskJobs())
        if found.live:
            done.waiting.append(task.id)
        elif found.in_run and not (again and found.ended_without_success):
            done.ran.append(task.id)
        elif await _defer(app, run_id, ref, task):
            done.queued.append(task.id)
        else:
            done.waiting.append(task.id)
    return done


async def _defer(app: App, run_id: str, ref: RepoRef, task: Task) -> bool:
    """Put one task on the queue; False when the queue holds a waiting job of it already."""
    lock = job_lock(ref, task.id)
    deferrer = app.configure_task(TASK_NAME, lock=lock, queueing_lock=lock, priority=-task.priority)
    try:
        await deferrer.defer_async(repo=ref.url, branch=ref.branch, task=task.id, run=run_id)
    except AlreadyEnqueued:
        return False
    return True


@dataclass
class TaskJobs:
    """One task's jobs as `defer_ready` weighs them."""

    live: bool = False  # a job of it waits or runs, in any run
    in_run: list[str] = field(default_factory=list)  # the states of its jobs in this run

    @property
    def ended_without_success(self) -> bool:
        return bool(self.in_run) and all(state in UNSUCCESSFUL for state in self.in_run)


def task_jobs(db: Database, run_id: str, ref: RepoRef) -> dict[str, TaskJobs] | None:
    """The repository's tasks that have a live job, or had a job in the run (found by the
    job's lock: however the URL was spelt); None when the run is cancelled or gone. One
    statement: the run's row, joined to its jobs."""
    prefix = job_lock(ref, "").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = db.run(lambda conn: conn.execute(
        "SELECT r.cancelled_at IS NOT NULL, j.task, j.here, j.state FROM goldenloop_runs r LEFT JOIN ("
        " SELECT args->>'task' AS task, args->>'run' = %(run)s AS here, status::text AS state FROM procrastinate_jobs"
        " WHERE task_name = %(name)s AND lock LIKE %(prefix)s"
        " AND (args->>'run' = %(run)s OR status::text = ANY(%(live)s))) j ON true WHERE r.id = %(run)s",
        {"run": run_id, "name": TASK_NAME, "prefix": prefix + "%", "live": list(LIVE)}).fetchall())
    if not rows or rows[0][0]:
        return None
    found: dict[str, TaskJobs] = {}
    for _, task_id, here, state in rows:
        if task_id is None:
            continue  # the run has no job of this repository (the join's one empty row)
        jobs = found.setdefault(task_id, TaskJobs())
        jobs.live = jobs.live or state in LIVE
        if here:
            jobs.in_run.append(state)
    return found


@dataclass(frozen=True)
class RunJob:
    """One job of a run, as the queue holds it."""

    id: int
    state: str
    repo_key: str
    task_id: str
    repo: str = ""
    branch: str = ""


def run_jobs(db: Database, run_id: str) -> list[RunJob]:
    """Every job of the run, oldest first."""
    rows = db.run(lambda conn: conn.execute(
        "SELECT id, status::text, lock, args->>'task', args->>'repo', args->>'branch' FROM procrastinate_jobs"
        " WHERE task_name = %s AND args->>'run' = %s ORDER BY id", (TASK_NAME, run_id)).fetchall())
    return [RunJob(int(job_id), state, _key_of(lock or ""), task, repo or "", branch or "")
            for job_id, state, lock, task, repo, branch in rows]


def _key_of(lock: str) -> str:
    """The repository's key in a job's lock (`goldenloop:<key>:<task>`)."""
    parts = lock.split(":", 2)
    return parts[1] if len(parts) == 3 else ""


def queue_busy(db: Database) -> bool:
    """Whether any job of the queue is waiting or running (a worker may still add more)."""
    row = db.run(lambda conn: conn.execute(
        "SELECT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE queue_name = %s AND status IN ('todo', 'doing'))",
        (QUEUE,)).fetchone())
    return bool(row and row[0])
