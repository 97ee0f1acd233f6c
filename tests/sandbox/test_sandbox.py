"""The sandbox as a command sees it: real processes, the real kernel, no mocks.

Landlock tests are skipped where the kernel cannot restrict writes; the parent-death and
exit-code tests need Linux only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from orchestrator.sandbox import EXIT_PARENT_GONE, abi, unavailable_reason, wrap

linux = pytest.mark.skipif(not sys.platform.startswith("linux"),
                           reason="the wrapper watches processes through Linux /proc and prctl")
landlock = pytest.mark.skipif(abi() == 0, reason=f"no Landlock here: {unavailable_reason()}")

# Every way of changing a file outside the grant, tried from inside the sandbox: each
# name maps to "ok" or the errno's name.
PROBE = r"""
import errno, json, os, sys
granted, sibling = sys.argv[1:3]
g = lambda name: os.path.join(granted, name)
s = lambda name: os.path.join(sibling, name)
actions = {
    "create inside": lambda: open(g("new.txt"), "w").write("new"),
    "move within": lambda: (os.mkdir(g("sub")), os.link(g("new.txt"), g("sub/copy.txt")),
                            os.rename(g("sub/copy.txt"), g("moved.txt"))),
    "create": lambda: open(s("new.txt"), "x"),
    "modify": lambda: open(s("keep.txt"), "a").write("more"),
    "delete": lambda: os.remove(s("keep.txt")),
    "rename out": lambda: os.rename(g("new.txt"), s("moved.txt")),
    "rename in": lambda: os.rename(s("keep.txt"), g("taken.txt")),
    "hard link out": lambda: os.link(g("new.txt"), s("linked.txt")),
    "truncate": lambda: os.truncate(s("keep.txt"), 0),
    "open truncating": lambda: open(s("keep.txt"), "w"),
    "mkdir": lambda: os.mkdir(s("dir")),
    "symlink": lambda: os.symlink(granted, s("link")),
    "mkfifo": lambda: os.mkfifo(s("fifo")),
}
found = {}
for name, action in actions.items():
    try:
        action()
        found[name] = "ok"
    except OSError as error:
        found[name] = errno.errorcode[error.errno]
