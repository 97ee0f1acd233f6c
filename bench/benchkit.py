"""Shared by the benchmarks: a repository with a backlog of one-file tasks that the
scripted model answers at once."""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# What any run of a loop whose types are pydantic models and which runs on anyio pays
# before one line of its own: the floor that F1 adds to the shell script's work.
STACK_FLOOR = "from pydantic import BaseModel\nimport anyio\nimport asyncio"


# One task's git work as goldenloop's guarantees have it, by hand in a shell, the least git
# needs for them: define `guarded_task FILE MESSAGE` (run in the repository; $T: a scratch
# folder) and `guarded_bookkeeping MESSAGE`. The user's files listed before and after the
# agent (never mixed into a commit), the attempt's output held in git's objects (no undo
# loses it), the tree it is judged on and committed as, made once on a private index; a
# commit of that tree handed over as the user's index; its binary-safe patch (the
# attempt's history) from two trees, with no index; and the task board's own commit, once
# per run (`guarded_bookkeeping`; the board's state is on disk meanwhile). 8 git processes
# a task and 5 a run (14 a task before, with a bookkeeping commit each and the patch from
# an index): the plumbing floor that F1 and F2 are read against. HEAD is read from its
# file, as goldenloop reads it; the agent and the test command run in a shell each (the
# test command: $BENCH_CHECK, `true` when it is unset).
GUARDED_TASK = r"""
G="git --no-optional-locks"
guarded_task() {
  $G status --porcelain=v1 -z --untracked-files=all --no-renames >/dev/null
  sh -c 'echo hello > "$0"' "$1"
  $G status --porcelain=v1 -z --untracked-files=all --no-renames >/dev/null
  sh -c "${BENCH_CHECK:-true}"
  printf '%s\n' "$1" | $G hash-object -w --no-filters --stdin-paths >/dev/null
  read -r head < .git/refs/heads/main
  commit_paths "$head" "$2" "$1"
  $G diff --no-color --binary "$head" "$tree" -- "$1" >/dev/null
  echo "$1: closed" >> .openagents/board.txt
}
guarded_bookkeeping() {
  $G status --porcelain=v1 -z --untracked-files=all --no-renames -- .openagents/ >/dev/null
  read -r head < .git/refs/heads/main
  commit_paths "$head" "$1: bookkeeping" .openagents/board.txt
}
commit_paths() {
  cp -p .git/index "$T/commit"
  GIT_INDEX_FILE="$T/commit" $G update-index --add --remove -- "${@:3}"
  tree=$(GIT_INDEX_FILE="$T/commit" $G write-tree)
  new=$($G commit-tree "$tree" -p "$1" -m "$2")
  cp "$T/commit" .git/index
  $G update-ref HEAD "$new" "$1"
}
"""


# `run_check`: a floor's run of the test command where a timed check is set ($BENCH_CHECK,
# by `--check-s`), through a shell as goldenloop runs it; without one, nothing (as the
# shell loop's `true` was, a builtin).
RUN_CHECK = r"""
run_check() { [ -z "${BENCH_CHECK-}" ] || sh -c "$BENCH_CHECK"; }
"""


def timed_check(seconds: float, log: Path) -> str:
    """The test command of `--check-s`: it takes `seconds` of wall and next to no CPU (one
    `sleep`), and logs each run of it in `log`, which runs goldenloop made and which the
    floors made is then counted, not assumed. goldenloop runs it through `/bin/sh -c`, and
    so does every floor."""
    return f"echo run >> {shlex.quote(str(log))} && sleep {seconds:g}"


def check_runs(log: Path) -> int:
    """The check's runs logged in `log` since the last call, which empties it."""
    count = len(log.read_text().splitlines()) if log.exists() else 0
    log.unlink(missing_ok=True)
    return count


def precompile() -> None:
    """Byte-compile goldenloop's own packages, as an install does: a source tree run with
    PYTHONDONTWRITEBYTECODE would otherwise compile every module on every start."""
    for package in ("orchestrator", "reflection"):
        spec = importlib.util.find_spec(package)
        for folder in spec.submodule_search_locations if spec else ():
            compileall.compile_dir(folder, quiet=1)


@dataclass
class Usage:
    cpu_s: float  # user + sys, with every child the process waited for
    wall_s: float
    maxrss_kib: int
    code: int
    checks: int = 0  # runs of the timed check (`--check-s`), counted by its log


