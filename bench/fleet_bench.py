"""What do more workers buy a fleet, and what does the queue itself cost per task?

Starts its own PostgreSQL (pgserver) and, for 1, 2, 4 and 8 worker processes, a fresh
database and fresh bare repositories: `--repos` backlogs of one-file tasks that the
scripted model answers at once, each project's test command sleeping `--sleep` seconds
(0.5 by default; no preflight, so one test run per task). The workers are started, warmed
up on a run of one task each (litellm's import and the first clone are start-up costs,
not per-task ones), then the measured run is queued with `goldenloop enqueue` and timed
from the run's creation to its last job's end, as the database recorded them.

Per worker count it prints tasks per minute and, from the database's own timestamps:
- the worker's overhead per task: a job's wall time (Procrastinate's `started` to
  `succeeded` events) less the golden loop's own time: claiming the slot, fetching,
  resetting the worktree, opening the project, integrating (lock, rebase, push),
  queueing what became ready, recording the outcome;
- the pick-up gap: from a worker's job end to its next job's start (the queue's fetch).

`--rounds` rounds run every worker count, in a rotated order, and the medians are
printed, with each count's speed-up over one worker paired within its round. The load
average is printed before and after: on a loaded machine compare the ratios. On a
2-core machine 8 workers contend for the CPU with their own tests and git.

F6, SQL statements per job: the server logs every statement (`log_statement = 'all'`,
each line prefixed with its database and application name; workers connect as
`worker-<n>`), and the statements the workers sent during the measured run, queue and
memory alike, are counted and divided by its jobs. Empty queries (the connection pool's
check that a connection it hands out is alive) carry no SQL and are counted apart. `--sql-top N` also lists the N most
frequent statements per job.

    .venv/bin/python bench/fleet_bench.py [--workers 1,2,4,8] [--repos 4] [--tasks 8] [--sleep 0.5] [--rounds 3]
        [--sql-top N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import psycopg
from benchkit import Postgres, backlog_repo, git

PY = sys.executable
WAIT_S = 600.0  # a guard against a hung fleet, never a measurement


@dataclass
class Figures:
    workers: int
    tasks: int
    wall_s: float
    overhead_s: float  # median per task: job wall time less the golden loop's
    pickup_s: float  # median gap between a worker's job end and its next job's start
    statements: list[str] = field(default_factory=list)  # what the workers sent during the run

    @property
    def per_minute(self) -> float:
        return self.tasks / self.wall_s * 60


def remotes(root: Path, repos: int, tasks: int, sleep_s: float, prefix: str) -> list[str]:
    """`repos` bare repositories of `tasks` tasks each; their file:// URLs."""
    urls = []
    for r in range(repos):
        work = backlog_repo(root / f"{prefix}{r}-work", tasks, f"sleep {sleep_s}", id_format="T-{n:02d}",
                            preflight=False)
        bare = root / f"{prefix}{r}.git"
        git(root, "clone", "--bare", "-q", str(work), str(bare))
        urls.append(bare.as_uri())
    return urls


def goldenloop(*args: str, cwd: Path) -> str:
    env = {**os.environ, "PGAPPNAME": "enqueue"}
    done = subprocess.run([PY, "-m", "orchestrator.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"goldenloop {args[0]} failed ({done.returncode}): {done.stderr or done.stdout}")
    return done.stdout


def enqueue(url: str, urls: list[str], root: Path) -> str:
    out = goldenloop("enqueue", "--queue", url, "--workdir", str(root / "enqueuer"), "--json", *urls, cwd=root)
    return json.loads(out.splitlines()[-1])["runId"]


def wait_run(url: str, run_id: str, jobs: int) -> None:
    """Until every job of the run has ended (polling the database)."""
    deadline = time.monotonic() + WAIT_S
    with psycopg.connect(url, autocommit=True, application_name="bench") as conn:
        while True:
            row = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE args->>'run' = %s"
                               " AND status IN ('succeeded', 'failed')", (run_id,)).fetchone()
            ended = row[0] if row else 0
            if ended >= jobs:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"run {run_id}: only {ended} of {jobs} jobs ended in {WAIT_S:.0f} s")
            time.sleep(0.1)


_LOGGED = re.compile(r"^(?P<db>[^|]*)\|(?P<app>[^|]*)\|.*?LOG:  (?:statement|execute [^:]*): (?P<sql>.*)$")


EMPTY = "(an empty query: the connection pool's check that a connection is alive)"


def log_statements(pg: Postgres, on: bool) -> None:
    """Every statement in the server's log, prefixed with its database and application."""
    with psycopg.connect(pg.server.get_uri("postgres"), autocommit=True) as conn:
        if on:
            conn.execute("ALTER SYSTEM SET log_statement = 'all'")
            conn.execute("ALTER SYSTEM SET log_line_prefix = '%d|%a|'")
        else:
            conn.execute("ALTER SYSTEM RESET log_statement")
            conn.execute("ALTER SYSTEM RESET log_line_prefix")
        conn.execute("SELECT pg_reload_conf()")


def worker_statements(log: Path, start: int, database: str) -> list[str]:
    """The statements workers sent to `database` after byte `start` of the server's log."""
    with log.open("rb") as handle:
        handle.seek(start)
        text = handle.read().decode("utf-8", "replace")
    found = []
    lines = text.splitlines()
    for n, line in enumerate(lines):
        hit = _LOGGED.match(line)
        if hit and hit["db"] == database and hit["app"].startswith("worker"):
            follows = lines[n + 1] if n + 1 < len(lines) else ""
            if not hit["sql"] and (not follows or _LOGGED.match(follows) or "|LOG:" in follows):
                found.append(EMPTY)  # the connection pool's liveness check: no SQL
                continue
            sql = hit["sql"] or follows  # a statement that starts on a new line
            found.append(re.sub(r"\s+", " ", sql).strip()[:90])
    return found


