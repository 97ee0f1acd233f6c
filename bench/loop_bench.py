"""How much time does the orchestrator itself add to an attempt?

Runs N one-attempt tasks through `do-one-task` (in one process, the scripted model
answering at once, the test command `true`), and the same git and test steps done by a
shell script (as traced with GIT_TRACE: dirty check, preflight, the scratch-index commit
that leaves the user's index alone, the bookkeeping commit), on identical repositories;
prints the time per attempt of each and their ratio (target <= 1.3), and for reference
the ratio to a minimal script that skips the safety steps. Also prints the wall time of `do-one-task --help` in a fresh
process (target under 0.3 s).

    .venv/bin/python bench/loop_bench.py [--tasks 20] [--help-runs 10]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import backlog_repo

# The same git and test steps as do-one-task's one passing attempt, by hand (traced with
# GIT_TRACE): what is left of the difference is the orchestrator's own time.
SHELL_STEPS = r"""
set -e
cd "$1"; n="$2"
scratch_commit() {  # commit exactly these paths, leaving the user's index alone
  idx=$(mktemp); rm -f "$idx"
  GIT_INDEX_FILE=$idx git read-tree HEAD
  GIT_INDEX_FILE=$idx git add --all -- "$@"
  git config --name-only --get-regexp '^(user|author|committer)\.(name|email)$' >/dev/null || true
  GIT_INDEX_FILE=$idx git commit -q --no-verify -m "$msg"
  rm -f "$idx"; git reset -q -- "$@"
}
git status --porcelain=v1 -z --untracked-files=all >/dev/null     # orient: dirty tree?
true                                                               # preflight: the checks once
git status --porcelain=v1 -z --untracked-files=all >/dev/null     # the subtask's base state
git ls-files -z --cached --others --exclude-standard >/dev/null   # files to show the model
printf 'VALUE_%s = %s\n' "$n" "$n" > "mod_$n.py"                    # the attempt's edit
git rev-parse --verify -q 'HEAD^{commit}' >/dev/null
git diff --name-only -z HEAD -- >/dev/null                         # what the attempt changed
git ls-files --others --exclude-standard -z >/dev/null
true                                                               # verify: the test command
msg="T-$n: add mod_$n"; scratch_commit "mod_$n.py"
sed -i "s/\"id\":\"T-$n\",\"status\":\"open\"/\"id\":\"T-$n\",\"status\":\"closed\"/" .openagents/tasks.jsonl
git status --porcelain=v1 -z --untracked-files=all >/dev/null     # bookkeeping: what changed
msg="T-$n: bookkeeping"; scratch_commit .openagents/tasks.jsonl
"""

# The fewest steps a script could get away with (no dirty check, no scratch index, no
# preflight): shown for reference only.
MINIMAL_STEPS = r"""
set -e
cd "$1"; n="$2"
printf 'VALUE_%s = %s\n' "$n" "$n" > "mod_$n.py"
true
git add "mod_$n.py" && git commit -q -m "T-$n: add mod_$n"
sed -i "s/\"id\":\"T-$n\",\"status\":\"open\"/\"id\":\"T-$n\",\"status\":\"closed\"/" .openagents/tasks.jsonl
git add .openagents && git commit -q -m "T-$n: bookkeeping"
"""


def make_repo(root: Path, tasks: int) -> Path:
    return backlog_repo(root / "repo", tasks, "true")


def time_orchestrator(tasks: int) -> list[float]:
    from orchestrator.cli import do_one_task_main

    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp), tasks + 1)
        with contextlib.redirect_stdout(io.StringIO()):
            do_one_task_main(["--dir", str(repo)])  # warm-up: imports, litellm, caches
        times = []
        for _ in range(tasks):
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                code = do_one_task_main(["--dir", str(repo)])
            times.append(time.perf_counter() - start)
            assert code == 0, f"do-one-task exited {code}"
    return times


def time_shell(tasks: int, steps: str = SHELL_STEPS) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp), tasks)
        times = []
        for n in range(tasks):
            start = time.perf_counter()
            subprocess.run(["bash", "-c", steps, "steps", str(repo), str(n)], check=True)
            times.append(time.perf_counter() - start)
    return times


def time_help(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "orchestrator.cli", "do-one-task", "--help"],
                       check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--help-runs", type=int, default=10)
    args = parser.parse_args()
    ours = statistics.median(time_orchestrator(args.tasks))
    shell = statistics.median(time_shell(args.tasks))
    minimal = statistics.median(time_shell(args.tasks, MINIMAL_STEPS))
    helps = time_help(args.help_runs)
    print(f"do-one-task, one passing attempt (median of {args.tasks}): {ours * 1000:.1f} ms")
    print(f"the same git and test steps by a shell script (median): {shell * 1000:.1f} ms")
    print(f"ratio orchestrator / shell: {ours / shell:.2f}  (target <= 1.3)")
    print(f"for reference, a minimal script (4 git calls, no safety checks): {minimal * 1000:.1f} ms, "
          f"ratio {ours / minimal:.2f}")
    print(f"do-one-task --help wall time: median {statistics.median(helps) * 1000:.0f} ms, "
          f"max {max(helps) * 1000:.0f} ms  (target < 300 ms)")


if __name__ == "__main__":
    main()