def run_measured(cmd: Sequence[str], env: dict[str, str] | None = None, stderr: int | None = subprocess.DEVNULL,
                 cwd: Path | None = None) -> Usage:
    """Run `cmd` to the end: its CPU time (os.wait4), wall time and peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=cwd)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait again
    return Usage(ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss, proc.returncode)


def floor_then(shell_steps: str, *args: str, check: str = "") -> list[str]:
    """A command that starts a fresh python importing only the stack (STACK_FLOOR), then
    runs `shell_steps` with `args` (and $BENCH_CHECK, the test command, when `check` is set):
    the denominator of F1 and F2."""
    script = f'"$PYTHON" -c "$FLOOR"\n{shell_steps}'
    variables = [f"PYTHON={sys.executable}", f"FLOOR={STACK_FLOOR}", *([f"BENCH_CHECK={check}"] if check else [])]
    return ["env", *variables, "bash", "-c", script, "steps", *args]


def console(name: str) -> list[str]:
    """A console script of this virtualenv, run by this python: the script's own first line
    may name the interpreter of wherever the virtualenv was made (a moved or shared one)."""
    return [sys.executable, str(Path(sys.executable).parent / name)]


def paired_ratio(ours: Sequence[float], theirs: Sequence[float]) -> float:
    """The median of the per-pair ratios ours / theirs."""
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def report_timed(figure: str, ours: str, runs: dict[str, list[Usage]], target: str) -> None:
    """With a timed check: how often each side ran it (counted, per run), then `figure`
    as the medians of the paired ratios of `ours` over each floor (every other side in
    `runs`), in wall (what a user waits for: the check's sleep takes no CPU) and in CPU."""
    def seen(usages: list[Usage]) -> str:
        return " or ".join(str(n) for n in sorted({u.checks for u in usages}))

    print("runs of the check, counted by its log in each run: "
          + ", ".join(f"{side} {seen(usages)}" for side, usages in runs.items()))
    print("medians, wall / CPU: " + ", ".join(
        f"{side} {statistics.median(u.wall_s for u in usages):.2f} s / "
        f"{statistics.median(u.cpu_s for u in usages) * 1000:.0f} ms" for side, usages in runs.items()))
    for label, of in (("wall", lambda u: u.wall_s), ("CPU", lambda u: u.cpu_s)):
        ratios = ", ".join(f"{paired_ratio([of(u) for u in runs[ours]], [of(u) for u in usages]):.2f} over {side}"
                           for side, usages in runs.items() if side != ours)
        print(f"{figure}, {label}: {ratios}  (medians of {len(runs[ours])} paired ratios; target {target})")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def init_repo(repo: Path) -> Path:
    """An empty repository on branch main with `.openagents/` made and a bench identity."""
    (repo / ".openagents").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "bench@example.invalid")
    git(repo, "config", "user.name", "bench")
    git(repo, "config", "commit.gpgsign", "false")
    return repo


def backlog_repo(
    repo: Path, tasks: int, test_command: str, id_format: str = "T-{n}", preflight: bool = True
) -> Path:
    """`tasks` tasks; task n asks for mod_n.py and the scripted reply writes it."""
    meta = init_repo(repo) / ".openagents"
    (repo / "README.md").write_text("bench\n")
    lines, replies = [], []
    for n in range(tasks):
        task_id = id_format.format(n=n)
        task = {"id": task_id, "status": "open", "title": f"add mod_{n}", "priority": 2,
                "createdAt": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"}
        lines.append(json.dumps(task, separators=(",", ":")))
        reply = f"mod_{n}.py\n<<<<<<< FILE\nVALUE_{n} = {n}\n>>>>>>> FILE\n"
        replies.append({"match": f"Task {task_id}:", "reply": reply})
    (meta / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    (meta / "script.json").write_text(json.dumps({"replies": replies}))
    config = {"testCommands": [test_command], "defaultModel": "scripted/.openagents/script.json",
              "decomposeMinChars": 0, "retry": {"preflight": preflight}}
    (meta / "project.json").write_text(json.dumps(config))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


class Postgres:
    """A throwaway PostgreSQL server (pgserver, from the test extra) in `base`; a fresh
    database per measurement."""

    def __init__(self, base: Path) -> None:
        os.environ.setdefault("XDG_RUNTIME_DIR", str(base))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about the runtime folder
            import pgserver
        (base / "pg").mkdir(exist_ok=True)
        self.server = pgserver.get_server(base / "pg" / "pgdata", cleanup_mode="delete")
        self.count = 0

    def new_database(self) -> str:
        import psycopg

        self.count += 1
        name = f"bench_{self.count}"
        with psycopg.connect(self.server.get_uri("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.server.get_uri(name)

    def stop(self) -> None:
        self.server.cleanup()
