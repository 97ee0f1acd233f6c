"""A run's record in the database: its limits, the task slots its jobs claim, their outcomes.

A job claims a task slot before it starts anything, in one transaction that locks the
run's row: past the deadline, with the cost budget spent, or with every slot of
`--max-tasks` claimed, the job ends without running and its row says why (`skipped`).
A job run again (its worker died, or was stopped) claims no second slot: a task counts
once against the task count however many times its job starts, as `overnight` counts a
task when a worker claims it.

An outcome row is written `running` when the job starts (its task's title is added as
soon as the worker has read it) and finished when it ends, so a row left `running` by a
worker that died shows in the report as `lost`, with its title, once its job has been
handed to another worker.

A run cancelled (`goldenloop fleet cancel`) keeps its rows; a job of it that starts
anyway ends at its claim, `skipped`. Run ids are goldenloop's own (`new_run_id`): one
given by a user is checked against that form before it names a file or a query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from orchestrator.loop.outcome import TaskOutcome
from reflection.postgres.connection import Database

if TYPE_CHECKING:
    import psycopg

RUNNING, SKIPPED, LOST = "running", "skipped", "lost"
STOPPED = "the job stopped before it ended (its worker died, or lost the database) and ran again"
DIED = (RUNNING, LOST, "error")  # how an earlier run of a job that did not end cleanly is recorded
CANCELLED = "the run was cancelled (goldenloop fleet cancel)"
RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}")  # as orchestrator.runlog.new_run_id makes them
RUN_ID_EXAMPLE = "20261124T220000Z-3fa2c1"


class NoRun(LookupError):
    """No run of that id here, or none that may take more work; `str()` is one sentence."""


def check_run_id(run_id: str | None) -> None:
    """NoRun unless `run_id` (when given) has the form of the ids goldenloop makes: a run id
    names files (`<run>.html`) and must never lead outside their folder."""
    if run_id is not None and RUN_ID.fullmatch(run_id) is None:
        raise NoRun(f"{run_id!r} is not a run id: goldenloop's look like {RUN_ID_EXAMPLE}")


@dataclass(frozen=True)
class Run:
    id: str
    created_at: datetime
    max_tasks: int | None
    max_cost: float | None
    deadline: datetime | None
    started_tasks: int
    spent_cost: float
    lost_cost: float  # holds of calls whose worker died, counted as spent
    cancelled_at: datetime | None = None

    def seconds_left(self) -> float | None:
        if self.deadline is None:
            return None
        return (self.deadline - datetime.now(UTC)).total_seconds()


_RUN_COLUMNS = "id, created_at, max_tasks, max_cost, deadline, started_tasks, spent_cost, lost_cost, cancelled_at"


@dataclass
class OutcomeRow:
    """One job run of one task, as the database keeps it."""

    id: int
    run_id: str
    repo: str  # the repository's URL, never with a password
    repo_key: str
    task_id: str
    job_id: int | None
    worker: str
    status: str
    reason: str = ""
    attempts: int = 0
    reflections: int = 0
    commits: list[str] = field(default_factory=list)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    duration_s: float = 0.0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    title: str = ""
    story: list[str] = field(default_factory=list)
    escalation: str | None = None
    cached_tokens: int = 0
    cache_reported: int = 0  # the calls whose provider said what its cache served


_OUTCOME_COLUMNS = ("id, run_id, repo, repo_key, task_id, job_id, worker, status, reason, attempts, reflections, "
                    "commits, calls, input_tokens, output_tokens, cost, duration_s, started_at, finished_at, title, "
                    "story, escalation, cached_tokens, cache_reported")


@dataclass(frozen=True)
class Job:
    """Which task a job runs, for the records: the repository as shown, its key, the task."""

    run_id: str
    job_id: int | None
    repo: str
    repo_key: str
    task_id: str
    worker: str


# -- runs -------------------------------------------------------------------------------


def create_run(db: Database, run_id: str, *, max_tasks: int | None, max_hours: float | None,
               max_cost: float | None) -> Run:
    """The run `run_id`, created with these limits unless it exists (then kept as it is)."""
    deadline = datetime.now(UTC) + timedelta(hours=max_hours) if max_hours is not None else None

    def work(conn: psycopg.Connection) -> Run:
        conn.execute("INSERT INTO goldenloop_runs (id, max_tasks, max_cost, deadline) VALUES (%s, %s, %s, %s)"
                     " ON CONFLICT (id) DO NOTHING", (run_id, max_tasks, max_cost, deadline))
        return _run_row(conn, run_id)  # type: ignore[return-value]  # just written

    return db.run(work)


def get_run(db: Database, run_id: str | None = None) -> Run | None:
    """The run `run_id`, or the newest one; None when there is none."""
    return db.run(lambda conn: _run_row(conn, run_id))


def find_run(db: Database, run_id: str | None, *, to_add: bool = False) -> Run:
    """The run `run_id` (default: the newest); NoRun when there is none, or, `to_add` (work
    is to be queued into it), when it was cancelled."""
    check_run_id(run_id)
    run = get_run(db, run_id)
    if run is None:
        raise NoRun(f"no run {run_id} on this queue" if run_id else "no run on this queue yet")
    if to_add and run.cancelled_at is not None:
        raise NoRun(f"run {run.id} was cancelled: leave out --run to start a new one")
    return run


def forget_run(db: Database, run_id: str) -> None:
    """Delete a run that got no job (nothing was queued): it must not become the newest."""
    db.run(lambda conn: conn.execute("DELETE FROM goldenloop_runs WHERE id = %s", (run_id,)))


def cancel_run(db: Database, run_id: str) -> bool:
    """Mark the run cancelled: no job of it starts a task any more, no task is queued into
    it. Whether it was cancelled now (False: it already was)."""
    return db.run(lambda conn: conn.execute(
        "UPDATE goldenloop_runs SET cancelled_at = now() WHERE id = %s AND cancelled_at IS NULL", (run_id,)
    ).rowcount) == 1


@dataclass(frozen=True)
class RunRepository:
    """A repository a run was given: its URL (never with a password), key and base branch."""

    repo: str
    repo_key: str
    branch: str


def add_repository(db: Database, run_id: str, repository: RunRepository) -> None:
    db.run(lambda conn: conn.execute(
        "INSERT INTO goldenloop_run_repositories (run_id, repo_key, repo, branch) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (run_id, repo_key) DO NOTHING",
        (run_id, repository.repo_key, repository.repo, repository.branch)))


def repositories(db: Database, run_id: str) -> list[RunRepository]:
    """The run's repositories, in the order they were given."""
    rows = db.run(lambda conn: conn.execute(
        "SELECT repo, repo_key, branch FROM goldenloop_run_repositories WHERE run_id = %s ORDER BY added",
        (run_id,)).fetchall())
    return [RunRepository(*row) for row in rows]


