"""F2 and F3: what `overnight` costs per task over a shell loop, and what a second worker buys.

By default, on a backlog of `--tasks` (50) trivial tasks (the command executor: the agent
command writes one new file, the test command is `true`, heuristic reflections: no model
call can happen), each round runs, in an order that alternates between rounds, on a fresh
copy of the repository each:
- a fresh `overnight DIR` process (1 worker),
- a fresh `overnight --parallel 2 DIR` process,
- the floor: a fresh python importing only pydantic, anyio and asyncio, then a shell loop
  doing each task's edit, test command, `git add` and `git commit`.
It prints F2, the median of the paired ratios of CPU per task (user + sys, children
included, from os.wait4) of 1-worker `overnight` over the floor's (target <= 3), and F3,
the median of the paired ratios of wall time of 1 worker over 2 workers (target >= 1.6),
with the load average before and after. goldenloop's own modules are byte-compiled first,
as an install leaves them.

With `--check-s S`, the test command takes S seconds of wall instead (a `sleep`, next to
no CPU, that logs each of its runs), and F2 is also printed in wall (what a user waits
for) and in CPU over two floors that run the same check: the shell loop once a task, as a
plain retry loop does, and the plumbing floor once a task and once more for the whole run
(the base's run; each later task's base is the tree the task before was judged on, whose
run goldenloop has recorded). How often each side ran the check is counted in every run
and printed beside the figures.

`--before REF` measures F3 and F2, before and after: each round runs 1 and 2 workers with
the code at REF (`git archive`) and with this tree, the shell loops and the floor, in a
rotating order, so that the ratios are paired in time.

`--scripted` measures instead what it measured before: `run_overnight_async` in-process,
1 and 2 workers, on backlogs that the scripted model answers at once, the test command
sleeping `--sleeps` seconds (ratio targets: >= 1.8 with 0.5 s tests, >= 1.0 on tiny
ones), and with `--profile` where the event loop's thread spends its time.

    .venv/bin/python bench/overnight_bench.py [--tasks 50] [--rounds 5] [--check-s S]
    .venv/bin/python bench/overnight_bench.py --before main [--rounds 5]   # F3 before and after, paired
    .venv/bin/python bench/overnight_bench.py --scripted [--tasks 20] [--sleeps 0,0.5] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import compileall
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from benchkit import (
    GUARDED_TASK,
    RUN_CHECK,
    Usage,
    backlog_repo,
    check_runs,
    floor_then,
    git,
    init_repo,
    paired_ratio,
    precompile,
    report_timed,
    run_measured,
    timed_check,
)

from orchestrator.batch.engine import Budget, OvernightOptions, RepoReport, run_overnight_async
from orchestrator.batch.worktree import Worktrees
from orchestrator.session import Overrides
from reflection.scripted import register_scripted_provider, reset_scripted_state

# What the `overnight` console script runs, started by this python: a script's shebang
# names the interpreter of the checkout that installed it, which may be another one.
OVERNIGHT = [sys.executable, "-c", "import sys; from orchestrator.cli import overnight_main; sys.exit(overnight_main())"]
# A new file per task ($$: the agent shell's own pid), so that every task has a change to commit.
AGENT_COMMAND = 'test -s {prompt_file} && echo hello > "hello_$$.txt"'
# The same work by hand, task after task: what a user's script would do (the test command:
# `true`, or the timed check of `--check-s`, once a task).
SHELL_LOOP = RUN_CHECK + r"""
set -e
cd "$1"
for n in $(seq "$2"); do
  echo hello > "hello_$n.txt"
  run_check
  git add "hello_$n.txt"
  git commit -q -m "T-$n: write a file"
done
"""

# The same tasks with the git work goldenloop's guarantees take (benchkit.GUARDED_TASK), and
# with a timed check the base's run once for the whole run: each later task's base is the
# tree the task before was judged on, whose run is recorded (orchestrator/judging/recorded.py).
PLUMBING_LOOP = GUARDED_TASK + RUN_CHECK + r"""
set -e
cd "$1"
T=$(mktemp -d)
run_check
for n in $(seq "$2"); do
  guarded_task "hello_$n.txt" "T-$n: write a file"
