"""A worker process: Procrastinate's worker around `FleetWorker`, and what keeps a fleet honest.

- One job at a time (`concurrency=1`): a worker is one golden loop; a machine runs
  several workers for several at once.
- Its heartbeat (every lease/3) tells the fleet it lives. Beside it, `keep_leases`
  looks, every lease/3, for jobs whose worker has sent none for a whole lease (SIGKILL,
  a machine gone) and hands them back to the queue, marking their rows `lost`; one
  worker of the fleet does that at a time (an advisory lock), so a job is never handed
  on twice. A job lost three times fails instead: a task that kills its worker must not
  take the fleet down with it. The same loop sweeps what dead workers of this machine
  left (`orchestrator.fleet.mirror.sweep_dead`).
- SIGTERM or SIGINT: the task in flight, if any, is put back (its tree restored), its
  job goes back to the queue for another worker, and the process ends with 130.
- `--until-empty`: the process ends (0) once no job of the queue waits or runs.
- When the database goes away (a restart, a failover), Procrastinate's worker stops;
  this one waits for the database and starts it again. A worker told to stop while the
  database is away does not wait for it past a grace period (`stuck`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any

import anyio
from procrastinate import App
from procrastinate.jobs import Status

from orchestrator.fleet import records
from orchestrator.fleet.locks import STALLED_JOBS
from orchestrator.fleet.mirror import sweep_dead
from orchestrator.fleet.queue import QUEUE, RUNNER, queue_busy
from orchestrator.fleet.worker import FleetWorker
from reflection.postgres.connection import first_line

log = logging.getLogger("goldenloop.fleet.serve")

LOST_LIMIT = 3  # a job whose worker died this many times fails (a human looks at the task)
RESTART_PAUSE_S = (1.0, 30.0)  # waiting for a database that went away: from, up to
STOP_GRACE_S = 10.0
STOP_DB_PATIENCE_S = 3.0  # once stopping, how long the job's last records wait for a database that is away
EMPTY_POLL_S = 0.5


class Serving:
    """The life of one worker process."""

    def __init__(self, worker: FleetWorker, app: App) -> None:
        self.worker = worker
        self.app = app
        self.lease = worker.settings.lease_s
        self.interrupted = False
        self.done = False  # asked to end: a signal, or an empty queue
        self.stuck = False  # Procrastinate's worker would not end: the process must leave without it
        self._procrastinate: asyncio.Task[Any] | None = None

    async def serve(self) -> None:
        """Work jobs until told to stop (or, with until_empty, until none is left)."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._signals)
            group.start_soon(self._keep_leases)
            if self.worker.settings.until_empty:
                group.start_soon(self._until_empty)
            try:
                await self._work()
            finally:
                group.cancel_scope.cancel()

    async def _work(self) -> None:
        pause = RESTART_PAUSE_S[0]
        while not self.done:
            task = asyncio.create_task(self.app.run_worker_async(**self._options()))
            self._procrastinate = task
            try:
                await self._ending(task)  # stopped by cancelling the task itself, once (see stop)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # we were cancelled, not the worker
            except Exception as exc:  # noqa: BLE001 - the database went away under the worker
                log.warning("the queue's worker stopped: %s", first_line(exc))
            if self.done:
                return
            self.worker.say(f"the queue's database did not answer; starting again in {pause:.0f} s")
            await anyio.sleep(pause)
            pause = min(pause * 2, RESTART_PAUSE_S[1])

    async def _ending(self, task: asyncio.Task[Any]) -> None:
        """Until Procrastinate's worker ends. Once told to stop and with no job left running,
        it gets STOP_GRACE_S: unregistering from a database that is away (or cancelling a
        query on it) can wait minutes, and a stopped worker must not."""
        idle_since: float | None = None
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.25)  # never cancels the task itself
            if done:
                task.result()
                return
            if not self.done or self.worker.busy:
                continue
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > STOP_GRACE_S:
                self.stuck = True
                self.worker.say(f"the queue did not let go within {STOP_GRACE_S:.0f} s (its database is away); "
                                "leaving it: a job it held goes back to the queue after its lease")
                return

    def _options(self) -> dict[str, Any]:
        return {"queues": [QUEUE], "name": self.worker.name, "concurrency": 1, "wait": True,
                "listen_notify": True, "fetch_job_polling_interval": min(2.0, self.lease / 3),
                "update_heartbeat_interval": self.lease / 3, "stalled_worker_timeout": self.lease,
                "install_signal_handlers": False, "shutdown_graceful_timeout": None,
                "additional_context": {RUNNER: self.worker}}

    def stop(self, *, interrupted: bool) -> None:
        """End the process: the task in flight is put back, Procrastinate's worker stops gracefully."""
        self.done = True
        self.interrupted = self.interrupted or interrupted
        self.worker.db.retry_for = min(self.worker.db.retry_for, STOP_DB_PATIENCE_S)  # a stop is not a wait
        if interrupted:
            self.worker.stop_job()
        if self._procrastinate is not None and not self._procrastinate.done():
            self._procrastinate.cancel()

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                self.worker.say("stopping: the task in flight goes back to the queue" if self.worker.busy
                                else "stopping: no task was in flight")
                self.stop(interrupted=True)

    async def _until_empty(self) -> None:
        while not self.done:
            await anyio.sleep(EMPTY_POLL_S)
            if self.worker.busy:
                continue
            try:
                busy = await anyio.to_thread.run_sync(queue_busy, self.worker.db)
            except Exception:  # noqa: BLE001 - the database is away: not empty, just unknown
                continue
            if not busy and not self.worker.busy:
                self.worker.say("no job left on the queue")
                self.stop(interrupted=False)

    async def _keep_leases(self) -> None:
        while not self.done:
            await anyio.sleep(self.lease / 3)
            try:
                await self.hand_on_lost_jobs()
                await anyio.to_thread.run_sync(lambda: sweep_dead(self.worker.settings.workdir, self.worker.mirrors,
                                                                  keep=self.worker.trees.home))
            except Exception as exc:  # noqa: BLE001 - next round; the database may be restarting
                log.info("looking for lost jobs failed: %s", first_line(exc))

    async def hand_on_lost_jobs(self) -> list[int]:
        """Jobs whose worker sent no heartbeat for a lease: back to the queue (or failed)."""
        handed: list[int] = []
        async with self.worker.locks.attempt(STALLED_JOBS) as mine:
            if not mine:
                return handed  # another worker is at it
            manager = self.app.job_manager
            for job in await manager.get_stalled_jobs(seconds_since_heartbeat=self.lease, queue=QUEUE):
                assert job.id is not None
                why = f"its worker sent no heartbeat for {self.lease:g} s (killed, or its machine gone)"
                await anyio.to_thread.run_sync(records.mark_lost, self.worker.db, job.id, why)
                if job.attempts + 1 >= LOST_LIMIT:
                    await manager.finish_job_by_id_async(job.id, Status.FAILED, delete_job=False)
                    self.worker.say(f"job {job.id} ({job.task_kwargs.get('task')}) failed: "
                                    f"its workers died {LOST_LIMIT} times")
                    continue
                await manager.retry_job(job)
                handed.append(job.id)
                self.worker.say(f"job {job.id} ({job.task_kwargs.get('task')}) back on the queue: {why}")
        return handed
