"""The queue's rules, in one process: a database that stays away longer than a job waits for
it sends the job back for a retry (it never fails it); a task whose jobs in a run ended
without success can be queued into that run again, never twice at once; a cancelled run
takes no new job; and `fleet status` says when no worker is there to take the waiting ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from fleetkit import make_remote, query, task
from procrastinate.jobs import Status

from orchestrator.cli import main
from orchestrator.fleet import records
from orchestrator.fleet.mirror import RepoRef
from orchestrator.fleet.queue import QUEUE, RUNNER, defer_ready, make_app
from orchestrator.fleet.schema import open_database
from orchestrator.fleet.worker import FleetWorker, WorkerSettings
from orchestrator.tasks import Task
from reflection.postgres.connection import Database

pytestmark = pytest.mark.postgres

AWAY = "postgresql://bob@127.0.0.1:1/fleet"  # nothing listens on port 1: a database that does not come back


def enqueue(capsys, url: str, workdir: Path, *argv: str) -> dict:
    """`goldenloop enqueue --json ...`: what it printed."""
    assert main(["enqueue", "--queue", url, "--workdir", str(workdir), "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])


def live_jobs(url: str) -> list[tuple[str, int]]:
    return query(url, "SELECT args->>'task', count(*)::int FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
                      " GROUP BY 1 ORDER BY 1")


def test_a_database_away_longer_than_a_job_waits_for_it_sends_the_job_back_for_a_retry(tmp_path, pg_url, capsys):
    remote = make_remote(tmp_path, "one", [task("T-1", "Add one")], "scripted/none.json")
    enqueue(capsys, pg_url, tmp_path / "wd", remote)
    # The job's own database stays away past the time its work waits for it (0.2 s here, 30 s by default).
    away = Database(AWAY, retry_for=0.2)
    app = make_app(pg_url)
    said: list[str] = []
    worker = FleetWorker(WorkerSettings(pg_url, tmp_path / "machine", "w1"), away, app, said.append)

    async def work_what_is_there() -> None:
        async with app.open_async():
            await app.run_worker_async(queues=[QUEUE], name="w1", concurrency=1, wait=False,
                                       install_signal_handlers=False, additional_context={RUNNER: worker})

    anyio.run(work_what_is_there)

    assert query(pg_url, "SELECT status::text, attempts, scheduled_at IS NOT NULL FROM procrastinate_jobs") == [
        ("todo", 1, True)]  # back on the queue, after a pause: not `failed`
    assert "one T-1: the database went away (PostgreSQL at postgresql://bob@127.0.0.1:1/fleet did not answer" \
           in said[-1]
    assert said[-1].endswith("; the job will run again")


def test_a_task_whose_jobs_ended_without_success_can_be_queued_again_into_its_run(tmp_path, pg_url, capsys):
    remote = make_remote(tmp_path, "three", [task(f"T-{n}", f"Add {n}", n=n) for n in (1, 2, 3)],
                         "scripted/none.json")
    run_id = enqueue(capsys, pg_url, tmp_path / "wd", remote)["runId"]
    jobs = {task_id: job_id for job_id, task_id in query(pg_url, "SELECT id, args->>'task' FROM procrastinate_jobs")}

    async def end_two() -> None:  # T-1's job cancelled, T-2's failed (as a job whose workers died three times)
        app = make_app(pg_url)
        async with app.open_async():
            assert await app.job_manager.cancel_job_by_id_async(jobs["T-1"])
            await app.job_manager.finish_job_by_id_async(jobs["T-2"], Status.FAILED, delete_job=False)

    anyio.run(end_two)
    again = enqueue(capsys, pg_url, tmp_path / "wd", remote, "--run", run_id)

    assert again["runId"] == run_id
    assert [(r["queued"], r["alreadyQueued"]) for r in again["repositories"]] == [(["T-1", "T-2"], ["T-3"])]
    assert live_jobs(pg_url) == [("T-1", 1), ("T-2", 1), ("T-3", 1)]  # never two live jobs of one task
    assert main(["enqueue", "--queue", pg_url, "--workdir", str(tmp_path / "wd"), "--run", run_id, remote]) == 3
    assert "nothing new to queue" in capsys.readouterr().out
    assert live_jobs(pg_url) == [("T-1", 1), ("T-2", 1), ("T-3", 1)]
    # No worker has come: the status says so, and what to do.
    assert main(["fleet", "status", "--queue", pg_url]) == 0
    out = capsys.readouterr().out
    assert "  workers: none running (none registered with a heartbeat in the last 5 minutes)\n" in out
    assert out.endswith("  no worker is running: start `goldenloop worker` on a machine\n")
    # `fleet status | head -1`: a reader that stops early is no error.
    status = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "fleet", "status", "--queue", pg_url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    status.stdout.close()  # gone before the first line
    assert status.wait(timeout=60) == 0 and b"Traceback" not in status.stderr.read()


def test_a_cancelled_run_gets_no_new_job_from_anyone(tmp_path, pg_url, capsys):
    remote = make_remote(tmp_path, "two", [task("T-1", "Add one"), task("T-2", "Add two", deps=["T-1"], n=1)],
                         "scripted/none.json")
    run_id = enqueue(capsys, pg_url, tmp_path / "wd", remote)["runId"]

    assert main(["fleet", "cancel", run_id, "--queue", pg_url]) == 0

    assert capsys.readouterr().out == (f"run {run_id} cancelled: no task is queued into it any more; "
                                       "1 waiting job(s) cancelled\n")
    assert query(pg_url, "SELECT status::text FROM procrastinate_jobs") == [("cancelled",)]
    # A worker that closed T-1 would queue T-2, now ready, into the run: not into a cancelled one.
    ready = Task(id="T-2", title="Add two", description="")

    async def as_a_worker_would() -> list[str]:
        app = make_app(pg_url)
        with open_database(pg_url) as db:
            async with app.open_async():
                return (await defer_ready(app, db, run_id, RepoRef(remote, "main"), [ready])).queued

    assert anyio.run(as_a_worker_would) == []
    assert query(pg_url, "SELECT count(*) FROM procrastinate_jobs") == [(1,)]
    # A job of it that a worker fetched just before the cancel ends at its claim.
    with open_database(pg_url) as db:
        job = records.Job(run_id, None, remote, RepoRef(remote).key, "T-1", "w1")
        assert records.claim(db, job) == records.CANCELLED
    assert main(["fleet", "status", run_id, "--queue", pg_url]) == 0
    assert "cancelled" in capsys.readouterr().out.splitlines()[0]
