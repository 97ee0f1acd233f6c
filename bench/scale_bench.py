"""Does a run stay as fast with a big backlog or a big memory as with a small one?

Two paired comparisons, each in this one process (the scripted model, `do-one-task`
in-process as bench/loop_bench.py runs it), the two repositories taking turns task by
task so that a busy machine slows both alike; medians of the per-task wall times:

- backlog: `tasks.jsonl` with 100 tasks vs 100,000 (all but the ones run closed). A
  `do-one-task` run's wall time is its start-up plus the task, so the ratio covers both
  (target <= 1.5). The first run on the long backlog moves its closed tasks to the
  archive (see orchestrator/task_archive.py); it is timed on its own, and its peak
  memory, in a fresh process, is compared with the file's size (target <= 2x).
- memory: `memory/reflections.jsonl` empty vs 1,000,000 records (committed, as earlier
  bookkeeping commits left them). Every task fails its first attempt, gets one heuristic
  reflection and passes its retry (target <= 1.2).
- repository: a tree of 20,000 files. The time `do-one-task` spends in git processes per
  task (command executor, default checks) against the plumbing floor: the least git a
  script needs to do the same visible work on a copy of the repository (see
  `floor_task`), timed the same way (target <= 1.3).

    .venv/bin/python bench/scale_bench.py [--tasks 10] [--backlog 100000] [--records 1000000]
        [--files 20000] [--only backlog|memory|repo]

Everything happens in a temp dir that is removed afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a plain checkout works too

from benchkit import backlog_repo, git, init_repo  # noqa: E402

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def close_all_but(repo: Path, open_tasks: int) -> int:
    """Close every task after the first `open_tasks` (a long-lived backlog); its size."""
    path = repo / ".openagents" / "tasks.jsonl"
    lines = path.read_bytes().splitlines()
    out = []
    for n, line in enumerate(lines):
        task = orjson.loads(line)
        task["createdAt"] = (BASE + timedelta(seconds=n)).isoformat().replace("+00:00", "Z")
        if n >= open_tasks:
            task.update(status="closed", closedAt="2026-01-02T00:00:00Z", closeReason="done",
                        commits=["0" * 40])
        out.append(orjson.dumps(task))
    path.write_bytes(b"\n".join(out) + b"\n")
    # Only the open tasks' replies: the scripted model tries every entry's regex per call,
    # which with 100k entries would time the script, not goldenloop.
    script = repo / ".openagents" / "script.json"
    replies = json.loads(script.read_text())["replies"][:open_tasks]
    script.write_text(json.dumps({"replies": replies}))
    git(repo, "commit", "-q", "-am", "a long backlog")
    return path.stat().st_size


def retry_repo(repo: Path, tasks: int, marker: Path) -> Path:
    """Tasks whose first attempt fails (the marker's test) and whose retry passes."""
    backlog_repo(repo, tasks, f"test -e {marker} || {{ touch {marker}; exit 1; }}", preflight=False)
    meta = repo / ".openagents"
    replies = []
    for n in range(tasks):
        wrong = f"mod_{n}.py\n<<<<<<< FILE\nVALUE_{n} = None\n>>>>>>> FILE\n"
        right = f"mod_{n}.py\n<<<<<<< FILE\nVALUE_{n} = {n}\n>>>>>>> FILE\n"
        replies += [{"match": f"Task T-{n}:", "reply": wrong},  # first in file order: attempt 1
                    {"match": f"Task T-{n}:", "reply": right}]
    (meta / "script.json").write_text(json.dumps({"replies": replies}))
    config = json.loads((meta / "project.json").read_text())
    config["reflexion"] = {"useLLM": False}
    config["retry"] = {"preflight": False, "flakyReruns": 0}
    (meta / "project.json").write_text(json.dumps(config))
    git(repo, "commit", "-q", "-am", "retry scenario")
    return repo


def command_retry_repo(repo: Path, marker: Path) -> Path:
    """One task for the command executor (no model call, no litellm) whose first attempt
    fails the marker's test and whose retry passes; heuristic reflections."""
    backlog_repo(repo, 1, f"test -e {marker} || {{ touch {marker}; exit 1; }}", preflight=False)
    meta = repo / ".openagents"
    config = json.loads((meta / "project.json").read_text())
    config.pop("defaultModel")
    config.update(reflexion={"useLLM": False}, retry={"preflight": False, "flakyReruns": 0},
                  executor={"kind": "command", "command": "test -s {prompt_file} && echo \"VALUE = $(date +%s%N)\" > mod_0.py"})
    (meta / "project.json").write_text(json.dumps(config))
    git(repo, "commit", "-q", "-am", "retry scenario, command executor")
    return repo


def fill_memory(repo: Path, records: int) -> int:
    """`records` reflections of other subtasks, a day old, committed; the file's size."""
    path = repo / ".openagents" / "memory" / "reflections.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    created = (datetime.now(UTC) - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    body = {"sessionId": "old-run", "attemptNumber": 1, "category": "root_cause",
            "analysis": "The parser drops the last field when the input has no trailing newline.",
            "suggestion": "Flush the pending field after the loop.", "actionItems": ["Handle EOF"],
            "confidence": 0.7, "failureType": "test_failure", "errorSignature": "9f1c2e7ab4d05a11",
            "filesModified": ["src/parser.py"], "source": "heuristic", "createdAt": created}
    with path.open("wb") as out:
        for n in range(records):
            out.write(orjson.dumps({"id": f"r-{n}", "taskId": f"OLD-{n // 4}",
                                    "subtaskId": f"OLD-{n // 4}", **body}) + b"\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "earlier memory")
    return path.stat().st_size


def one_task(repo: Path, marker: Path | None = None) -> float:
    from orchestrator.cli import do_one_task_main

    if marker is not None:
        marker.unlink(missing_ok=True)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = do_one_task_main(["--dir", str(repo)])
    seconds = time.perf_counter() - start
    assert code == 0, f"do-one-task exited {code} in {repo}"
    return seconds


def paired(a: Path, b: Path, tasks: int, marks: tuple[Path | None, Path | None] = (None, None)) -> tuple[list[float], list[float]]:
    """Per-task times of a and b, taking turns (b first every other time)."""
    ta, tb = [], []
    for n in range(tasks):
        if n % 2:
            tb.append(one_task(b, marks[1]))
            ta.append(one_task(a, marks[0]))
        else:
            ta.append(one_task(a, marks[0]))
            tb.append(one_task(b, marks[1]))
    return ta, tb


PEAK_CHILD = r"""
import contextlib, io, sys
from orchestrator.cli import do_one_task_main
def run(repo):
    with contextlib.redirect_stdout(io.StringIO()):
        assert do_one_task_main(["--dir", repo]) == 0
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
run(sys.argv[1])  # warm-up: imports, litellm, caches
open("/proc/self/clear_refs", "w").write("5")  # resets the peak (VmHWM)
before = status("VmRSS")
run(sys.argv[2])
print(status("VmHWM") - before)
"""


def peak_growth(warm: Path, repo: Path) -> int:
    """Bytes the peak RSS of a fresh process grew by during one run on repo."""
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", PEAK_CHILD, str(warm), str(repo)], cwd=root,
                         check=True, capture_output=True, text=True)
    return int(out.stdout.split()[-1])


