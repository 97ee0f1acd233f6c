"""Processes an attempt starts never outlive it, or the run that started them.

Every command (the agent, the checks) leads its own session. When it ends, its process
group is killed (checks.verify), and so is every process still in its session: children
that moved to a group of their own, or double-forked into the background. The sessions
are recorded in the journal, so that the next run kills whatever a killed run left
running before it looks at the tree.

A child that calls `setsid` escapes both group and session. goldenloop makes itself a
child subreaper (Linux `prctl`), so such an escapee becomes goldenloop's own child when
its parent exits: it is killed as soon as the command that spawned it ends, and the
journal records its session while the run lives.

A record can come too late: a kill between a command's start and the journal's write,
or while an escapee's parent still lives (so it is nobody's child yet). So every command
of a task also carries the task's mark in its environment (`GOLDENLOOP_TASK`), set
before its first instruction and inherited by its descendants; the next run kills the
processes carrying a dead run's mark as well as its recorded sessions.

Linux only (`/proc`, `prctl`); elsewhere these are no-ops and the process group kill remains.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import signal
import sys
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


def become_subreaper() -> None:
    """Orphaned descendants become this process's children instead of init's (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the group and session kills remain
        log.debug("cannot become a child subreaper")


def _processes() -> list[tuple[int, int, int]]:
    """(pid, ppid, session) of every live process."""
    found = []
    for entry in PROC.glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 3 and fields[0] != "Z":
            found.append((int(entry.name), int(fields[1]), int(fields[3])))
    return found


def in_session(sid: int) -> list[int]:
    """The pids of the live processes whose session is `sid`."""
    return [pid for pid, _, session in _processes() if session == sid]


def escaped_pids() -> set[int]:
    return {pid for pid, _ in escaped()}


def escaped() -> list[tuple[int, int]]:
    """(pid, session) of this process's children that left their command's session (never
    a command being started, which is a child in a session of its own too)."""
    me, mine = os.getpid(), os.getsid(0)
    found = [(pid, sid) for pid, ppid, sid in _processes() if ppid == me and sid != mine and sid not in live_sessions]
    return [(pid, sid) for pid, sid in found if not (_starting and _environ(pid, STARTING_ENV) in _starting)]


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
    prefix = f"{name}=".encode()
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    return next((v[len(prefix):].decode(errors="replace") for v in environ.split(b"\0") if v.startswith(prefix)),
                None)


def kill_escaped(known: set[int] = frozenset()) -> list[int]:
    """Kill (and reap) the children that escaped a command which has ended; their sessions.

    `known`: pids that were already such children before the command started (not its own).
    """
    found = [(pid, sid) for pid, sid in escaped() if pid not in known]
    for pid, sid in found:
        kill_sessions([sid])
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)  # ours since the subreaper took it: no zombie left
        except (ProcessLookupError, ChildProcessError, PermissionError):
            continue
    return sorted({sid for _, sid in found})


def kill_sessions(sids: Iterable[int]) -> int:
    """SIGKILL every process of these sessions; how many were signalled."""
    killed = 0
    for sid in set(sids):
        if sid <= 1 or sid == os.getsid(0):
            continue  # never our own session, never init's
        for pid in in_session(sid):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                continue
    if killed:
        log.info("killed %d process(es) left in sessions %s", killed, sorted(set(sids)))
    return killed


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
    for pid in (int(entry.name) for entry in PROC.glob("[0-9]*")):
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
