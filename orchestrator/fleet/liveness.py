"""Who works the queue: the workers alive by their heartbeats, and the warning when none is.

A worker process registers with Procrastinate when it starts (`procrastinate_workers`),
sends a heartbeat every lease/3 seconds and unregisters when it stops; a killed one
leaves its row behind with its heartbeat growing old. A worker counts as alive when its
last heartbeat is at most `SILENT_S` old: longer than any sensible lease's third, so a
live worker is never missed, at the price of counting a killed one for a few minutes.

Jobs that wait while no worker is alive wait for nothing: `fleet status` says so, and a
follower (`overnight --queue`, `fleet status --follow`) says it once (`NoWorkerWatch`).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.fleet.mirror import name_of_key
from reflection.postgres.connection import Database

SILENT_S = 300.0
NO_WORKER = "no worker is running: start `goldenloop worker` on a machine"


@dataclass(frozen=True)
class LiveWorker:
    """A worker alive by its heartbeat; what it runs, when it runs a job."""

    id: int  # Procrastinate's id of the worker
    heartbeat_age_s: float
    name: str = ""  # as its outcome row names it (known while it runs a job)
    repo_key: str = ""
    task_id: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "heartbeatAgeS": round(self.heartbeat_age_s, 1), "name": self.name or None,
                "repoKey": self.repo_key or None, "taskId": self.task_id or None}


def live_workers(db: Database) -> list[LiveWorker]:
    """The workers whose last heartbeat is at most SILENT_S old, with their running job."""
    rows = db.run(lambda conn: conn.execute(
        "SELECT w.id, extract(epoch FROM now() - w.last_heartbeat)::float8, o.worker, o.repo_key, j.args->>'task'"
        " FROM procrastinate_workers w"
        " LEFT JOIN procrastinate_jobs j ON j.worker_id = w.id AND j.status = 'doing'"
        " LEFT JOIN goldenloop_outcomes o ON o.job_id = j.id AND o.status = 'running'"
        " WHERE w.last_heartbeat > now() - make_interval(secs => %s) ORDER BY w.id",
        (SILENT_S,)).fetchall())
    return [LiveWorker(int(wid), max(float(age), 0.0), name or "", key or "", task or "")
            for wid, age, name, key, task in rows]


def describe(workers: list[LiveWorker]) -> str:
    """One line: how many workers are alive and what they run."""
    if not workers:
        return f"workers: none running (none registered with a heartbeat in the last {SILENT_S / 60:g} minutes)"
    busy = [f"{w.name or f'worker {w.id}'} runs {name_of_key(w.repo_key)} {w.task_id}"
            for w in workers if w.task_id]
    idle = len(workers) - len(busy)
    return f"workers: {len(workers)} alive" + "".join(f"; {b}" for b in busy) + (f"; {idle} idle" if idle else "")


def unattended(jobs: dict[str, int], workers: list[LiveWorker]) -> bool:
    """Jobs wait, and no worker is alive to take them."""
    return bool(jobs.get("todo")) and not workers


class NoWorkerWatch:
    """Says NO_WORKER once, the first time jobs wait with no worker alive."""

    def __init__(self) -> None:
        self.said = False

    def check(self, jobs: dict[str, int], workers: list[LiveWorker]) -> str | None:
        if self.said or not unattended(jobs, workers):
            return None
        self.said = True
        return NO_WORKER