def bench_backlog(tmp: Path, tasks: int, size: int) -> None:
    small = backlog_repo(tmp / "small", 100, "true")
    close_all_but(small, tasks + 4)
    big = backlog_repo(tmp / "big", size, "true")
    file_size = close_all_but(big, tasks + 4)
    untouched = tmp / "big-untouched"
    shutil.copytree(big, untouched, symlinks=True)
    one_task(small)  # warm-up: imports, litellm
    first = one_task(big)  # moves the closed tasks to the archive (once)
    ts, tb = paired(small, big, tasks)
    ms, mb = statistics.median(ts), statistics.median(tb)
    print(f"backlog: the first run on {size:,} tasks (moves the closed ones to the archive, once): "
          f"{first * 1000:.0f} ms")
    print(f"backlog: do-one-task with 100 tasks, median of {tasks}: {ms * 1000:.0f} ms")
    print(f"backlog: do-one-task with {size:,} tasks, median of {tasks}: {mb * 1000:.0f} ms")
    print(f"backlog: ratio {mb / ms:.2f}  (target <= 1.5); "
          f"per-pair ratios {', '.join(f'{b / a:.2f}' for a, b in zip(ts, tb))}")
    warm = backlog_repo(tmp / "warm", 2, "true")
    grown = peak_growth(warm, untouched)  # the first run, the one that reads the whole file
    print(f"backlog: peak memory growth of the first run {grown / 2**20:.1f} MiB, file "
          f"{file_size / 2**20:.1f} MiB, {grown / file_size:.2f}x  (target <= 2x)")


