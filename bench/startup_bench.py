"""F1: what does a fresh `do-one-task` process cost over its own stack's floor?

A tiny git repository with one trivial task and a command-executor config (the agent
command writes a file, the test command is `true`, no model call can happen). In one
launch, alternately (so load on the machine hits both alike), a fresh `do-one-task`
process and the floor run on a fresh copy of the repository: a fresh python that imports
only pydantic (`BaseModel`), anyio and asyncio, then a shell script doing the same edit,
test command, `git add` and `git commit`. F1 is the median of the paired CPU ratios (user
+ sys, children included, from os.wait4; target <= 1.5). goldenloop's own modules are
byte-compiled first, as an install leaves them. Beside F1 go two floors under it: the
plumbing floor (the same python, then the task with the git work goldenloop's guarantees
take, by shell) and the code floor (that, plus loading the byte code of the goldenloop
modules a run imports and the run's own CPU once all of them are imported: what F1 would
be if importing them ran no code at all). It also prints the peak RSS of the
goldenloop process (target <= 60 MiB), whether litellm or openai was imported, the wall
time of `--help` of each command (target < 0.3 s, no litellm), the time to report a
missing API key (target < 0.5 s), and where the CPU time of one fresh run goes.

With `--baseline DIR` (an older tree of this repository, e.g. from `git archive`), it also
runs a command-executor project with heuristic reflections and no API key set, from both
trees in turn: the wall time and peak RSS of each (paired runs, medians), its exit code,
and whether litellm was imported. Such a project calls no model, so it needs no key.

With `--check-s S`, the test command takes S seconds of wall instead (a `sleep`, next to
no CPU, that logs each of its runs), and F1 is measured with it in wall (what a user waits
for) and in CPU, over two floors that run the same check: the shell floor once, as a plain
script or retry loop does, and the plumbing floor twice, the base's run and the attempt's,
as goldenloop's verdict needs them. How often each side ran the check is counted in every
run and printed beside the figures.

    .venv/bin/python bench/startup_bench.py [--pairs 9] [--help-runs 5] [--baseline DIR] [--f1-only]
    .venv/bin/python bench/startup_bench.py --f1-only --pairs 5 --check-s 4.5   # F1 with a 4.5 s suite
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchkit import (
    GUARDED_TASK,
    RUN_CHECK,
    STACK_FLOOR,
    Usage,
    check_runs,
    console,
    floor_then,
    git,
    init_repo,
    paired_ratio,
    precompile,
    report_timed,
    run_measured,
    timed_check,
)

TEST_COMMAND = "true"  # the cheapest realistic check; the shell script runs the same
AGENT_COMMAND = "test -s {prompt_file} && echo hello > hello.txt"
TASK = {"id": "T-1", "status": "open", "title": "write hello.txt", "priority": 2,
        "createdAt": "2026-01-01T00:00:00Z"}

# The same edit, test command and commit by hand: what a user's script would do (the test
# command: `true`, or the timed check of `--check-s`, once).
SHELL_STEPS = RUN_CHECK + r"""
set -e
cd "$1"
echo hello > hello.txt
run_check
git add hello.txt
git commit -q -m "T-1: write hello.txt"
"""
# The same task with the git work goldenloop's guarantees take (benchkit.GUARDED_TASK), and
# with a timed check the base's run before it: the verdict compares the attempt's run with
# the base's (a test that failed before and passes now is the proof a bug task needs).
PLUMBING_STEPS = GUARDED_TASK + RUN_CHECK + r"""
set -e
cd "$1"
T=$(mktemp -d)
run_check
guarded_task hello.txt "T-1: write hello.txt"
guarded_bookkeeping "T-1"
rm -rf "$T"
"""

# A git that counts its runs in $GIT_COUNT_LOG (their CPU comes from the process's children).
GIT_SHIM = """#!/bin/sh
echo >> "$GIT_COUNT_LOG"
exec {git} "$@"
"""

# do-one-task in-process, reporting its own CPU and its children's at exit (RUSAGE_CHILDREN:
# the agent and test commands and every git process it waited for).
SELF_AND_CHILDREN = """
import atexit, json, resource, sys
def report():
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    with open(sys.argv[1], "w") as out:
        json.dump([own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime], out)