def _run_row(conn: psycopg.Connection, run_id: str | None, *, lock: bool = False) -> Run | None:
    where = "WHERE id = %s" if run_id is not None else "ORDER BY created_at DESC, id DESC LIMIT 1"
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM goldenloop_runs {where}{' FOR UPDATE' if lock else ''}",
                       (run_id,) if run_id is not None else ()).fetchone()
    return Run(*row) if row else None


# -- claiming a task slot ---------------------------------------------------------------


def claim(db: Database, job: Job) -> tuple[int, Run] | str:
    """The job's outcome row (`running`) and its run when it may start, else the reason it
    may not (its row then says `skipped`). One transaction on the run's locked row: the
    run and whether this job ran before in one statement, the count and the row in another."""

    def work(conn: psycopg.Connection) -> tuple[int, Run] | str:
        found = conn.execute(
            f"SELECT {_RUN_COLUMNS}, EXISTS (SELECT 1 FROM goldenloop_outcomes WHERE job_id = %s AND status <> %s)"
            " FROM goldenloop_runs WHERE id = %s FOR UPDATE", (job.job_id, SKIPPED, job.run_id)).fetchone()
        if found is None:
            return _skip(conn, job, f"run {job.run_id} is not in this database")
        run, rerun = Run(*found[:-1]), job.job_id is not None and bool(found[-1])
        reason = _limit_reached(run, counted=not rerun)
        if reason:
            return _skip(conn, job, reason)
        if rerun:  # its earlier run never ended: its worker died, or lost the database
            conn.execute("UPDATE goldenloop_outcomes SET status = %s, reason = %s, finished_at = now()"
                         " WHERE job_id = %s AND status = %s", (LOST, STOPPED, job.job_id, RUNNING))
        row = conn.execute(
            "WITH counted AS (UPDATE goldenloop_runs SET started_tasks = started_tasks + 1 WHERE id = %s AND %s)"
            " INSERT INTO goldenloop_outcomes (run_id, repo, repo_key, task_id, job_id, worker, status)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (run.id, not rerun, job.run_id, job.repo, job.repo_key, job.task_id, job.job_id, job.worker, RUNNING),
        ).fetchone()
        assert row is not None
        return int(row[0]), run

    return db.transaction(work)


def _limit_reached(run: Run, *, counted: bool) -> str | None:
    if run.cancelled_at is not None:
        return CANCELLED
    left = run.seconds_left()
    if left is not None and left <= 0:
        return "time budget used up"
    if run.max_cost is not None and run.spent_cost >= run.max_cost:
        return f"cost budget used up (${run.spent_cost:.4f} of ${run.max_cost:.4f})"
    if counted and run.max_tasks is not None and run.started_tasks >= run.max_tasks:
        return f"task count reached ({run.max_tasks})"
    return None


