"""What the fleet's commands print: a run queued, a job's end, a run's status, its report, a cancel.

Every line is for a person, or with `--json` one JSON object per event (`JsonLines`).
Repository URLs are printed through `safe_url`, though the queue never holds a password.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.fleet.cancel import Cancelled
from orchestrator.fleet.enqueue import Enqueued
from orchestrator.fleet.liveness import NO_WORKER, LiveWorker, describe, unattended
from orchestrator.fleet.mirror import name_of_key
from orchestrator.fleet.records import OutcomeRow
from orchestrator.fleet.report import FleetReport
from orchestrator.render import JsonLines
from reflection.postgres.connection import safe_url


def _print(line: str) -> None:
    print(line, flush=True)


def enqueued(done: Enqueued, json_mode: bool, *, new_run: bool) -> None:
    """Which tasks of each repository were queued into which run (or why none was)."""
    if json_mode:
        JsonLines()({"event": "enqueued", "runId": done.run.id if done.run else None, "repositories": [
            {"repository": safe_url(ref.url), "branch": ref.branch, "queued": d.queued, "alreadyQueued": d.waiting,
             "alreadyRan": d.ran} for ref, d in done.repositories]})
        return
    if done.run is not None:
        _print(f"run {done.run.id}")
    for ref, d in done.repositories:
        notes = ([f"{len(d.waiting)} already on the queue: {', '.join(d.waiting)}"] if d.waiting else []) + \
                ([f"{len(d.ran)} already ran in this run: {', '.join(d.ran)}"] if d.ran else [])
        _print(f"  {safe_url(ref.url)} ({ref.branch}): queued {len(d.queued)}"
               f"{': ' + ', '.join(d.queued) if d.queued else ''}" + "".join(f" ({n})" for n in notes))
    if not done.queued:
        ready = any(d.waiting or d.ran for _, d in done.repositories)
        _print(("nothing new to queue: every ready task is on the queue already or ran in this run" if ready
                else "no ready task in any repository") + ("; no run was created" if new_run else ""))


def row(r: OutcomeRow, json_mode: bool, indent: str = "") -> None:
    """One job run's end."""
    if json_mode:
        JsonLines()({"event": "job_ended", "repository": r.repo, "taskId": r.task_id, "status": r.status,
                     "reason": r.reason, "worker": r.worker, "costUsd": None if r.cost is None else round(r.cost, 9),
                     "durationS": r.duration_s})
        return
    cost = "unknown" if r.cost is None else f"${r.cost:.4f}"
    why = f": {r.reason}" if r.status != "closed" and r.reason else ""
    _print(f"{indent}{name_of_key(r.repo_key)} {r.task_id}: {r.status} by {r.worker} ({r.attempts} attempt(s), {cost}, "
           f"{r.duration_s:.1f} s){why}")


def report(fleet: FleetReport, out: Path, json_mode: bool) -> None:
    """Write the run's report into `out` and say where, with its totals."""
    body = fleet.summary()
    summary, page = fleet.write(out, body)
    if json_mode:
        JsonLines()({"event": "summary", **body, "summaryPath": str(summary), "reportPath": str(page)})
        return
    t = body["totals"]
    cost = "unknown" if t["costUsd"] is None else f"${t['costUsd']:.4f}"
    _print(f"run {body['runId']}: {t['closed']} of {t['tasks']} task(s) closed, {t['blocked']} blocked, by "
           f"{len(t['workers'])} worker(s); cost {cost}; stopped because: {body['stopReason']}")
    if t["notClosed"]:
        _print(f"  {t['notClosed']} task(s) of the backlogs not closed at the end: the report says why")
    _print(f"  summary: {summary}\n  report:  {page}")


def status(fleet: FleetReport, workers: list[LiveWorker], json_mode: bool) -> None:
    """A run as it stands: limits, jobs by state, spending, the live workers, the last ends."""
    body = fleet.summary()
    if json_mode:
        JsonLines()({"event": "status", **body, "workers": [w.as_dict() for w in workers],
                     "noWorker": unattended(fleet.jobs, workers)})
        return
    run, t = fleet.run, body["totals"]
    limits = [f"{run.max_tasks} tasks" if run.max_tasks else "", f"${run.max_cost:.2f}" if run.max_cost else "",
              f"until {run.deadline:%Y-%m-%d %H:%M} UTC" if run.deadline else ""]
    shown = ", ".join(x for x in limits if x) or "none"
    cancelled = f"; cancelled {run.cancelled_at:%Y-%m-%d %H:%M} UTC" if run.cancelled_at else ""
    jobs = ", ".join(f"{k} {v}" for k, v in sorted(fleet.jobs.items())) or "none"
    _print(f"run {run.id} (started {run.created_at:%Y-%m-%d %H:%M} UTC; limits: {shown}{cancelled})")
    _print(f"  jobs: {jobs}")
    spent = f"${run.spent_cost:.4f}" + (f" of ${run.max_cost:.4f}" if run.max_cost is not None else "")
    _print(f"  spent {spent}; tasks started {run.started_tasks}; closed {t['closed']}, blocked {t['blocked']}")
    _print(f"  {describe(workers)}")
    for r in fleet.rows[-10:]:
        row(r, False, indent="  ")
    if not fleet.finished:
        _print("  still running")
    if unattended(fleet.jobs, workers):
        _print(f"  {NO_WORKER}")


def cancelled(done: Cancelled, json_mode: bool) -> None:
    """What `fleet cancel` did."""
    if json_mode:
        JsonLines()({"event": "cancelled", "runId": done.run_id, "alreadyCancelled": not done.now,
                     **{k: [_job(j) for j in getattr(done, k)] for k in ("waiting", "aborted", "running")}})
        return
    _print(f"run {done.run_id} {'cancelled' if done.now else 'was cancelled already'}: no task is queued into it "
           f"any more; {len(done.waiting)} waiting job(s) cancelled")
    if done.aborted:
        _print(f"  {len(done.aborted)} running job(s) asked to stop, their tasks put back to open: "
               + ", ".join(f"{name_of_key(j.repo_key)} {j.task_id}" for j in done.aborted))
    if done.running:
        _print(f"  {len(done.running)} running job(s) left to finish their task (--abort stops them): "
               + ", ".join(f"{name_of_key(j.repo_key)} {j.task_id}" for j in done.running))


def _job(job: Any) -> dict[str, Any]:
    return {"jobId": job.id, "repoKey": job.repo_key, "taskId": job.task_id}