atexit.register(report)
from orchestrator.cli import do_one_task_main
sys.exit(do_one_task_main(sys.argv[2:]))
"""


# F1's code floor, in one process: a first run imports what a run needs; then the CPU of
# unmarshalling those goldenloop modules' byte code (loading the code, running none of it)
# and of each later run, with nothing left to import (children not counted). argv: the
# fresh copies to run in; prints JSON [unmarshal seconds, [run seconds, ...]].
CODE_FLOOR = """
import contextlib, importlib.util, io, json, marshal, sys, time
from pathlib import Path
from orchestrator.cli import do_one_task_main
def run(work):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        do_one_task_main(["--dir", work])
run(sys.argv[1])
own = [m for m in sys.modules if m.split(".")[0] in ("orchestrator", "reflection")]
codes = [Path(importlib.util.cache_from_source(importlib.util.find_spec(m).origin)).read_bytes() for m in own]
start = time.process_time()
for code in codes:
    marshal.loads(code[16:])
unmarshal, runs = time.process_time() - start, []
for work in sys.argv[2:]:
    start = time.process_time()
    run(work)
    runs.append(time.process_time() - start)
print(json.dumps([unmarshal, runs]))
"""

def make_template(root: Path, config: dict) -> Path:
    """A committed repository with one task and `config` as its project.json."""
    repo = root / "template"
    meta = init_repo(repo) / ".openagents"
    (repo / "README.md").write_text("bench\n")
    (meta / "tasks.jsonl").write_text(json.dumps(TASK, separators=(",", ":")) + "\n")
    (meta / "project.json").write_text(json.dumps(config))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def command_config(test_command: str = TEST_COMMAND) -> dict:
    """The command executor; decomposition off and heuristic reflections: no model call."""
    return {"testCommands": [test_command], "decomposeMinChars": 0,
            "executor": {"kind": "command", "command": AGENT_COMMAND},
            "reflexion": {"useLLM": False}}


def fresh_copy(template: Path, root: Path) -> Path:
    """The repository as the template left it: every run starts from the same state."""
    work = root / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(template, work, symlinks=True)
    return work


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(extra)
    return env


# -- the paired runs ------------------------------------------------------------------


def paired_runs(template: Path, root: Path, pairs: int) -> tuple[list[Usage], list[Usage]]:
    """(fresh do-one-task runs, floor runs), taking turns; which goes first alternates too."""
    ours, floor = [], []
    for n in range(pairs):
        for which in ((0, 1) if n % 2 == 0 else (1, 0)):
            work = fresh_copy(template, root)
            if which == 0:
                run = run_measured([*console("do-one-task"), "--dir", str(work)], clean_env())
                assert run.code == 0, f"do-one-task exited {run.code}"
                ours.append(run)
            else:
                run = run_measured(floor_then(SHELL_STEPS, str(work)))
                assert run.code == 0, f"the floor's shell script exited {run.code}"
                floor.append(run)
            assert (work / "hello.txt").is_file()
    return ours, floor


def litellm_imported(cmd: list[str], env: dict[str, str], package: str = "litellm") -> bool:
    """Whether `cmd` (a python program) imported `package`, from its -X importtime lines."""
    done = subprocess.run(cmd, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True, text=True)
    return bool(re.search(rf"\|\s+{package}(\.\S+)?$", done.stderr, re.M))


# -- --help and the missing key -------------------------------------------------------


def wall_times(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def missing_key(root: Path, runs: int) -> tuple[list[float], str, bool]:
    """A builtin-executor config on gpt-4o-mini with no OPENAI_API_KEY: time to refuse."""
    template = make_template(root / "key", {"testCommands": [TEST_COMMAND], "defaultModel": "gpt-4o-mini"})
    cmd = [*console("do-one-task"), "--dir", str(template)]
    env = clean_env()
    times = wall_times(cmd, runs, env)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    message = f"exit {done.returncode}: {done.stderr.strip()}"
    return times, message, litellm_imported(cmd, env)


# -- a project that calls no model, with no key: before and after -------------------

# Models of the key-free runs: one the key table knows, one it did not (a bare claude-* name).
KEY_FREE_MODELS = ("gpt-4o-mini", "claude-sonnet-4-5")
# argv[1]: the tree whose code runs, put first on sys.path (before the installed one).
IN_TREE = ("import sys\nsys.path.insert(0, sys.argv.pop(1))\nfrom orchestrator.cli import do_one_task_main\n"
           "sys.exit(do_one_task_main(sys.argv[1:]))")


@dataclass
class Timed:
    wall_s: float
    maxrss_mib: float
    code: int


def run_in_tree(tree: Path, work: Path, env: dict[str, str]) -> Timed:
    """A fresh do-one-task from `tree`'s code, timed."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", IN_TREE, str(tree), "--dir", str(work)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Timed(time.perf_counter() - start, ru.ru_maxrss / 1024, proc.returncode)


