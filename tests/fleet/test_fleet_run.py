"""A fleet end to end: 4 worker processes, one PostgreSQL, 3 bare repositories, 20 tasks.

Every task must run once and be integrated (closed on its remote with its commits, each
code commit once on main); one worker is SIGKILLed in the middle of a task, whose job
another worker finishes after the lease; the fleet's budget is never exceeded and the
jobs' costs add up to what the ledger says was spent. The workers, and the
`overnight --queue` that queues the backlogs and follows the night, are real processes
started the way a user starts them.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from fleetkit import (
    CALL_COST,
    PY,
    SLOW_CHECK,
    alive,
    kill_group,
    make_remote,
    on_branch,
    query,
    remote_tasks,
    reply,
    start_worker,
    subjects,
    task,
    wait_exit,
    wait_until,
    worker_log,
    write_script,
)
from projects import git

from orchestrator.fleet.liveness import NO_WORKER

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LEASE = "10"  # seconds without a heartbeat before a job goes to another worker: room for a busy machine
BUDGET = 1.0  # far more than 20 tasks cost: nothing is refused, everything is counted


def backlogs() -> dict[str, list[dict]]:
    """20 tasks over three repositories, some waiting for others."""
    alpha = [task(f"A-{n}", f"Add alpha {n}", n=n, deps=["A-1"] if n == 5 else ()) for n in range(1, 8)]
    beta = [task(f"B-{n}", f"Add beta {n}", n=n, deps=["B-2"] if n == 3 else ()) for n in range(1, 8)]
    gamma = [task(f"C-{n}", f"Add gamma {n}", n=n, deps=["C-1", "C-2"] if n == 6 else ()) for n in range(1, 7)]
    return {"alpha": alpha, "beta": beta, "gamma": gamma}


def file_of(task_id: str) -> str:
    return "slow.py" if task_id == "B-4" else f"mod_{task_id.replace('-', '_').lower()}.py"


def test_four_workers_work_three_backlogs_once_each_through_a_killed_worker(tmp_path, pg_url):
    marker = tmp_path / "slow-check.pid"
    tasks = backlogs()
    model = write_script(tmp_path / "script.json", [
        reply(t["id"], file_of(t["id"]), f"VALUE = {t['id']!r}\n") for ts in tasks.values() for t in ts
    ])
    remotes = {name: make_remote(tmp_path, name, ts, model,
                                 check_extra=SLOW_CHECK.format(marker=str(marker)) if name == "beta" else "")
               for name, ts in tasks.items()}

    # The user's side: `overnight --queue` puts the backlogs on the queue and follows the run.
    night = tmp_path / "overnight.log"
    with night.open("wb") as out:
        overnight = subprocess.Popen([PY, "-m", "orchestrator.cli", "overnight", "--queue", pg_url, "--max-cost",
                                      str(BUDGET), "--workdir", str(tmp_path / "enqueuer"), "--out", str(tmp_path),
                                      *remotes.values()], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    wait_until(lambda: "gamma.git (main): queued" in night.read_text(), "the backlogs to be queued", [overnight])
    run_id = night.read_text().split()[1]  # "run <id>"
    assert "alpha.git (main): queued 6" in night.read_text()  # all but A-5, which waits for A-1
    # No worker yet: the follower says so, once, before any worker starts.
    wait_until(lambda: NO_WORKER in night.read_text(), "the follower to say that no worker runs", [overnight])

    logs, workdir = tmp_path / "logs", tmp_path / "machine"
    workers = {f"w{n}": start_worker(pg_url, workdir, f"w{n}", logs, "--lease", LEASE)
               for n in range(1, 5)}
    try:
        # B-4's check sleeps: find the worker running it, and kill it there.
        slow_pid = int(wait_until(lambda: marker.exists() and marker.read_text(), "B-4's check to start"))
        (victim,) = wait_until(lambda: query(pg_url, "SELECT worker FROM goldenloop_outcomes WHERE task_id = 'B-4'"
                                                     " AND status = 'running'"), "B-4's row")[0]
        workers[victim].kill()
        others = [w for name, w in workers.items() if name != victim]
        codes = wait_exit(others)
    finally:
        for worker in workers.values():
            worker.kill()
        if marker.exists() and marker.read_text():
            kill_group(int(marker.read_text()))
    logs_text = {name: worker_log(logs, name) for name in workers}
    assert codes == [0, 0, 0], logs_text
    try:
        assert overnight.wait(timeout=60) == 0, night.read_text()  # every task closed in the end
    finally:
        overnight.kill()
    assert not alive(slow_pid), "the dead worker's check was left running"

    # Every task closed on its remote, with its own commit on main, exactly once.
    for name, ts in tasks.items():
        url, board = remotes[name], remote_tasks(remotes[name])
        assert {t["id"]: board[t["id"]]["status"] for t in ts} == {t["id"]: "closed" for t in ts}, name
        history = Counter(subjects(url))
        for t in ts:
            (sha,) = board[t["id"]]["commits"]
            assert on_branch(url, sha)
            assert history[f"{t['id']}: {t['title']}"] == 1, (t["id"], history)

    rows = query(pg_url, "SELECT task_id, status, worker, cost FROM goldenloop_outcomes WHERE run_id = %s", (run_id,))
    closed = Counter(task_id for task_id, status, _, _ in rows if status == "closed")
    assert closed == Counter(t["id"] for ts in tasks.values() for t in ts)  # each task closed by one job
    b4 = {(status, worker) for task_id, status, worker, _ in rows if task_id == "B-4"}
    (finisher,) = [w for s, w in b4 if s == "closed"]
    assert ("lost", victim) in b4 and finisher != victim
    assert not [r for r in rows if r[1] not in ("closed", "lost")], rows

    # One budget: never exceeded, and what the jobs cost is what the ledger counted.
    ((spent, lost, max_cost),) = query(pg_url, "SELECT spent_cost, lost_cost, max_cost FROM goldenloop_runs"
                                               " WHERE id = %s", (run_id,))
    closed_cost = sum(cost for _, status, _, cost in rows if status == "closed")
    lost_cost = sum(cost or 0 for _, status, _, cost in rows if status == "lost")
    assert spent <= max_cost == BUDGET
    assert closed_cost == pytest.approx(20 * CALL_COST)
    assert lost_cost == pytest.approx(CALL_COST)  # the killed attempt's call was paid for: its row says so
    assert spent == pytest.approx(closed_cost + lost_cost)
    assert lost == 0 and query(pg_url, "SELECT count(*) FROM goldenloop_holds") == [(0,)]

    # The morning report covers the whole fleet; the follower printed each job's end.
    followed = night.read_text()
    assert f"beta B-4: lost by {victim}" in followed and f"beta B-4: closed by {finisher}" in followed
    assert f"run {run_id}: 20 of 20 task(s) closed, 0 blocked, by 4 worker(s)" in followed
    assert followed.count(NO_WORKER) == 1
    summary = json.loads((tmp_path / f"{run_id}-summary.json").read_text())
    assert summary["totals"]["tasks"] == 20 and summary["totals"]["closed"] == 20
    assert summary["totals"]["notClosed"] == 0 and summary["stopReason"] == "backlog empty"
    assert set(summary["totals"]["workers"]) == set(workers)
    assert {Path(r["repository"]).name for r in summary["repositories"]} == {"alpha.git", "beta.git", "gamma.git"}
    # The page counts tasks (21 job runs: B-4 ran twice), names each run's worker, and the lost run's task.
    page = (tmp_path / f"{run_id}.html").read_text()
    assert "20 of 20 task(s) closed, in 21 job run(s)" in page
    assert f"<td>beta:B-4</td><td>Add beta 4</td><td>{victim}</td><td><span class=tag" in page
    assert f"<td>beta:B-4</td><td>Add beta 4</td><td>{finisher}</td><td><span class=tag" in page
    # Each story names its commit as the remote has it: rebased onto main, not as its worktree made it.
    named = re.findall(r"committed ([0-9a-f]{10})", page)
    on_main = {sha[:10] for remote in remotes.values() for sha in git(remote.removeprefix("file://"), "rev-list",
                                                                      "main").split()}
    assert len(named) == 20 and set(named) <= on_main, set(named) - on_main
