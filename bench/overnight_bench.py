"""How many tasks an hour does `overnight` get through, and what do workers buy?

Runs a backlog of N one-attempt tasks (the scripted model answers at once, each task
writes its own module, the test command sleeps a fixed time) through
`run_overnight_async`, with 1 worker and with 2 workers (worktrees), each on a fresh
temporary repository. Prints tasks per minute for each, their ratio (target >= 1.8 on a
2-core machine) and, for 1 worker, the orchestrator's own time per task: wall time per
task minus the test command's sleep.

`--profile` also prints where the event loop's thread spends its time in the 2-worker
run (cProfile, top functions by own time), which is what bounds the ratio: everything
but the test command runs on that one thread, between the workers' awaits.

    .venv/bin/python bench/overnight_bench.py [--tasks 20] [--sleep 0.5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--sleep", type=float, default=0.5, help="seconds the test command sleeps")
    parser.add_argument("--profile", action="store_true", help="profile the 2-worker run")
    args = parser.parse_args()

    register_scripted_provider()  # litellm's import is a start-up cost, not a per-task one
    time_backlog(2, 0.0, 1)  # warm-up: first-call caches in litellm and git

    one = time_backlog(args.tasks, args.sleep, 1)
    profile = cProfile.Profile() if args.profile else None
    two = time_backlog(args.tasks, args.sleep, 2, profile)
    per_minute = [args.tasks / wall * 60 for wall in (one, two)]

    print(f"backlog: {args.tasks} tasks, test command sleeps {args.sleep:g} s")
    print(f"1 worker : {one:6.2f} s  {per_minute[0]:6.1f} tasks/min")
    print(f"2 workers: {two:6.2f} s  {per_minute[1]:6.1f} tasks/min")
    print(f"ratio    : {per_minute[1] / per_minute[0]:.2f}  (target >= 1.8)")
    print(f"orchestrator time per task, 1 worker: {(one / args.tasks - args.sleep) * 1000:.0f} ms "
          "(wall per task minus the test command's sleep)")
    if profile:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())


if __name__ == "__main__":
    main()