def _skip(conn: psycopg.Connection, job: Job, reason: str) -> str:
    conn.execute(
        "INSERT INTO goldenloop_outcomes (run_id, repo, repo_key, task_id, job_id, worker, status, reason,"
        " finished_at) SELECT %s, %s, %s, %s, %s, %s, %s, %s, now()"
        " WHERE EXISTS (SELECT 1 FROM goldenloop_runs WHERE id = %s)",
        (job.run_id, job.repo, job.repo_key, job.task_id, job.job_id, job.worker, SKIPPED, reason, job.run_id),
    )
    return reason


# -- ends -------------------------------------------------------------------------------


def set_title(db: Database, row_id: int, title: str) -> None:
    """The task's title on its row as soon as it is known: a row its worker never finishes
    (`lost`) still names its task."""
    db.run(lambda conn: conn.execute("UPDATE goldenloop_outcomes SET title = %s WHERE id = %s", (title, row_id)))


def finish(db: Database, row_id: int, outcome: TaskOutcome | None, *, status: str | None = None,
           reason: str | None = None, title: str | None = None, story: list[str] | None = None) -> None:
    """Close the job's row with how the task ended (`status`/`reason` win over the outcome's;
    `title` None keeps the title the row has)."""
    o = outcome or TaskOutcome("", "interrupted", "")
    m = o.meter
    values: dict[str, Any] = {
        "status": status or o.status, "reason": reason if reason is not None else o.reason,
        "attempts": o.attempts, "reflections": o.reflections, "commits": orjson.dumps(o.commits).decode(),
        "calls": m.calls, "input_tokens": m.input_tokens, "output_tokens": m.output_tokens,
        "cached_tokens": m.cached_tokens, "cache_reported": m.cache_reported,
        "cost": m.cost_usd if m.calls else 0.0, "duration_s": round(o.duration_s, 3),
        "story": orjson.dumps(story or []).decode(), "escalation": str(o.escalation) if o.escalation else None,
        **({"title": title} if title is not None else {}),
    }
    assignments = ", ".join(f"{k} = %({k})s{'::jsonb' if k in ('commits', 'story') else ''}" for k in values)
    db.run(lambda conn: conn.execute(
        f"UPDATE goldenloop_outcomes SET {assignments}, finished_at = now() WHERE id = %(row)s",
        {**values, "row": row_id},
    ))


def abandon(db: Database, row_id: int, status: str, reason: str) -> None:
    """Close a row its job could not finish itself, unless it was finished already."""
    db.run(lambda conn: conn.execute(
        "UPDATE goldenloop_outcomes SET status = %s, reason = %s, finished_at = now() WHERE id = %s AND status = %s",
        (status, reason, row_id, RUNNING)))


def died_before(db: Database, job_id: int | None, row_id: int) -> bool:
    """Whether an earlier run of this job ended without saying how (see DIED)."""
    if job_id is None:
        return False
    found = db.run(lambda conn: conn.execute(
        "SELECT 1 FROM goldenloop_outcomes WHERE job_id = %s AND id <> %s AND status = ANY(%s) LIMIT 1",
        (job_id, row_id, list(DIED))).fetchone())
    return found is not None


def mark_lost(db: Database, job_id: int, reason: str) -> int:
    """The rows a dead worker left `running` for `job_id`; how many."""
    return db.run(lambda conn: conn.execute(
        "UPDATE goldenloop_outcomes SET status = %s, reason = %s, finished_at = now()"
        " WHERE job_id = %s AND status = %s", (LOST, reason, job_id, RUNNING),
    ).rowcount)


def outcomes(db: Database, run_id: str) -> list[OutcomeRow]:
    """Every row of the run, in the order the jobs started."""
    rows = db.run(lambda conn: conn.execute(
        f"SELECT {_OUTCOME_COLUMNS} FROM goldenloop_outcomes WHERE run_id = %s ORDER BY started_at, id", (run_id,)
    ).fetchall())
    return [OutcomeRow(*row) for row in rows]


def last_results(rows: Sequence[OutcomeRow]) -> dict[tuple[str, str], OutcomeRow]:
    """Per (repository key, task): its last row, except that a row which left no result (a
    worker that died, a result dropped because another landed first) never replaces one."""
    found: dict[tuple[str, str], OutcomeRow] = {}
    for r in rows:
        key = (r.repo_key, r.task_id)
        if r.status not in (LOST, "dropped") or key not in found:
            found[key] = r
    return found
