"""The wrapper a sandboxed command runs under (`python -m orchestrator.sandbox`).

    python -P -m orchestrator.sandbox --parent PID [--write PATH]... -- ARGV...

It stands between goldenloop (PID) and the command, so that:

- the command's whole tree dies with goldenloop, even when goldenloop is SIGKILLed: the
  kernel signals the wrapper when its parent dies (PR_SET_PDEATHSIG), and the wrapper, a
  child subreaper that inherits every orphan of the tree (double-forked daemons included),
  SIGKILLs its descendants and the members of its session until none is left;
- with --write, the command may change files only beneath those paths (landlock.py); when
  that cannot be enforced, the command does not run at all.

The tree is ended as well when the command exits (nothing it left running outlives it) and
when the wrapper is told to stop (SIGTERM, SIGHUP, SIGINT).

The kernel sends the parent-death signal when the *thread* that started the wrapper ends,
not its process: a wrapper started from a worker thread hears it when that thread exits.
So the signal only counts once the wrapper was reparented (its parent pid changed).

The wrapper waits in sigwaitinfo with its signals blocked rather than in handlers: a
signal arriving at any moment (even before the wait begins) is held until it is read.

Its exit code is the command's (128 + N when signal N killed it), or its own:
EXIT_PARENT_GONE when its parent died before it could watch it; EXIT_SANDBOX_FAILED, with
a line on stderr starting "goldenloop sandbox:", for wrong arguments or writes that could
not be restricted; EXIT_CANNOT_RUN when the command could not be started. It starts
before every command, so it imports nothing heavy.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from orchestrator.sandbox import kernel
from orchestrator.sandbox.landlock import SandboxError, restrict_writes

EXIT_PARENT_GONE = 125
EXIT_SANDBOX_FAILED = 126
EXIT_CANNOT_RUN = 127
END_LIMIT_S = 5.0  # how long SIGKILLed processes get to disappear (uninterruptible sleep)
PARENT_DIED = signal.SIGUSR1  # not SIGTERM, which keeps meaning "stop" from anyone
STOPS = frozenset({signal.SIGTERM, signal.SIGHUP, signal.SIGINT})
WATCHED = frozenset({signal.SIGCHLD, PARENT_DIED, *STOPS})
USAGE = "python -m orchestrator.sandbox --parent PID [--write PATH]... -- ARGV..."


def main(args: list[str] | None = None) -> int:
    try:
        parent, writable, command = parse(sys.argv[1:] if args is None else args)
    except ValueError as error:
        return _say(str(error), EXIT_SANDBOX_FAILED)
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)  # read by sigwaitinfo alone
    try:
        return _run(parent, writable, command)
    finally:
        end_tree()


def parse(args: list[str]) -> tuple[int, list[str], list[str]]:
    """(parent pid, writable paths, command) from `--parent PID [--write PATH]... -- ARGV...`."""
    parent, writable, i = None, [], 0
    while i < len(args) and args[i] != "--":
        if i + 1 == len(args) or args[i] not in ("--parent", "--write"):
            raise ValueError(f"unexpected {args[i]!r}; usage: {USAGE}")
        if args[i] == "--write":
            writable.append(args[i + 1])
        elif args[i + 1].isdigit():
            parent = int(args[i + 1])
        else:
            raise ValueError(f"--parent takes a process id, not {args[i + 1]!r}")
        i += 2
    command = args[i + 1 :]
    if parent is None or not command:
        raise ValueError(f"a parent and a command are needed; usage: {USAGE}")
    return parent, writable, command


def _run(parent: int, writable: list[str], command: list[str]) -> int:
    if not _watch(parent):
        return EXIT_PARENT_GONE
    if writable:
        try:
            restrict_writes(writable)
        except SandboxError as error:  # never run unrestricted what was to be restricted
            return _say(str(error), EXIT_SANDBOX_FAILED)
    try:
        # Python ignores SIGPIPE and SIGXFSZ; the command gets them back, and no blocked signal.
        child = os.posix_spawnp(command[0], command, os.environ, setsigmask=(),
                                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except OSError as error:
        return _say(f"cannot run {command[0]}: {error.strerror}", EXIT_CANNOT_RUN)
    return _wait(parent, child)


def _watch(parent: int) -> bool:
    """Have the parent's death signalled and orphans adopted; False if the parent is gone
    already (it may die between the fork and the prctl)."""
    try:
        kernel.prctl(kernel.PR_SET_PDEATHSIG, PARENT_DIED)
        kernel.prctl(kernel.PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):  # not Linux: the caller's process group kill remains
        pass
    return os.getppid() == parent


def _wait(parent: int, child: int) -> int:
    """The command's exit code, or 128 + N once the tree must end for signal N."""
    if not hasattr(signal, "sigwaitinfo"):  # macOS: no parent to watch, only the command
        return _exit_code(os.waitpid(child, 0)[1])
    while True:
        number = signal.sigwaitinfo(WATCHED).si_signo
        if number == signal.SIGCHLD:
            status = _reap(child)
            if status is not None:
                return _exit_code(status)
        elif number in STOPS:
            return 128 + number
        elif os.getppid() != parent:  # reparented: the parent process is gone
            return 128 + signal.SIGKILL


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # a shell's way: killed by signal N is 128 + N


def _reap(child: int | None = None) -> int | None:
    """Reap every child that ended (orphans are ours); the wait status of `child` if it did."""
    found = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == child:
            found = status


def end_tree(limit_s: float = END_LIMIT_S) -> None:
    """SIGKILL every process of the tree until none is left, or `limit_s` passed.

    All of them are stopped first: killed one by one, a process could see a child of its
    die (or a pipe close) before its own SIGKILL came, and run on, e.g. to write a file.
    A stop pending, it never returns to user space again."""
    deadline = time.monotonic() + limit_s
    while (left := tree()) and time.monotonic() < deadline:
        _send(left, signal.SIGSTOP)
        _send(left, signal.SIGKILL)
        _reap()
        signal.sigtimedwait({signal.SIGCHLD}, 0.005)  # a moment to die, shorter if a child does
    _reap()


def _send(pids: set[int], number: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            pass


def tree() -> set[int]:
    """The live processes below this one, and in the session it leads (if it leads one)."""
    me = os.getpid()
    leads = os.getsid(0) == me
    children: dict[int, list[int]] = {}
    session = set()
    for pid, ppid, sid in _processes():
        children.setdefault(ppid, []).append(pid)
        if leads and sid == me and pid != me:
            session.add(pid)
    below, todo = set(), [me]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in below:
                below.add(pid)
                todo.append(pid)
    return below | session


def _processes() -> list[tuple[int, int, int]]:
    """(pid, ppid, session) of every process on the machine that is not a zombie."""
    try:
        names = os.listdir("/proc")
    except OSError:  # not Linux
        return []
    found = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY | os.O_CLOEXEC)
            try:
                line = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses
        fields = line[line.rfind(b")") + 2 :].split(maxsplit=4)
        if len(fields) > 3 and fields[0] not in (b"Z", b"X"):
            found.append((int(name), int(fields[1]), int(fields[3])))
    return found


def _say(message: str, code: int) -> int:
    print(f"goldenloop sandbox: {message}", file=sys.stderr, flush=True)
    return code