def figures(url: str, run_id: str, workers: int) -> Figures:
    with psycopg.connect(url, autocommit=True, application_name="bench") as conn:
        rows = conn.execute(
            "SELECT o.status, o.worker, o.started_at, o.finished_at, o.duration_s,"
            " (SELECT max(at) FROM procrastinate_events e WHERE e.job_id = o.job_id AND e.type = 'started'),"
            " (SELECT max(at) FROM procrastinate_events e WHERE e.job_id = o.job_id AND e.type = 'succeeded')"
            " FROM goldenloop_outcomes o WHERE o.run_id = %s ORDER BY o.started_at", (run_id,)).fetchall()
        (created,) = conn.execute("SELECT created_at FROM goldenloop_runs WHERE id = %s",
                                  (run_id,)).fetchone()  # type: ignore[misc]
    closed = [r for r in rows if r[0] == "closed"]
    if len(closed) != len(rows):
        raise SystemExit(f"run {run_id}: not every task closed: {[r[:2] for r in rows if r[0] != 'closed']}")
    wall = (max(r[6] for r in rows) - created).total_seconds()
    overhead = [(r[6] - r[5]).total_seconds() - r[4] for r in rows]
    gaps = []
    for worker in {r[1] for r in rows}:
        mine = [r for r in rows if r[1] == worker]
        gaps += [(b[2] - a[3]).total_seconds() for a, b in zip(mine, mine[1:], strict=False)]
    return Figures(workers, len(rows), wall, statistics.median(overhead), statistics.median(gaps) if gaps else 0.0)


def measure(pg: Postgres, workers: int, args: argparse.Namespace) -> Figures:
    """One fleet of `workers` processes: warmed up, then the measured run."""
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(tmp)
        url = pg.new_database()
        measured = remotes(root, args.repos, args.tasks, args.sleep, "repo")
        warm = remotes(root, 1, workers, 0.0, "warm")
        logs = root / "logs"
        logs.mkdir()
        fleet = [subprocess.Popen([PY, "-m", "orchestrator.cli", "worker", "--queue", url, "--workdir",
                                   str(root / "machine"), "--name", f"w{n}"],
                                  stdout=(logs / f"w{n}.log").open("wb"), stderr=subprocess.STDOUT, cwd=root,
                                  env={**os.environ, "PGAPPNAME": f"worker-{n}"})
                 for n in range(workers)]
        try:
            wait_run(url, enqueue(url, warm, root), workers)
            server_log = Path(pg.server.pgdata) / "log"
            start = server_log.stat().st_size
            run_id = enqueue(url, measured, root)
            wait_run(url, run_id, args.repos * args.tasks)
            time.sleep(0.5)  # the last job's closing statements reach the log
            found = figures(url, run_id, workers)
            found.statements = worker_statements(server_log, start, urlparse(url).path.lstrip("/"))
            return found
        finally:
            for process in fleet:
                process.send_signal(signal.SIGTERM)
            for process in fleet:
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8", help="worker counts, comma-separated")
    parser.add_argument("--repos", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=8, help="tasks per repository")
    parser.add_argument("--sleep", type=float, default=0.5, help="seconds each task's test command sleeps")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sql-top", type=int, default=0, help="list the N most frequent statements per job")
    args = parser.parse_args()
    counts = [int(x) for x in args.workers.split(",")]

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(f"backlog: {args.repos} repositories x {args.tasks} tasks, test command sleeps {args.sleep:g} s, "
          f"{args.rounds} round(s)")
    with tempfile.TemporaryDirectory(prefix="fleet-bench-pg-") as base:
        pg = Postgres(Path(base))
        log_statements(pg, on=True)
        try:
            rounds: list[dict[int, Figures]] = []
            for n in range(args.rounds):
                order = counts[n % len(counts):] + counts[:n % len(counts)]  # rotated: no count always first
                found = {w: measure(pg, w, args) for w in order}
                rounds.append(found)
                print(f"  round {n + 1}: " + "  ".join(
                    f"{w} worker(s) {found[w].per_minute:6.1f}/min" for w in counts), flush=True)
        finally:
            pg.stop()
    print(f"load average after : {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("medians:")
    for w in counts:
        per_minute = statistics.median(r[w].per_minute for r in rounds)
        speedup = statistics.median(r[w].per_minute / r[counts[0]].per_minute for r in rounds)
        overhead = statistics.median(r[w].overhead_s for r in rounds)
        pickup = statistics.median(r[w].pickup_s for r in rounds)
        statements = statistics.median(sum(q != EMPTY for q in r[w].statements) / r[w].tasks for r in rounds)
        checks = statistics.median(r[w].statements.count(EMPTY) / r[w].tasks for r in rounds)
        print(f"  {w} worker(s): {per_minute:6.1f} tasks/min, x{speedup:.2f} over {counts[0]} (paired per round);"
              f" per task: worker overhead {overhead * 1000:.0f} ms, pick-up gap {pickup * 1000:.0f} ms;"
              f" F6: {statements:.1f} SQL statements per job (target <= 15), and {checks:.1f} empty queries")
    if args.sql_top:
        last = rounds[-1][counts[0]]
        print(f"the most frequent statements per job ({counts[0]} worker(s), last round):")
        for sql, n in Counter(last.statements).most_common(args.sql_top):
            print(f"  {n / last.tasks:5.2f}  {sql}")


if __name__ == "__main__":
    main()
