"""`goldenloop fleet cancel`: a run stopped on purpose, in the order that leaves no gap.

1. The run is marked cancelled (`records.cancel_run`): from now on a job of it that
   starts anyway ends at its claim (`skipped`), and no worker queues a task that became
   ready into it (`queue.defer_ready`), nor does `enqueue --run`.
2. Its waiting jobs are cancelled through Procrastinate (`cancel_job_by_id`): no worker
   takes them (a job waiting for a retry is a waiting job too).
3. With `abort`, its running jobs are asked to stop (Procrastinate's abort request,
   which reaches their worker at once by NOTIFY, else within seconds by polling): the
   worker cancels the task where it stands, puts it back to open in its worktree and
   pushes nothing, as a worker told to stop does; the job ends `aborted`. Without it, a
   running job finishes its task and integrates it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from orchestrator.fleet import records
from orchestrator.fleet.queue import RunJob, make_app, run_jobs
from reflection.postgres.connection import Database


@dataclass
class Cancelled:
    """What cancelling a run did."""

    run_id: str
    now: bool  # False: the run had been cancelled before
    waiting: list[RunJob] = field(default_factory=list)  # cancelled before they started
    aborted: list[RunJob] = field(default_factory=list)  # running, asked to stop
    running: list[RunJob] = field(default_factory=list)  # running, left to finish (no abort)


async def cancel(db: Database, url: str, run: records.Run, *, abort: bool) -> Cancelled:
    """Cancel `run` (see the module's docstring)."""
    now = await anyio.to_thread.run_sync(records.cancel_run, db, run.id)
    done = Cancelled(run.id, now)
    jobs = await anyio.to_thread.run_sync(run_jobs, db, run.id)
    app = make_app(url)
    async with app.open_async():
        for job in jobs:
            if job.state == "todo" and await app.job_manager.cancel_job_by_id_async(job.id):
                done.waiting.append(job)
            elif job.state == "doing" and abort and await app.job_manager.cancel_job_by_id_async(job.id, abort=True):
                done.aborted.append(job)
            elif job.state == "doing":
                done.running.append(job)
    return done