done
guarded_bookkeeping "run"
rm -rf "$T"
"""


def trivial_backlog(repo: Path, tasks: int, test_command: str = "true") -> Path:
    """`tasks` open tasks for the command executor; no model call can happen."""
    meta = init_repo(repo) / ".openagents"
    (repo / "README.md").write_text("bench\n")
    lines = [json.dumps({"id": f"T-{n:02d}", "status": "open", "title": f"write file {n}", "priority": 2,
                         "createdAt": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"}, separators=(",", ":"))
             for n in range(tasks)]
    (meta / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    config = {"testCommands": [test_command], "decomposeMinChars": 0,
              "executor": {"kind": "command", "command": AGENT_COMMAND}, "reflexion": {"useLLM": False}}
    (meta / "project.json").write_text(json.dumps(config))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def fresh_copy(template: Path, work: Path) -> Path:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(template, work, symlinks=True)
    return work


def two_shell_loops(template: Path, root: Path, tasks: int, env: dict[str, str] | None) -> Usage:
    """Half the backlog's shell loop in each of two copies, both at once: what two busy
    cores give this machine now (F3's headroom); CPU summed, wall of the pair."""
    works = [fresh_copy(template, root / f"half-{n}") for n in (1, 2)]
    start = time.perf_counter()
    procs = [subprocess.Popen(["bash", "-c", SHELL_LOOP, "loop", str(w), str(tasks // 2)], env=env) for w in works]
    cpu, code = 0.0, 0
    for proc in procs:
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu, code = cpu + ru.ru_utime + ru.ru_stime, code or proc.returncode
    return Usage(cpu, time.perf_counter() - start, 0, code)


def one_run(template: Path, root: Path, what: str, tasks: int, check: str = "") -> Usage:
    """One measured run of `what` (1, 2: overnight's workers, "before 1", "before 2": the
    same with the code of `--before`; "floor", "plumbing"; "shell", "2 shells": the shell
    loop alone, and in two halves at once) on a fresh copy; the floors and shell loops
    run `check` as the test command where one is given (overnight has it in the project)."""
    if what.startswith("before "):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "before"), os.environ.get("PYTHONPATH", "")])}
        return overnight_run(template, root, what.removeprefix("before "), tasks, env)
    shell_env = {**os.environ, "BENCH_CHECK": check} if check else None
    if what == "2 shells":
        run = two_shell_loops(template, root, tasks, shell_env)
        assert run.code == 0, f"a shell loop exited {run.code}"
        return run
    work = fresh_copy(template, root / "work")
    if what == "shell":
        run = run_measured(["bash", "-c", SHELL_LOOP, "loop", str(work), str(tasks)], shell_env)
    elif what == "floor":
        run = run_measured(floor_then(SHELL_LOOP, str(work), str(tasks), check=check))
    elif what == "plumbing":
        run = run_measured(floor_then(PLUMBING_LOOP, str(work), str(tasks), check=check))
    else:
        return overnight_run(template, root, what, tasks, dict(os.environ))
    assert run.code == 0, f"{what} exited {run.code}"
    return run


def overnight_run(template: Path, root: Path, workers: str, tasks: int, env: dict[str, str]) -> Usage:
    work = fresh_copy(template, root / "work")
    env = {k: v for k, v in env.items() if not k.endswith("_API_KEY")}
    # Run from outside any checkout: `python -c` puts its working folder first on sys.path.
    run = run_measured([*OVERNIGHT, "--parallel", workers, str(work)], env, cwd=root)
    board = (work / ".openagents" / "tasks.jsonl").read_text()
    assert board.count('"status":"closed"') == tasks, f"overnight --parallel {workers}: not every task closed"
    assert run.code == 0, f"overnight --parallel {workers} exited {run.code}"
    return run


def code_at(ref: str, root: Path) -> Path:
    """goldenloop's packages as they were at `ref`, byte-compiled, in `root/before`."""
    folder = root / "before"
    folder.mkdir()
    archive = subprocess.run(["git", "archive", ref, "orchestrator", "reflection"], capture_output=True, check=True,
                             cwd=Path(__file__).resolve().parent.parent).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    compileall.compile_dir(folder, quiet=1)
    return folder


def parallel_figures(tasks: int, rounds: int, before: str) -> None:
    """F3 before (the code at `before`) and after, paired within each round, order rotating."""
    runs: dict[str, list[Usage]] = {w: [] for w in ("before 1", "before 2", "1", "2", "shell", "2 shells", "floor")}
    order = list(runs)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory(prefix="overnight-bench-") as tmp:
        template = trivial_backlog(Path(tmp) / "template", tasks)
        code_at(before, Path(tmp))
        for n in range(rounds):
            for what in order[n % len(order):] + order[:n % len(order)]:
                runs[what].append(one_run(template, Path(tmp), what, tasks))
            walls = "  ".join(f"{w}: {runs[w][-1].wall_s:5.2f} s" for w in order)
            print(f"  round {n + 1}, wall: {walls}", flush=True)
    print(f"load average after : {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    wall = {w: [u.wall_s for u in runs[w]] for w in order}
    f3_before, f3_after = paired_ratio(wall["before 1"], wall["before 2"]), paired_ratio(wall["1"], wall["2"])
    print(f"F3 before ({before}) = {f3_before:.2f}, after = {f3_after:.2f}  (wall of 1 worker over 2 workers, "
          f"median of {rounds} paired ratios; target >= 1.6)")
    print(f"2 workers' wall, after over before: {paired_ratio(wall['2'], wall['before 2']):.2f}; 1 worker's: "
          f"{paired_ratio(wall['1'], wall['before 1']):.2f}")
    print(f"F3's headroom on this machine now: {paired_ratio(wall['shell'], wall['2 shells']):.2f}")
    cpu = {w: [u.cpu_s for u in runs[w]] for w in order}
    print(f"F2 before ({before}) = {paired_ratio(cpu['before 1'], cpu['floor']):.2f}, after = "
          f"{paired_ratio(cpu['1'], cpu['floor']):.2f}  (CPU of 1 worker over the floor's; target <= 3); CPU per "
          f"task, medians: before {statistics.median(cpu['before 1']) / tasks * 1000:.1f} ms, after "
          f"{statistics.median(cpu['1']) / tasks * 1000:.1f} ms, floor {statistics.median(cpu['floor']) / tasks * 1000:.1f} ms")


def cli_runs(root: Path, tasks: int, rounds: int, seconds: float) -> dict[str, list[Usage]]:
    """`rounds` rounds of (1 worker, 2 workers, floor, shell loop, two half loops, plumbing
    floor), order rotating; with a test command taking `seconds` of wall (`--check-s`),
    each run's checks counted by the check's own log."""
    runs: dict[str, list[Usage]] = {"1": [], "2": [], "floor": [], "shell": [], "2 shells": [], "plumbing": []}
    order = list(runs)
    log = root / "checks.log"
    check = timed_check(seconds, log) if seconds else ""
    template = trivial_backlog(root / "template", tasks, check or "true")
    for n in range(rounds):
        for what in order[n % len(order):] + order[:n % len(order)]:
            check_runs(log)
            run = one_run(template, root, what, tasks, check)
            run.checks = check_runs(log)
            runs[what].append(run)
        one, two, floor = (runs[w][-1] for w in order[:3])
        walls = f", floor {floor.wall_s:5.2f} s, plumbing floor {runs['plumbing'][-1].wall_s:5.2f} s" if check else ""
        print(f"  round {n + 1}: CPU per task 1 worker {one.cpu_s / tasks * 1000:5.1f} ms, 2 workers "
              f"{two.cpu_s / tasks * 1000:5.1f} ms, floor {floor.cpu_s / tasks * 1000:5.1f} ms; wall 1 worker "
              f"{one.wall_s:5.2f} s, 2 workers {two.wall_s:5.2f} s{walls}", flush=True)
    return runs


def cli_figures(tasks: int, rounds: int, seconds: float = 0.0) -> None:
    """F2 and F3 from `rounds` rounds of (1 worker, 2 workers, floor), order rotating; with
    a timed check (`seconds`), F2 in wall and CPU over the shell and plumbing floors too."""
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    with tempfile.TemporaryDirectory(prefix="overnight-bench-") as tmp:
        runs = cli_runs(Path(tmp), tasks, rounds, seconds)
    print(f"load average after : {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    cpu = {w: statistics.median(u.cpu_s for u in runs[w]) / tasks * 1000 for w in ("1", "2", "floor")}
    print(f"CPU per task, medians: overnight {cpu['1']:.1f} ms, the floor (python + shell loop) {cpu['floor']:.1f} ms")
    print(f"F2 = {paired_ratio([u.cpu_s for u in runs['1']], [u.cpu_s for u in runs['floor']]):.2f}  (median of "
          f"{rounds} paired ratios; target <= 3)")
    print(f"F3 = {paired_ratio([u.wall_s for u in runs['1']], [u.wall_s for u in runs['2']]):.2f}  (wall of 1 worker "
          f"over 2 workers, median of {rounds} paired ratios; target >= 1.6)")
    print(f"F3's headroom on this machine now: the shell loop alone over two halves at once, wall "
          f"{paired_ratio([u.wall_s for u in runs['shell']], [u.wall_s for u in runs['2 shells']]):.2f} "
          f"(CPU of the pair over the one: "
          f"{paired_ratio([u.cpu_s for u in runs['2 shells']], [u.cpu_s for u in runs['shell']]):.2f})")
    print(f"CPU per task, medians: 2 workers {cpu['2']:.1f} ms (1 worker {cpu['1']:.1f} ms)")
    plumbing = [u.cpu_s for u in runs["plumbing"]]
    print(f"F2's plumbing floor: the same tasks with the git work goldenloop's guarantees take, by shell "
          f"(python + {statistics.median(plumbing) / tasks * 1000:.1f} ms per task), over the floor: "
          f"{paired_ratio(plumbing, [u.cpu_s for u in runs['floor']]):.2f}; overnight over it: "
          f"{paired_ratio([u.cpu_s for u in runs['1']], plumbing):.2f}")
    if seconds:
        print(f"\nwith the test command taking {seconds:g} s of wall, {tasks} tasks a run (overnight --parallel 2 "
              f"ran it {' or '.join(str(n) for n in sorted({u.checks for u in runs['2']}))} times a run):")
        report_timed("F2", "overnight", {"overnight": runs["1"], "the shell floor": runs["floor"],
                                         "the plumbing floor": runs["plumbing"]}, "<= 2.5")


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
    parser.add_argument("--tasks", type=int, help="tasks in the backlog (default 50; --scripted: 20)")
    parser.add_argument("--scripted", action="store_true", help="the scripted-model backlogs, in-process")
    parser.add_argument("--sleeps", default="0,0.5", help="seconds the test command sleeps, comma-separated")
    parser.add_argument("--sleep", type=float, help="one sleep only (same as --sleeps S)")
    parser.add_argument("--rounds", type=int, help="rounds (default 5; --scripted: pairs of runs per sleep, 3)")
    parser.add_argument("--before", help="F3 only: before (the code at this commit) and after, paired")
    parser.add_argument("--profile", action="store_true", help="profile the first 2-worker run of each sleep")
    parser.add_argument("--check-s", type=float, default=0.0, metavar="S",
                        help="the CLI figures with a test command that takes S seconds of wall, in wall and CPU")
    args = parser.parse_args()
    if args.check_s < 0:
        parser.error("--check-s is a time in seconds, 0 or more")
    precompile()
    if args.before:
        parallel_figures(args.tasks or 50, args.rounds or 5, args.before)
        return
    if not args.scripted:
        cli_figures(args.tasks or 50, args.rounds or 5, args.check_s)
        return
    args.tasks, args.rounds = args.tasks or 20, args.rounds or 3
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