print(json.dumps(found))
"""

# A parent that starts the wrapper and waits: the test SIGKILLs it.
PARENT = r"""
import subprocess, sys
from orchestrator.sandbox import wrap
command, folder, restrict = sys.argv[1:4]
argv = wrap(["/bin/sh", "-c", command], writable=[folder], restrict=restrict == "1")
child = subprocess.Popen(argv, cwd=folder, start_new_session=True)
print(child.pid, flush=True)
child.wait()
"""

# Two daemons that leave the session (setsid, then their shell exits), and a foreground sleep.
ESCAPING = """
setsid sh -c 'sleep 1000 & echo $! > daemon.pid'
setsid sh -c '(sleep 2; echo late > late.txt) & echo $! > late.pid'
echo $$ > foreground.pid
exec sleep 1000
"""


def run(command: str, folder: Path, writable: list[Path], restrict: bool = True, **options
        ) -> subprocess.CompletedProcess[str]:
    argv = wrap(["/bin/sh", "-c", command], writable=writable, restrict=restrict)
    return subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=60,
                          start_new_session=True, **options)


def folders(tmp_path: Path) -> tuple[Path, Path]:
    """A granted folder and a sibling holding a file nobody may change."""
    granted, sibling = tmp_path / "worktree", tmp_path / "checkout"
    granted.mkdir()
    sibling.mkdir()
    (sibling / "keep.txt").write_text("original")
    return granted, sibling


def gone(pid: int) -> bool:
    """Whether the process has ended (a zombie counts: it runs nothing any more)."""
    try:
        os.waitpid(pid, os.WNOHANG)  # ours to reap when this process is a subreaper
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat[stat.rfind(b")") + 2 :].startswith((b"Z", b"X"))


def wait_until(condition, what: str, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting after {limit_s} s: {what}"
        time.sleep(0.01)


def pid_in(path: Path) -> int | None:
    text = path.read_text() if path.exists() else ""
    return int(text) if text.endswith("\n") else None


@landlock
def test_landlock_is_available_here() -> None:
    assert unavailable_reason() is None
    assert abi() >= 1


@landlock
def test_writes_outside_the_grant_are_refused_and_change_nothing(tmp_path: Path) -> None:
    granted, sibling = folders(tmp_path)
    argv = wrap([sys.executable, "-B", "-c", PROBE, str(granted), str(sibling)], writable=[granted])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, start_new_session=True)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found.pop("create inside") == "ok"
    assert found.pop("move within") == "ok"
    assert found == dict.fromkeys(found, "EACCES")
    assert sorted(p.name for p in sibling.iterdir()) == ["keep.txt"]
    assert (sibling / "keep.txt").read_text() == "original"
    assert sorted(p.name for p in granted.iterdir()) == ["moved.txt", "new.txt", "sub"]


@landlock
def test_a_symlink_in_the_grant_does_not_extend_it(tmp_path: Path) -> None:
    granted, sibling = folders(tmp_path)
    (granted / ".venv").symlink_to(sibling)  # a virtual environment linked from the user's checkout
    done = run("echo x > .venv/new.txt; echo x >> .venv/keep.txt; rm .venv/keep.txt", granted, [granted])
    assert done.stderr.count("Permission denied") == 3, done.stderr
    assert sorted(p.name for p in sibling.iterdir()) == ["keep.txt"]
    assert (sibling / "keep.txt").read_text() == "original"


@landlock
def test_devices_and_the_granted_temp_folder_stay_writable(tmp_path: Path) -> None:
    granted, temp = folders(tmp_path)[0], tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    command = 'echo x > /dev/null && f=$(mktemp) && echo hi > "$f" && cat "$f" && echo note > /dev/stderr'
    done = run(command, granted, [granted, temp], env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "hi\n", "note\n")
    assert len(list(temp.iterdir())) == 1


@landlock
def test_a_missing_grant_is_skipped_and_a_linked_one_followed(tmp_path: Path) -> None:
    granted, sibling = folders(tmp_path)
    (tmp_path / "link").symlink_to(granted)
    done = run("echo made > made.txt", granted, [tmp_path / "missing", tmp_path / "link"])
    assert done.returncode == 0, done.stderr
    assert (granted / "made.txt").read_text() == "made\n"


@landlock
def test_no_grant_means_nothing_is_writable(tmp_path: Path) -> None:
    granted, _ = folders(tmp_path)
    done = run("echo x > /dev/null && echo x > made.txt", granted, [])
    assert done.returncode != 0 and "Permission denied" in done.stderr
    assert not (granted / "made.txt").exists()


@linux
def test_exit_codes_and_output_pass_through(tmp_path: Path) -> None:
    done = run("echo out; echo err >&2; exit 3", tmp_path, [], restrict=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert run("kill -9 $$", tmp_path, [], restrict=False).returncode == 128 + signal.SIGKILL


@linux
def test_a_wrapper_whose_parent_is_not_its_caller_runs_nothing(tmp_path: Path) -> None:
    stranger = 1 if os.getpid() != 1 else 2
    argv = wrap(["/bin/sh", "-c", "echo ran > ran.txt"], writable=[], parent=stranger, restrict=False)
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, timeout=60, start_new_session=True)
    assert done.returncode == EXIT_PARENT_GONE
    assert not (tmp_path / "ran.txt").exists()


@linux
def test_the_whole_tree_dies_with_the_parent(tmp_path: Path) -> None:
    restrict = "1" if abi() else "0"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, ESCAPING, str(tmp_path), restrict],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    wrapper = int(parent.stdout.readline())
    names = ("daemon.pid", "late.pid", "foreground.pid")
    wait_until(lambda: all(pid_in(tmp_path / name) for name in names), "the command's pid files")
    pids = [wrapper, *(pid_in(tmp_path / name) for name in names)]
    assert not any(gone(pid) for pid in pids)
    parent.kill()
    parent.wait()
    parent.stdout.close()
    wait_until(lambda: all(gone(pid) for pid in pids), f"the end of {pids}")
    # The process that would have written it 2 s after starting is gone: it never will.
    assert not (tmp_path / "late.txt").exists()


@linux
def test_the_command_outlives_the_thread_that_started_it(tmp_path: Path) -> None:
    # The kernel's parent-death signal follows the starting thread, not its process: here
    # that thread ends while the command runs (once it said "ready", the wrapper watches).
    started = []

    def start() -> None:
        argv = wrap(["/bin/sh", "-c", "echo ready; sleep 0.3; echo survived"], writable=[], restrict=False)
        started.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True))
        started.append(started[0].stdout.readline())

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    out, _ = started[0].communicate(timeout=60)
    assert (started[0].returncode, started[1], out) == (0, "ready\n", "survived\n")
