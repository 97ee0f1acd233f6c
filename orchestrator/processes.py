"""Processes an attempt starts never outlive it, or the run that started them.

Every command (the agent, the checks) leads its own session. When it ends, its process
group is killed (checks.verify), and so is every process still in its session: children
that moved to a group of their own, or double-forked into the background. The sessions
are recorded in the journal, so that the next run kills whatever a killed run left
running before it looks at the tree.

A child that calls `setsid` escapes both group and session. goldenloop makes itself a
child subreaper (Linux `prctl`), so such an escapee becomes goldenloop's own child when
its parent exits: it is killed as soon as the command that spawned it ends, and the
journal records its session while the run lives. A command's end is a kill that waits:
its session, every session a descendant moved to and every escapee are killed and scanned
again until nothing of them is left (a killed parent may exit only after a scan, on a
loaded machine, and its escapee is found by the next one).

A record can come too late: a kill between a command's start and the journal's write,
or while an escapee's parent still lives (so it is nobody's child yet). So every command
of a task also carries the task's mark in its environment (`GOLDENLOOP_TASK`), set
before its first instruction and inherited by its descendants; the next run kills the
processes carrying a dead run's mark as well as its recorded sessions.

Linux only (`/proc`, `prctl`); elsewhere these are no-ops and the process group kill remains.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

log = logging.getLogger("goldenloop.processes")

PROC = Path("/proc")
# Told the session id of every command started in this context (the journal's recorder).
session_started: ContextVar[Callable[[int], None] | None] = ContextVar("session_started", default=None)


def announce(sid: int) -> None:
    listener = session_started.get()
    if listener is not None:
        listener(sid)


PR_SET_CHILD_SUBREAPER = 36
live_sessions: set[int] = set()  # the sessions of the commands running now
_subreaper = False  # set once prctl said yes: every live descendant is then a child's descendant


def become_subreaper() -> None:
    """Orphaned descendants become this process's children instead of init's (Linux)."""
    global _subreaper
    if not sys.platform.startswith("linux"):
        return
    try:
        _subreaper = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl: the group and session kills remain
        log.debug("cannot become a child subreaper")


def _childless() -> bool:
    """Whether this process has no child at all, live or unreaped: one system call, where a
    scan of /proc reads a file per process on the machine. Nothing is reaped."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    except (AttributeError, OSError):  # no waitid here: scan
        return False
    return False


def _pids() -> list[int]:
    """Every pid in /proc (plain os calls: a command's end scans them, several times a task)."""
    try:
        return [int(name) for name in os.listdir(PROC) if name.isdigit()]
    except OSError:  # no /proc: not Linux
        return []


def _processes() -> list[tuple[int, int, int]]:
    """(pid, ppid, session) of every live process."""
    found = []
    for pid in _pids():
        stat = _read_proc(pid, "stat")
        if stat is None:  # gone meanwhile, or not ours to read
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split(maxsplit=4)
        if len(fields) > 3 and fields[0] != b"Z":
            found.append((pid, int(fields[1]), int(fields[3])))
    return found


def _read_proc(pid: int, name: str) -> bytes | None:
    """The bytes of /proc/<pid>/<name>; None when the process is gone or not ours to read."""
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = [os.read(fd, 65536)]
        # A `stat` line is whole once its newline came: asking again only to hear "end"
        # would be a system call per process per scan. Others (environ) may come in pages.
        while not (name == "stat" and chunks[-1].endswith(b"\n")) and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def escaped_pids() -> set[int]:
    return {pid for pid, _ in escaped()}


def escaped(processes: list[tuple[int, int, int]] | None = None) -> list[tuple[int, int]]:
    """(pid, session) of this process's children that left their command's session (never
    a command being started, which is a child in a session of its own too)."""
    if processes is None and _childless():  # between commands, the usual case: no scan
        return []
    me, mine = os.getpid(), os.getsid(0)
    found = [(pid, sid) for pid, ppid, sid in (_processes() if processes is None else processes)
             if ppid == me and sid != mine]
    found = [(pid, sid) for pid, sid in found if not (_starting and _being_started(pid))]
    # Read after the starting marks, never before: a command's start joins live_sessions
    # before it drops its mark, so one whose start ended meanwhile is found live here.
    return [(pid, sid) for pid, sid in found if sid not in live_sessions]


def _being_started(pid: int) -> bool:
    """Whether a child may be a command being started: its environment carries the mark;
    or, between its fork and its exec, it still runs this very program (environment and
    command line are still ours then, so the mark is not visible yet); or it has no
    memory to read, in the middle of its exec or exiting: a command as quick as `true`
    may end before its start has returned, and reaping it would steal its exit code."""
    command = _read_proc(pid, "cmdline")
    if not command or command == _read_proc(os.getpid(), "cmdline"):
        return True
    # Read after the command line, never before: an exec between the two reads would show
    # this program's environment (no mark) beside the command's line (not ours).
    environ = _read_proc(pid, "environ")
    return not environ or _value_in(environ, STARTING_ENV) in _starting


STARTING_ENV = "GOLDENLOOP_COMMAND"
_starting: set[str] = set()  # the ids of the commands being started, in their environment
_started = itertools.count(1)


@contextmanager
def starting_command() -> Iterator[dict[str, str]]:
    """The environment that marks a command as being started until the block ends, by
    which time it is a live session: another command's end must not kill it meanwhile."""
    command_id = f"{os.getpid()}-{next(_started)}"
    _starting.add(command_id)
    try:
        yield {STARTING_ENV: command_id}
    finally:
        _starting.discard(command_id)