def key_free_config(model: str) -> dict:
    """The command executor, heuristic reflections, decomposition at its default (the task is short)."""
    return {"testCommands": [TEST_COMMAND], "defaultModel": model,
            "executor": {"kind": "command", "command": AGENT_COMMAND}, "reflexion": {"useLLM": False}}


def key_free_runs(root: Path, trees: dict[str, Path], model: str, pairs: int) -> dict[str, list[Timed]]:
    """Each tree in turn on a fresh copy, `pairs` times: alternation spreads the machine's load."""
    template = make_template(root / f"keyless-{model}", key_free_config(model))
    runs: dict[str, list[Timed]] = {name: [] for name in trees}
    for _ in range(pairs):
        for name, tree in trees.items():
            runs[name].append(run_in_tree(tree, fresh_copy(template, root), clean_env()))
    return runs


def report_key_free(root: Path, baseline: Path, pairs: int) -> None:
    trees = {"before": baseline.resolve(), "after": Path(__file__).resolve().parent.parent}
    print(f"\ncommand executor, heuristic reflections, no API key set ({pairs} pairs, medians):")
    for model in KEY_FREE_MODELS:
        runs = key_free_runs(root, trees, model, pairs)
        for name, tree in trees.items():
            timed = runs[name]
            work = fresh_copy(make_template(root / f"probe-{model}-{name}", key_free_config(model)), root)
            imported = litellm_imported([sys.executable, "-c", IN_TREE, str(tree), "--dir", str(work)], clean_env())
            print(f"  {model:<18} {name:<6} wall {statistics.median(t.wall_s for t in timed) * 1000:6.0f} ms, "
                  f"peak RSS {statistics.median(t.maxrss_mib for t in timed):5.1f} MiB, "
                  f"exit {sorted({t.code for t in timed})}, litellm imported: {'yes' if imported else 'no'}")


# -- where the time goes --------------------------------------------------------------


def imported_modules(template: Path, root: Path) -> dict[str, float]:
    """Module -> -X importtime self seconds, in one fresh run."""
    work = fresh_copy(template, root)
    done = subprocess.run([*console("do-one-task"), "--dir", str(work)], capture_output=True, text=True,
                          env=clean_env(PYTHONPROFILEIMPORTTIME="1"))
    found = {}
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)$", line)
        if m:
            found[m.group(2)] = int(m.group(1)) / 1e6
    return found


def import_cpu(modules: list[str]) -> float:
    """CPU seconds of importing `modules` in a fresh interpreter (the interpreter's start included)."""
    code = "import importlib\nfor m in %r:\n    try: importlib.import_module(m)\n    except Exception: pass" % modules
    return median_cpu([sys.executable, "-c", code])


def self_and_children(template: Path, root: Path) -> tuple[float, float, int]:
    """(CPU of the python process, CPU of its children, git processes) in one fresh run."""
    shim_dir = root / "shim"
    shim_dir.mkdir(exist_ok=True)
    (shim_dir / "git").write_text(GIT_SHIM.format(git=shutil.which("git")))
    (shim_dir / "git").chmod(0o755)
    count, report = root / "git-count.log", root / "rusage.json"
    count.unlink(missing_ok=True)
    work = fresh_copy(template, root)
    env = clean_env(PATH=f"{shim_dir}:{os.environ['PATH']}", GIT_COUNT_LOG=str(count))
    assert run_measured([sys.executable, "-c", SELF_AND_CHILDREN, str(report), "--dir", str(work)], env).code == 0
    gits = len(count.read_text().splitlines()) if count.exists() else 0
    runs = []  # without the shim: its own processes would count as children
    for _ in range(5):
        work = fresh_copy(template, root)
        assert run_measured([sys.executable, "-c", SELF_AND_CHILDREN, str(report), "--dir", str(work)],
                            clean_env()).code == 0
        runs.append(json.loads(report.read_text()))
    own, kids = (statistics.median(r[i] for r in runs) for i in (0, 1))
    return own, kids, gits


def median_cpu(cmd: list[str], runs: int = 5) -> float:
    return statistics.median(run_measured(cmd).cpu_s for _ in range(runs))


