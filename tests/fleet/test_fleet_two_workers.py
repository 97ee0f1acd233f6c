"""Two workers through one night of two runs on one queue: a conflict, and a tight budget.

Run 1: two tasks of one repository change the same line at the same time (their checks
meet, so each ran before the other integrated). One lands; the other is blocked, its
commits kept on `goldenloop/<taskId>` on the remote for a human; a third task, waiting on
both, never gets a job; a fourth fails its checks until it escalates. The morning report
says what is left open and why, and where the escalation packet is.
Run 2: six tasks under a budget that covers only some of their calls. The ledger refuses
the rest before they are made; what was spent never crosses the budget, and the refused
tasks stay open on the remote for the next night.
In the middle of it all the database restarts, as a crash or an upgrade would restart it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fleetkit import (
    PRICING,
    make_remote,
    meet,
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

from orchestrator.cli import main

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CALC = "def add(a, b):\n    return a - b\n"
# Each of T-1 and T-2 knows itself by its change to calc.py.
WHO = '''text = pathlib.Path("calc.py").read_text()
me = "T-1" if "a + b" in text else "T-2" if "b + a" in text else None
'''
COSTLY = {"inputTokens": 500, "outputTokens": 150}  # $0.008 a call
BUDGET = 0.03  # a call reserves its worst case first (its prompt and a 200-token reply): 2 or 3 calls fit


@pytest.fixture(scope="module")
def night(pg_server, tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("night")
    url = pg_server.new_database()
    (root / "meet").mkdir()
    tight_tasks = [task(f"M-{n}", f"Add module {n}", n=n) for n in range(1, 7)]
    model = write_script(root / "script.json", [
        reply("T-1", "calc.py", CALC.replace("a - b", "a + b")),
        reply("T-2", "calc.py", CALC.replace("a - b", "b + a")),
        reply("E-1", "broken.py", "def broken(:\n"),  # never compiles: escalated after its retries
        *[reply(t["id"], f"mod_{n}.py", f"VALUE = {n}\n", usage=COSTLY) for n, t in enumerate(tight_tasks, 1)],
    ])
    calc_tasks = [task("T-1", "Fix add"), task("T-2", "Fix add differently", n=1),
                  task("T-3", "Use add", deps=["T-1", "T-2"], n=2), task("E-1", "Break the build", priority=4, n=3)]
    calc = make_remote(root, "calc", calc_tasks, model, check_extra=WHO + meet(root / "meet", ("T-1", "T-2")),
                       files={"calc.py": CALC})
    tight = make_remote(root, "tight", tight_tasks, model)

    runs = {}
    for name, remote, limits in (("calc", calc, []), ("tight", tight, ["--max-cost", str(BUDGET)])):
        assert main(["enqueue", "--queue", url, "--workdir", str(root / "enqueuer"), *limits, remote, "--json"]) == 0
    logs = root / "logs"
    workers = [start_worker(url, root / "machine", f"w{n}", logs, "--lease", "10")
               for n in (1, 2)]
    # Mid-night, the database restarts (a crash, or an upgrade): the workers carry on.
    wait_until(lambda: query(url, "SELECT 1 FROM goldenloop_outcomes WHERE status <> 'running'"), "a first job's end",
               workers)
    pg_server.restart()
    codes = wait_exit(workers)
    assert codes == [0, 0], [worker_log(logs, f"w{n}") for n in (1, 2)]
    for n in (1, 2):  # the restart is said once per worker, and leaves no error behind for its stop
        log = worker_log(logs, f"w{n}")
        assert log.count("error connecting in") <= 1 and "listener error" not in log, log
    for run_id, in query(url, "SELECT id FROM goldenloop_runs"):
        (repo,) = {r for r, in query(url, "SELECT repo FROM goldenloop_outcomes WHERE run_id = %s", (run_id,))}
        runs[Path(repo).stem] = run_id
    return {"url": url, "root": root, "calc": calc, "tight": tight, "runs": runs, "logs": logs}


def outcomes_of(night: dict[str, Any], name: str) -> list[tuple]:
    return query(night["url"], "SELECT task_id, status, reason, cost FROM goldenloop_outcomes WHERE run_id = %s"
                               " ORDER BY id", (night["runs"][name],))


def test_two_tasks_changing_one_line_at_once_land_one_and_keep_the_other_on_its_branch(night):
    rows: dict[str, tuple[str, str]] = {}
    for task_id, status, reason, _ in outcomes_of(night, "calc"):
        if status != "skipped" or task_id not in rows:  # a job delivered again after it ended: not started
            rows[task_id] = (status, reason)
    assert rows.pop("E-1")[0] == "blocked"
    assert sorted(status for status, _ in rows.values()) == ["blocked", "closed"]
    winner = next(t for t, (s, _) in rows.items() if s == "closed")
    loser = next(t for t, (s, _) in rows.items() if s == "blocked")
    board = remote_tasks(night["calc"])
    assert board[winner]["status"] == "closed" and board[loser]["status"] == "blocked"
    assert board[loser].get("closedAt") is None
    assert f"goldenloop/{loser}" in board[loser]["closeReason"] and "merge conflict" in board[loser]["closeReason"]
    assert rows[loser][1] == board[loser]["closeReason"]

    bare = Path(night["calc"].removeprefix("file://"))
    mine = "return a + b" if loser == "T-1" else "return b + a"
    assert mine in git(bare, "show", f"goldenloop/{loser}:calc.py")  # kept for a human
    assert mine not in git(bare, "show", "main:calc.py")
    (sha,) = board[winner]["commits"]
    assert git(bare, "branch", "--contains", sha).split()[-1] == "main"
    assert git(bare, "branch", "--list", "goldenloop/*").split() == [f"goldenloop/{loser}"]
    history = subjects(night["calc"])  # newest first: its blocking landed after the winner
    assert history.index(f"{loser}: goldenloop bookkeeping") < history.index(f"{winner}: goldenloop bookkeeping")
    logs = "".join(worker_log(night["logs"], f"w{n}") for n in (1, 2))  # the console ends on the base branch's word
    assert f"calc {loser}: closed here, but blocked on main: merge conflict" in logs


def test_the_morning_report_says_what_is_left_open_and_where_a_human_looks(night):
    out, run_id = night["root"] / "calc-report", night["runs"]["calc"]
    assert main(["fleet", "report", run_id, "--queue", night["url"], "--out", str(out),
                 "--workdir", str(night["root"] / "reporter"), "--json"]) == 0
    summary = json.loads((out / f"{run_id}-summary.json").read_text())
    page = (out / f"{run_id}.html").read_text()
    board, bare = remote_tasks(night["calc"]), Path(night["calc"].removeprefix("file://"))
    loser = next(t for t in ("T-1", "T-2") if board[t]["status"] == "blocked")

    (calc,) = summary["repositories"]
    left = {x["taskId"]: x["why"] for x in calc["notClosed"]}
    assert left["T-3"] == f"waits on {loser} (blocked)"  # it never got a job, and the report says why
    assert left[loser].startswith("blocked: merge conflict") and left["E-1"].startswith("blocked: ")
    assert set(left) == {"T-3", loser, "E-1"}
    assert summary["stopReason"] == "no task left ready: 3 not closed, blocked or waiting on a task that is not closed"
    assert (summary["totals"]["tasks"], summary["totals"]["closed"], summary["totals"]["notClosed"]) == (3, 1, 3)
    assert "1 of 3 task(s) closed" in page and "<h2>Not closed at the end</h2>" in page
    assert f"<td>calc:T-3</td><td>Use add</td><td>open</td><td>waits on {loser} (blocked)</td>" in page
    assert "<th>worker</th>" in page

    # The escalation packet, where a human finds it: in the repository, as pushed; not in a worker's worktree.
    packet = ".openagents/escalations/E-1.md"
    assert git(bare, "show", f"main:{packet}").strip()
    assert f"escalation packet: {packet} on main of {night['calc']}" in page and "/machine/workers/" not in page
    assert [t["escalation"] for t in calc["tasks"] if t["taskId"] == "E-1"] == [packet]
    # The conflicting commits: named where they are kept.
    kept = git(bare, "rev-parse", f"goldenloop/{loser}").strip()
    assert f"committed {kept[:10]} (kept on branch goldenloop/{loser} of the remote, not on main)" in page


def test_a_tight_budget_across_two_workers_refuses_calls_and_is_never_overspent(night):
    rows = outcomes_of(night, "tight")
    last = {t: (status, reason) for t, status, reason, _ in rows}  # a job the restart cut short ran again
    closed = [t for t, (status, _) in last.items() if status == "closed"]
    refused = [(t, reason) for t, (status, reason) in last.items() if status == "budget"]
    assert 1 <= len(closed) < 6 and len(closed) + len(refused) == 6, rows
    assert all(reason.startswith("fleet cost budget: ") for _, reason in refused)

    ((spent, max_cost),) = query(night["url"], "SELECT spent_cost, max_cost FROM goldenloop_runs WHERE id = %s",
                                 (night["runs"]["tight"],))
    assert max_cost == BUDGET and spent <= BUDGET
    assert spent == pytest.approx(sum(cost or 0 for *_, cost in rows))
    call = COSTLY["inputTokens"] * PRICING["inputCostPerToken"] + COSTLY["outputTokens"] * PRICING["outputCostPerToken"]
    calls = round(spent / call)  # every call that was made, was paid for, and nothing else was
    assert spent == pytest.approx(calls * call) and calls >= len(closed)

    board = remote_tasks(night["tight"])
    assert {t: board[t]["status"] for t, _ in refused} == {t: "open" for t, _ in refused}  # for the next night
    assert {t: board[t]["status"] for t in closed} == {t: "closed" for t in closed}
    # The morning report says why the night stopped.
    out = night["root"] / "report"
    assert main(["fleet", "report", night["runs"]["tight"], "--queue", night["url"], "--out", str(out),
                 "--workdir", str(night["root"] / "reporter"), "--json"]) == 0
    summary = json.loads((out / f"{night['runs']['tight']}-summary.json").read_text())
    assert summary["stopReason"].startswith("fleet cost budget: ")
    assert summary["totals"]["closed"] == len(closed) and summary["totals"]["costUsd"] == pytest.approx(spent), summary