def bench_memory(tmp: Path, tasks: int, records: int) -> None:
    marks = (tmp / "pass-empty", tmp / "pass-full")
    empty = retry_repo(tmp / "empty", tasks + 1, marks[0])
    full = retry_repo(tmp / "full", tasks + 1, marks[1])
    start = time.perf_counter()
    size = fill_memory(full, records)
    print(f"memory: {records:,} records, {size / 2**20:.0f} MiB, written and committed in "
          f"{time.perf_counter() - start:.1f} s")
    one_task(empty, marks[0])  # warm-up
    te, tf = paired(empty, full, tasks, marks)
    me, mf = statistics.median(te), statistics.median(tf)
    print(f"memory: a task with one retry, empty memory, median of {tasks}: {me * 1000:.0f} ms")
    print(f"memory: the same with {records:,} records: {mf * 1000:.0f} ms")
    print(f"memory: ratio {mf / me:.2f}  (target <= 1.2); "
          f"per-pair ratios {', '.join(f'{b / a:.2f}' for a, b in zip(te, tf))}")


FRESH_RUN = """
import contextlib, io, sys
from orchestrator.cli import do_one_task_main
with contextlib.redirect_stdout(io.StringIO()):
    sys.exit(do_one_task_main(["--dir", sys.argv[1]]))
"""


def fresh_clone(origin: Path, dest: Path) -> Path:
    """A `git clone` of origin with the bench identity (a clone copies no config)."""
    subprocess.run(["git", "clone", "-q", str(origin), str(dest)], check=True, capture_output=True)
    for key, value in (("user.email", "bench@example.invalid"), ("user.name", "bench"),
                       ("commit.gpgsign", "false")):
        git(dest, "config", key, value)
    return dest


def fresh_task_cpu(repo: Path, marker: Path) -> float:
    """CPU seconds (user + sys, every waited-for child included) of a fresh `do-one-task`
    process on repo: its first task fails once and passes its retry."""
    marker.unlink(missing_ok=True)
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-c", FRESH_RUN, str(repo)], cwd=root,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"do-one-task failed in {repo}"
    return usage.ru_utime + usage.ru_stime


def commit_mark(repo: Path) -> bool:
    """What a team that commits its memory commits with it: the retention watermark that
    the last run wrote (reflection/retention_mark.py). False when this tree has none."""
    try:
        from orchestrator.session.housekeeping import apply_retention
        from reflection.retention_mark import mark_path
    except ImportError:
        return False  # an older tree, measured for "before"
    apply_retention(repo, 90)
    mark = mark_path(repo / ".openagents" / "memory" / "reflections.jsonl")
    git(repo, "add", "-f", str(mark))
    git(repo, "commit", "-q", "-m", "the memory's watermark")
    return True


def fresh_pairs(tmp: Path, origins: tuple[Path, Path], marks: tuple[Path, Path], rounds: int) -> tuple[list, list]:
    """CPU of a task on a fresh clone of each origin, taking turns; a warm-up round first."""
    ce, cf = [], []
    for n in range(rounds + 1):
        order = [(origins[0], marks[0], ce), (origins[1], marks[1], cf)]
        for origin, mark, out in (order if n % 2 else order[::-1]):
            clone = fresh_clone(origin, tmp / f"clone-{origin.name}-{n}")
            cpu = fresh_task_cpu(clone, mark)
            if n:  # the first round warms the page cache and .pyc files
                out.append(cpu)
            shutil.rmtree(clone)
    return ce, cf