def breakdown(template: Path, root: Path) -> list[tuple[str, float]]:
    """Rows (what, CPU seconds) of one fresh run. Imports: the CPU of importing the run's
    modules in a fresh interpreter, shared out by package in -X importtime's proportions."""
    start = median_cpu([sys.executable, "-c", "pass"])
    modules = imported_modules(template, root)
    imports = max(import_cpu(list(modules)) - start, 0.0)
    by_package: dict[str, float] = collections.defaultdict(float)
    for name, seconds in modules.items():
        by_package[name.split(".")[0]] += seconds
    scale = imports / (sum(by_package.values()) or 1)
    top = sorted(by_package.items(), key=lambda kv: -kv[1])
    own, kids, gits = self_and_children(template, root)
    commands = 3 * median_cpu(["sh", "-c", "true"])  # preflight, the agent, verify: each through sh
    rows = [("python start (interpreter, site)", start)]
    rows += [(f"import {name}", seconds * scale) for name, seconds in top[:8]]
    rows.append((f"import, {len(top) - 8} other packages", sum(sec for _, sec in top[8:]) * scale))
    rows.append(("goldenloop's own work (the rest of its CPU)", own - start - imports))
    rows.append((f"git processes ({gits})", kids - commands))
    rows.append(("agent and test commands (3 × sh -c)", commands))
    return rows


# -- the report -----------------------------------------------------------------------


def report_f1(template: Path, root: Path, pairs: int) -> None:
    """F1 and what it is made of, from one launch of paired runs."""
    ours, floor = paired_runs(template, root, pairs)
    shell = median_cpu(["bash", "-c", SHELL_STEPS, "steps", str(fresh_copy(template, root))], runs=pairs)
    stack = median_cpu([sys.executable, "-c", STACK_FLOOR], runs=pairs)
    cpu_ours = statistics.median(u.cpu_s for u in ours)
    cpu_floor = statistics.median(u.cpu_s for u in floor)
    print(f"fresh do-one-task, command executor, test `true` (median CPU of {pairs}): {cpu_ours * 1000:.0f} ms")
    print(f"the floor: fresh python importing pydantic+anyio+asyncio, then the shell script (median CPU): "
          f"{cpu_floor * 1000:.0f} ms  (of it, separately: python {stack * 1000:.0f} ms, shell {shell * 1000:.0f} ms)")
    print(f"F1 = {paired_ratio([u.cpu_s for u in ours], [u.cpu_s for u in floor]):.2f}  (median of {pairs} paired "
          f"ratios; ratio of medians {cpu_ours / cpu_floor:.2f}; target <= 1.5)")
    plumbing = [run_measured(floor_then(PLUMBING_STEPS, str(fresh_copy(template, root)))) for _ in range(pairs)]
    assert all(u.code == 0 for u in plumbing), "the plumbing floor's shell script failed"
    cpu_plumbing = statistics.median(u.cpu_s for u in plumbing)
    print(f"F1's plumbing floor: the same python, then the task with the git work goldenloop's guarantees take, by "
          f"shell (median CPU): {cpu_plumbing * 1000:.0f} ms, {cpu_plumbing / cpu_floor:.2f} of the floor; "
          f"do-one-task is {cpu_ours / cpu_plumbing:.2f} of it")
    load, work = code_floor(template, root, pairs)
    print(f"F1's code floor: the plumbing floor, plus loading goldenloop's byte code ({load * 1000:.0f} ms) and "
          f"the run's own CPU once everything is imported ({work * 1000:.0f} ms): "
          f"{(cpu_plumbing + load + work) / cpu_floor:.2f} of the floor, with no module's import work at all")
    rss = [u.maxrss_kib / 1024 for u in ours]
    print(f"peak RSS of do-one-task: median {statistics.median(rss):.1f} MiB, max {max(rss):.1f} MiB "
          "(target <= 60)")
    cmd = [*console("do-one-task"), "--dir", str(fresh_copy(template, root))]
    print(f"imported by the run: litellm {'yes' if litellm_imported(cmd, clean_env()) else 'no'}, openai "
          f"{'yes' if litellm_imported([*cmd[:-1], str(fresh_copy(template, root))], clean_env(), 'openai') else 'no'}")


