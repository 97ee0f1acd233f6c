"""Build what a fleet works on: bare `file://` remotes with a backlog, a shared model script,
worker processes, and a look into the queue's database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import psycopg
from projects import git, init_repo, write_file

PY = sys.executable
WAIT_S = 120.0  # a guard against a hung process, never a measurement
PRICING = {"inputCostPerToken": 0.00001, "outputCostPerToken": 0.00002}
USAGE = {"inputTokens": 100, "outputTokens": 50}  # $0.002 a call
CALL_COST = 0.002

# The project's one check: every module compiles. Cheap, and it passes before and after a task.
CHECK = '''import pathlib
import sys

for path in sorted(pathlib.Path(".").glob("*.py")):
    compile(path.read_text(), str(path), "exec")
{extra}
'''

# With it, the check sleeps (the first time, and only once across the fleet) once slow.py
# exists: the pid file says where it sleeps, so a test can kill a worker right there.
SLOW_CHECK = '''import os, time
if pathlib.Path("slow.py").exists():
    marker = pathlib.Path({marker!r})
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        sys.exit(0)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    time.sleep(90)
'''


def meet(shared: Path, pair: tuple[str, str]) -> str:
    """Check code for two tasks that must run at the same time: the task `me` (set before it;
    None: no one to meet) says it is here, then waits until the other task of `pair` is too."""
    return f'''import time
if me:
    shared = pathlib.Path({str(shared)!r})
    (shared / me).write_text("here")
    other = shared / ({pair[1]!r} if me == {pair[0]!r} else {pair[0]!r})
    deadline = time.monotonic() + 60  # a guard: the other task's check comes, or this one fails
    while not other.exists():
        if time.monotonic() > deadline:
            sys.exit("the other task never ran at the same time")
        time.sleep(0.05)
'''


def task(task_id: str, title: str, *, priority: int = 2, deps: Sequence[str] = (), n: int = 0) -> dict[str, Any]:
    return {"id": task_id, "title": title, "description": f"{title}.", "status": "open", "priority": priority,
            "type": "task", "labels": [], "deps": [{"id": d, "type": "blocks"} for d in deps],
            "createdAt": f"2026-11-01T09:00:{n:02d}Z", "updatedAt": f"2026-11-01T09:00:{n:02d}Z", "commits": []}


def reply(task_id: str, path: str, text: str, **extra: Any) -> dict[str, Any]:
    """The scripted answer to every attempt at `task_id`: write `path`."""
    return {"match": f"Task {task_id}:", "reply": write_file(path, text), "times": None, "usage": USAGE, **extra}


def write_script(path: Path, replies: list[dict[str, Any]]) -> str:
    """A script outside every repository, shared by all workers; the model's name."""
    path.write_text(json.dumps({"replies": replies, "pricing": PRICING}, indent=1))
    return f"scripted/{path}"


def make_remote(root: Path, name: str, tasks: list[dict[str, Any]], model: str, *, check_extra: str = "",
                config: dict[str, Any] | None = None, files: dict[str, str] | None = None) -> str:
    """A bare repository `<name>.git` holding a project and its backlog; its file:// URL."""
    work = init_repo(root / f"{name}-work")
    (work / "check.py").write_text(CHECK.format(extra=check_extra))
    for path, text in (files or {}).items():
        (work / path).write_text(text)
    (work / ".gitignore").write_text("__pycache__/\n")
    meta = work / ".openagents"
    meta.mkdir()
    (meta / "tasks.jsonl").write_text("".join(orjson.dumps(t).decode() + "\n" for t in tasks))
    settings = {"testCommands": [f"{PY} check.py"], "defaultModel": model, "decomposeMinChars": 0,
                "maxOutputTokens": 200, "reflexion": {"maxRetries": 1, "useLLM": False},
                "retry": {"preflight": False, "flakyReruns": 0}, **(config or {})}
    (meta / "project.json").write_text(json.dumps(settings, indent=1))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "project under test")
    bare = root / f"{name}.git"
    git(root, "clone", "--bare", "-q", str(work), str(bare))
    return bare.as_uri()


def bare_path(url: str) -> Path:
    return Path(url.removeprefix("file://"))


def remote_tasks(url: str, branch: str = "main") -> dict[str, dict[str, Any]]:
    text = git(bare_path(url), "show", f"{branch}:.openagents/tasks.jsonl")
    return {body["id"]: body for body in map(json.loads, text.splitlines())}


def subjects(url: str, branch: str = "main") -> list[str]:
    return git(bare_path(url), "log", "--format=%s", branch).splitlines()


def on_branch(url: str, sha: str, branch: str = "main") -> bool:
    done = subprocess.run(["git", "merge-base", "--is-ancestor", sha, branch], cwd=bare_path(url))
    return done.returncode == 0


def start_worker(queue: str | None, workdir: Path, name: str, logs: Path, *extra: str,
                 env: dict[str, str] | None = None, until_empty: bool = True) -> subprocess.Popen[bytes]:
    """`goldenloop worker ... --until-empty` (or one that waits for jobs until stopped);
    `queue` None: it comes from the environment."""
    logs.mkdir(exist_ok=True)
    out = open(logs / f"{name}.log", "wb")  # a file, not a pipe: a full pipe would stall the worker
    where = ["--queue", queue] if queue else []
    # -X faulthandler: a worker that hangs past wait_exit's patience dumps its stacks into its log.
    command = [PY, "-X", "faulthandler", "-m", "orchestrator.cli", "worker", *where, "--workdir", str(workdir),
               "--name", name, *(["--until-empty"] if until_empty else []), *extra]
    return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=workdir.parent,
                            env={**os.environ, **(env or {})})


def worker_log(logs: Path, name: str) -> str:
    return (logs / f"{name}.log").read_text(errors="replace")


def wait_until(condition: Callable[[], Any], what: str, workers: Sequence[subprocess.Popen[bytes]] = (),
               timeout: float = WAIT_S) -> Any:
    """Poll `condition` until it is truthy; fail naming `what` (never a measurement), or as
    soon as one of `workers` (processes that must live meanwhile) has ended."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        ended = [w.args for w in workers if w.poll() is not None]
        if ended:
            raise AssertionError(f"waiting for {what}, a process ended: {ended}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def wait_exit(workers: Sequence[subprocess.Popen[bytes]], timeout: float = WAIT_S) -> list[int]:
    deadline = time.monotonic() + timeout
    codes = []
    for worker in workers:
        try:
            codes.append(worker.wait(timeout=max(deadline - time.monotonic(), 0.1)))
        except subprocess.TimeoutExpired:
            for other in workers:
                if other.poll() is None:
                    other.send_signal(signal.SIGABRT)  # its stacks into its log
                    other.wait(timeout=10)
            raise AssertionError("a worker did not exit") from None
    return codes


def query(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone, or gone while read
        return False
    return state != "Z"


def kill_group(pid: int) -> None:
    try:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    except ProcessLookupError:
        pass