def status_cpu(repo: Path) -> float:
    """CPU seconds of one `git status` that writes nothing back, as goldenloop's are."""
    proc = subprocess.Popen(["git", "--no-optional-locks", "status", "--porcelain"], cwd=repo,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime


def git_floor(tmp: Path, origins: tuple[Path, Path], rounds: int) -> float:
    """What git alone charges a fresh clone for the full memory: the median, over fresh
    clones of each origin taken in turns, of the CPU of its first `git status` with the
    full memory less that with the empty one. Checked out in the second its index was
    written, the big file is "racily clean", and git must hash it once to trust it."""
    extra = []
    for n in range(rounds):
        cpu = {}
        for origin in (origins if n % 2 else origins[::-1]):
            clone = fresh_clone(origin, tmp / f"floor-{origin.name}-{n}")
            cpu[origin] = status_cpu(clone)
            shutil.rmtree(clone)
        extra.append(cpu[origins[1]] - cpu[origins[0]])
    return statistics.median(extra)


def bench_fresh(tmp: Path, rounds: int, records: int) -> None:
    """F4: a task with one retry on a fresh clone of a repository holding `records`
    committed reflections, against one whose memory is empty; CPU of a fresh process.
    Measured with the retention watermark committed along with the memory, and without."""
    marks = (tmp / "fresh-pass-empty", tmp / "fresh-pass-full")
    empty = command_retry_repo(tmp / "origin-empty", marks[0])
    bare = command_retry_repo(tmp / "origin-full", marks[1])
    size = fill_memory(bare, records)
    print(f"fresh clone: {records:,} committed records, {size / 2**20:.0f} MiB")
    variants = [("no watermark committed", bare)]
    marked = tmp / "origin-full-marked"
    subprocess.run(["git", "clone", "-q", str(bare), str(marked)], check=True)
    for key, value in (("user.email", "bench@example.invalid"), ("user.name", "bench")):
        git(marked, "config", key, value)
    if commit_mark(marked):
        variants.insert(0, ("watermark committed", marked))
    for label, full in variants:
        ce, cf = fresh_pairs(tmp, (empty, full), marks, rounds)
        me, mf = statistics.median(ce), statistics.median(cf)
        print(f"fresh clone, {label}: a task with one retry, empty memory, CPU median of {rounds}: "
              f"{me * 1000:.0f} ms; with {records:,} committed records: {mf * 1000:.0f} ms")
        print(f"fresh clone, {label} (F4): ratio {mf / me:.2f}  (target <= 1.2); "
              f"per-pair ratios {', '.join(f'{b / a:.2f}' for a, b in zip(ce, cf))}")
        if label == "watermark committed":
            floor = git_floor(tmp, (empty, full), rounds)
            print(f"fresh clone, {label} (F4's floor): git's own first status costs {floor * 1000:.0f} ms more "
                  f"with the full memory; the empty-memory task plus that alone is a ratio of "
                  f"{(me + floor) / me:.2f}")


def big_tree_repo(repo: Path, files: int, tasks: int) -> Path:
    """`files` files in folders of 50, and `tasks` open tasks for the command executor."""
    meta = init_repo(repo) / ".openagents"
    for n in range(files):
        folder = repo / "src" / f"pkg{n // 50}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{n % 50}.py").write_text(f"VALUE = {n}\n")
    lines = [json.dumps({"id": f"T-{n}", "status": "open", "title": f"change {n}", "priority": 2,
                         "createdAt": f"2026-01-01T00:00:{n:02d}Z"}) for n in range(tasks)]
    (meta / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    config = {"testCommands": ["true"], "decomposeMinChars": 0, "reflexion": {"useLLM": False},
              "executor": {"kind": "command", "command": 'test -s {prompt_file} && echo x > "change-$(date +%s%N).txt"'}}
    (meta / "project.json").write_text(json.dumps(config))
    git(repo, "config", "gc.auto", "0")  # no gc in the background, then packed as a clone is
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a big tree")
    git(repo, "gc", "-q")
    return repo


class GitClock:
    """Wall time spent in the git processes goldenloop's repository layer runs."""

    def __init__(self) -> None:
        import orchestrator.git.repo as repo_module

        self.module, self.real, self.seconds, self.calls = repo_module, repo_module._run, 0.0, 0

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return self.real(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1
        repo_module._run = timed

    def take(self) -> tuple[float, int]:
        taken = self.seconds, self.calls
        self.seconds, self.calls = 0.0, 0
        return taken


def floor_task(repo: Path, n: int) -> tuple[float, int]:
    """The least git that does the same visible work: look at the tree before the task,
    after the checks ran on it and after the edit (three `status`), then commit the
    change and the closed task with plumbing (`update-index`, `write-tree`,
    `commit-tree`, `update-ref`), on the real index. Returns (git seconds, git calls)."""
    spent, calls = 0.0, 0

    def g(*args: str) -> str:
        nonlocal spent, calls
        start = time.perf_counter()
        out = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout
        spent, calls = spent + time.perf_counter() - start, calls + 1
        return out.strip()

    status = ("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    g(*status)  # is the tree clean?
    subprocess.run("true", shell=True, cwd=repo, check=True)  # the checks, before any change
    g(*status)  # did they leave anything?
    subprocess.run(f'echo x > "change-{n}.txt"', shell=True, cwd=repo, check=True)
    changed = [entry[3:] for entry in g(*status).split("\0") if entry]
    for paths, message in ((changed, f"T-{n}: change"), ([".openagents/tasks.jsonl"], f"T-{n}: bookkeeping")):
        if paths == [".openagents/tasks.jsonl"]:
            tasks = repo / paths[0]
            tasks.write_text(tasks.read_text().replace(f'"T-{n}", "status": "open"', f'"T-{n}", "status": "closed"'))
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                              text=True).stdout.strip()  # untimed: a script would know it
        g("update-index", "--add", "--remove", "--", *paths)
        tree = g("write-tree")
        sha = g("commit-tree", tree, "-p", head, "-m", message)
        g("update-ref", "HEAD", sha, head)
    return spent, calls


def bench_repo(tmp: Path, tasks: int, files: int) -> None:
    start = time.perf_counter()
    ours = big_tree_repo(tmp / "tree", files, tasks + 1)
    floor = tmp / "floor"
    shutil.copytree(ours, floor, symlinks=True)
    print(f"repository: {files:,} files, made and committed in {time.perf_counter() - start:.1f} s")
    clock = GitClock()
    one_task(ours)  # warm-up: imports; the first run also writes .openagents/.gitignore
    clock.take()
    floor_task(floor, tasks)
    ts, tf, counts = [], [], set()
    for n in range(tasks):
        first_floor = n % 2
        if first_floor:
            tf.append(floor_task(floor, n)[0])
        one_task(ours)
        seconds, calls = clock.take()
        ts.append(seconds)
        counts.add(calls)
        if not first_floor:
            tf.append(floor_task(floor, n)[0])
    mo, mf = statistics.median(ts), statistics.median(tf)
    print(f"repository: git time per task, do-one-task ({'/'.join(map(str, sorted(counts)))} git calls), "
          f"median of {tasks}: {mo * 1000:.0f} ms")
    print(f"repository: git time per task, plumbing floor (11 git calls): {mf * 1000:.0f} ms")
    print(f"repository: ratio {mo / mf:.2f}  (target <= 1.3); "
          f"per-pair ratios {', '.join(f'{o / f:.2f}' for o, f in zip(ts, tf))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10, help="tasks timed per repository")
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--fresh-records", type=int, default=200_000, help="records of the fresh-clone figure (F4)")
    parser.add_argument("--only", choices=["backlog", "memory", "repo", "fresh"])
    args = parser.parse_args()
    from reflection.scripted import register_scripted_provider

    register_scripted_provider()
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "backlog"):
            bench_backlog(Path(tmp), args.tasks, args.backlog)
        if args.only in (None, "memory"):
            bench_memory(Path(tmp), args.tasks, args.records)
        if args.only in (None, "repo"):
            bench_repo(Path(tmp), args.tasks, args.files)
        if args.only in (None, "fresh"):
            bench_fresh(Path(tmp), args.tasks, args.fresh_records)


if __name__ == "__main__":
    main()