def report_f1_timed(root: Path, pairs: int, seconds: float) -> None:
    """F1 with a test command that takes `seconds` of wall (`--check-s`): a fresh
    do-one-task, the shell floor (the check once, as a plain script runs it) and the
    plumbing floor (the base's run and the attempt's, as goldenloop's verdict needs them),
    taking turns on fresh copies, each run's checks counted by the check's own log."""
    log = root / "checks.log"
    check = timed_check(seconds, log)
    template = make_template(root / "timed", command_config(check))
    sides = {"do-one-task": lambda work: ([*console("do-one-task"), "--dir", work], clean_env()),
             "the shell floor": lambda work: (floor_then(SHELL_STEPS, work, check=check), None),
             "the plumbing floor": lambda work: (floor_then(PLUMBING_STEPS, work, check=check), None)}
    runs: dict[str, list[Usage]] = {side: [] for side in sides}
    check_runs(log)
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for n in range(pairs):
        for side in list(sides)[n % 3:] + list(sides)[:n % 3]:
            work = fresh_copy(template, root)
            run = run_measured(*sides[side](str(work)))
            assert run.code == 0 and (work / "hello.txt").is_file(), f"{side} exited {run.code}"
            run.checks = check_runs(log)
            runs[side].append(run)
    print(f"fresh do-one-task, command executor, the test command taking {seconds:g} s of wall "
          f"({pairs} runs of each, taking turns; load average before {load_before}, after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores):")
    report_timed("F1", "do-one-task", runs, "<= 1.6 over the plumbing floor")
    rss = [u.maxrss_kib / 1024 for u in runs["do-one-task"]]
    print(f"peak RSS of do-one-task: median {statistics.median(rss):.1f} MiB, max {max(rss):.1f} MiB "
          "(target <= 60)")


def code_floor(template: Path, root: Path, runs: int) -> tuple[float, float]:
    """(CPU of loading the byte code of the goldenloop modules a run imports, median CPU
    of the run's own work once they are all imported), from CODE_FLOOR."""
    works = [shutil.copytree(template, root / f"code-floor-{n}", symlinks=True) for n in range(runs + 1)]
    done = subprocess.run([sys.executable, "-c", CODE_FLOOR, *map(str, works)], capture_output=True, text=True,
                          env=clean_env(), check=True)
    for work in works:
        shutil.rmtree(work)
    load, run_cpu = json.loads(done.stdout.splitlines()[-1])
    return load, statistics.median(run_cpu)

def report_help_and_key(root: Path, runs: int) -> None:
    for command in ("do-one-task", "overnight"):
        cmd = [*console(command), "--help"]
        times = wall_times(cmd, runs)
        print(f"{command} --help wall time: median {statistics.median(times) * 1000:.0f} ms, "
              f"max {max(times) * 1000:.0f} ms, litellm imported: "
              f"{'yes' if litellm_imported(cmd, dict(os.environ)) else 'no'}  (target < 300 ms, no)")
    times, message, key_litellm = missing_key(root, runs)
    print(f"missing API key reported in: median {statistics.median(times) * 1000:.0f} ms, "
          f"max {max(times) * 1000:.0f} ms, litellm imported: {'yes' if key_litellm else 'no'} "
          "(target < 500 ms)")
    print(f"  {message}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--help-runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="an older tree to compare the key-free run with")
    parser.add_argument("--key-free-only", action="store_true", help="only the key-free comparison")
    parser.add_argument("--f1-only", action="store_true", help="only F1 and the run's imports")
    parser.add_argument("--check-s", type=float, default=0.0, metavar="S",
                        help="F1 with a test command that takes S seconds of wall, in wall and CPU")
    args = parser.parse_args()
    if args.check_s < 0:
        parser.error("--check-s is a time in seconds, 0 or more")
    precompile()
    if args.key_free_only:
        with tempfile.TemporaryDirectory(prefix="goldenloop-startup-") as tmp:
            report_key_free(Path(tmp), args.baseline or Path(__file__).resolve().parent.parent, args.pairs)
        return
    with tempfile.TemporaryDirectory(prefix="goldenloop-startup-") as tmp:
        root = Path(tmp)
        template = make_template(root, command_config())
        if args.check_s:
            report_f1_timed(root, args.pairs, args.check_s)
        else:
            report_f1(template, root, args.pairs)
        if args.f1_only:
            return
        report_help_and_key(root, args.help_runs)
        rows = breakdown(template, root)
        print(f"\nwhere the CPU time of one fresh run goes (total {sum(s for _, s in rows) * 1000:.0f} ms):")
        for what, seconds in rows:
            print(f"  {what:<46} {seconds * 1000:6.0f} ms")
        if args.baseline:
            report_key_free(root, args.baseline, args.pairs)


if __name__ == "__main__":
    main()