def _environ(pid: int, name: str) -> str | None:
    """The value of `name` in the environment `pid` was started with; None when it has none
    (or is gone, or not ours to read)."""
    environ = _read_proc(pid, "environ")
    return None if environ is None else _value_in(environ, name)


def _value_in(environ: bytes, name: str) -> str | None:
    prefix = f"{name}=".encode()
    return next((v[len(prefix):].decode(errors="replace") for v in environ.split(b"\0") if v.startswith(prefix)),
                None)


KILL_WAIT_S = 10.0  # how long a kill waits for its sessions to empty (a process stuck in the kernel)
POLL_S = 0.02


def kill_escaped(known: set[int] = frozenset()) -> list[int]:
    """Kill (and reap) the children that escaped a command which has ended, and everything
    in their sessions; their sessions. `known`: pids that were already such children before
    the command started (not its own)."""
    return sorted(_stop(set(), known)[1])


def kill_sessions(sids: Iterable[int], strangers: set[int] | None = None) -> int:
    """SIGKILL every process of these sessions, and of the sessions their descendants moved
    to (`setsid`), until none is left; how many processes were signalled.

    With `strangers` (this process's escaped children before the command started), the
    sessions are those of a command of this process that has ended, and the children
    that escaped since are killed with their sessions too. One scan is not enough
    on a loaded machine: a killed parent may exit only after the scan, and its `setsid`
    child then becomes ours, unseen; so the scan is repeated until it finds nobody, for at
    most KILL_WAIT_S.
    """
    return len(_stop(set(sids), strangers)[0])


def _stop(sessions: set[int], strangers: set[int] | None) -> tuple[set[int], set[int]]:
    """(the pids signalled, the sessions stopped), scanning until nothing is left in them."""
    signalled: set[int] = set()
    ours: set[int] = set()  # escapees now our children: reaped, or they stay zombies
    deadline = time.monotonic() + KILL_WAIT_S
    while True:
        members, escapees = _members(sessions, strangers)
        ours |= escapees
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                signalled.add(pid)
        _reap(ours)
        if not members:
            break
        if time.monotonic() > deadline:
            log.warning("processes %s outlived SIGKILL for %.0f s", sorted(members), KILL_WAIT_S)
            break
        time.sleep(POLL_S)
    if signalled:
        log.info("killed %d process(es) left in sessions %s", len(signalled), sorted(sessions))
    return signalled, sessions


def _members(sessions: set[int], strangers: set[int] | None) -> tuple[list[int], set[int]]:
    """The live processes of `sessions`, which first grow by the sessions of their
    descendants and (with `strangers`) of our newly escaped children; and those children."""
    if strangers is not None and _subreaper and _childless():
        # Our own command's sessions hold only our descendants, and a child subreaper with
        # no child has none: an orphan among them would have become its child.
        return [], set()
    processes = _processes()
    escapees = {pid: sid for pid, sid in escaped(processes) if pid not in strangers} if strangers is not None else {}
    sessions |= set(escapees.values())
    children: dict[int, list[tuple[int, int]]] = {}
    for pid, ppid, sid in processes:
        children.setdefault(ppid, []).append((pid, sid))
    todo = [pid for pid, _, sid in processes if sid in sessions]
    seen = set(todo)
    while todo:  # a descendant in a session of its own brings that session in
        for pid, sid in children.get(todo.pop(), []):
            sessions.add(sid)
            if pid not in seen:
                seen.add(pid)
                todo.append(pid)
    sessions -= {0, 1, os.getsid(0)}  # never our own session, never init's
    return [pid for pid, _, sid in processes if sid in sessions], set(escapees)


def _reap(children: set[int]) -> None:
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere, or not ours after all
            done = pid
        if done == pid:
            children.discard(pid)


# -- marks: a task's processes known by their environment ------------------------------------

MARK_ENV = "GOLDENLOOP_TASK"
# The mark of the task whose commands are started in this context (the golden loop sets it).
process_mark: ContextVar[str | None] = ContextVar("process_mark", default=None)


def task_mark(project_dir: Path, task_id: str) -> str:
    """The mark of a task's commands: its id and its project's folder."""
    return f"{task_id}@{project_dir.resolve()}"


def marked(project_dir: Path, task_id: str | None = None) -> list[int]:
    """The live processes (never this one or its ancestors) whose environment carries the
    mark of `task_id`, or of any task when None, in `project_dir`."""
    exact = task_mark(project_dir, task_id) if task_id is not None else None
    suffix = f"@{project_dir.resolve()}"
    spared = _ancestry()
    found = []
    for pid in _pids():
        value = None if pid in spared else _environ(pid, MARK_ENV)
        if value is not None and (value == exact or (exact is None and value.endswith(suffix))):
            found.append(pid)
    return found


def _ancestry() -> set[int]:
    """This process and its ancestors: a goldenloop run by an agent carries its mark too."""
    parents = {pid: ppid for pid, ppid, _ in _processes()}
    chain, pid = set(), os.getpid()
    while pid > 1 and pid not in chain:
        chain.add(pid)
        pid = parents.get(pid, 0)
    return chain


def kill_marked(project_dir: Path, task_id: str | None = None) -> int:
    """SIGKILL the processes carrying the mark (see `marked`) and their sessions; how many
    signals were sent (0: none was found)."""
    pids = marked(project_dir, task_id)
    sessions = {pid: sid for pid, _, sid in _processes() if pid in pids}
    killed = kill_sessions(sessions.values())
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except (ProcessLookupError, PermissionError):
            continue
    return killed
