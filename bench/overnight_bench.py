"""How many tasks an hour does `overnight` get through, and what do workers buy?

Runs a backlog of N one-attempt tasks (the scripted model answers at once, each task
writes its own module, the test command sleeps a fixed time) through
`run_overnight_async`, with 1 worker and with 2 workers (worktrees), each on a fresh
temporary repository. For each sleep (default: tiny tasks, 0 s, and 0.5 s) it runs
`--rounds` pairs, the two runs of a pair back to back in alternating order, and prints
each pair's tasks per minute and ratio, then the medians (targets on a 2-core machine:
ratio >= 1.8 with 0.5 s tests, >= 1.0 on tiny tasks), and, for 1 worker, the
orchestrator's own time per task: wall time per task minus the test command's sleep.
The load average is printed before and after: on a loaded machine compare the ratios.

`--profile` also prints where the event loop's thread spends its time in the first
2-worker run of each sleep (cProfile, top functions by own time), which is what bounds
the ratio: everything but the test command and git runs on that one thread, between
the workers' awaits.

    .venv/bin/python bench/overnight_bench.py [--tasks 20] [--sleeps 0,0.5] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from benchkit import backlog_repo

from orchestrator.batch.engine import Budget, OvernightOptions, RepoReport, run_overnight_async
from orchestrator.batch.worktree import Worktrees
from orchestrator.session import Overrides
from reflection.scripted import register_scripted_provider, reset_scripted_state


def make_repo(repo: Path, tasks: int, sleep_s: float) -> Path:
    # No preflight: it would run the sleeping test command a second time per task, and
    # this measures the orchestrator's own overhead and the workers' overlap.
    return backlog_repo(repo, tasks, f"sleep {sleep_s}", id_format="T-{n:02d}", preflight=False)


async def _run(repo: Path, workers: int) -> list[RepoReport]:
    options = OvernightOptions(dirs=[repo], overrides=Overrides(), budget=Budget(), parallel=workers)
    return await run_overnight_async(options)


def time_backlog(tasks: int, sleep_s: float, workers: int, profile: cProfile.Profile | None = None) -> float:
    """Wall seconds for the whole backlog; fails loudly if a task did not close."""
    reset_scripted_state()
    with tempfile.TemporaryDirectory(prefix="overnight-bench-") as tmp:
        repo = make_repo(Path(tmp) / "repo", tasks, sleep_s)
        try:
            if profile:
                profile.enable()
            started = time.perf_counter()
            (report,) = anyio.run(_run, repo, workers)
            wall = time.perf_counter() - started
            if profile:
                profile.disable()
        finally:
            shutil.rmtree(Worktrees(repo.resolve()).home, ignore_errors=True)
        closed = [o for o in report.outcomes if o.status == "closed"]
        assert len(closed) == tasks, f"{tasks - len(closed)} task(s) did not close: {report.stop_reason}"
    return wall


def pairs(tasks: int, sleep_s: float, rounds: int, profile: bool) -> tuple[list[float], list[float]]:
    """`rounds` pairs of walls (1 worker, 2 workers), alternating which runs first."""
    ones, twos = [], []
    for n in range(rounds):
        prof = cProfile.Profile() if profile and n == 0 else None
        if n % 2 == 0:
            one = time_backlog(tasks, sleep_s, 1)
            two = time_backlog(tasks, sleep_s, 2, prof)
        else:
            two = time_backlog(tasks, sleep_s, 2, prof)
            one = time_backlog(tasks, sleep_s, 1)
        ones.append(one)
        twos.append(two)
        print(f"  pair {n + 1}: 1 worker {tasks / one * 60:6.1f}  2 workers {tasks / two * 60:6.1f} tasks/min"
              f"  ratio {one / two:.2f}", flush=True)
        if prof:
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
            print(out.getvalue())
    return ones, twos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--sleeps", default="0,0.5", help="seconds the test command sleeps, comma-separated")
    parser.add_argument("--sleep", type=float, help="one sleep only (same as --sleeps S)")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs per sleep")
    parser.add_argument("--profile", action="store_true", help="profile the first 2-worker run of each sleep")
    args = parser.parse_args()
    sleeps = [args.sleep] if args.sleep is not None else [float(x) for x in args.sleeps.split(",")]

    register_scripted_provider()  # litellm's import is a start-up cost, not a per-task one
    time_backlog(2, 0.0, 1)  # warm-up: first-call caches in litellm and git
    time_backlog(2, 0.0, 2)

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    rows = []
    for sleep_s in sleeps:
        print(f"backlog: {args.tasks} tasks, test command sleeps {sleep_s:g} s, {args.rounds} pairs")
        ones, twos = pairs(args.tasks, sleep_s, args.rounds, args.profile)
        ratio = statistics.median(one / two for one, two in zip(ones, twos, strict=True))
        one, two = statistics.median(ones), statistics.median(twos)
        rows.append((sleep_s, one, two, ratio))
    print(f"load average after : {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("medians:")
    for sleep_s, one, two, ratio in rows:
        target = 1.8 if sleep_s >= 0.5 else 1.0
        print(f"  sleep {sleep_s:g} s: 1 worker {args.tasks / one * 60:6.1f}  2 workers {args.tasks / two * 60:6.1f}"
              f" tasks/min  ratio {ratio:.2f} (target >= {target:g})"
              f"  orchestrator time per task, 1 worker: {(one / args.tasks - sleep_s) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
