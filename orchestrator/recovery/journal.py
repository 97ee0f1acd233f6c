"""The journal of the subtask in flight: which processes a killed run may have left running.

Before a subtask's first attempt starts, `.openagents/journal/<taskId>.json` records the
subtask and its base commit; the process groups of the checks and the agent are added,
as they start, to `<taskId>.sessions` beside it. The attempt itself runs in a worktree of
its own, so a killed run leaves nothing in the user's checkout to undo: the journal only
says a subtask was in flight, and what to stop.

The checks a task runs before its first subtask's journal exists (the preflight) have
their sessions recorded too, in `<taskId>.sessions` (`EarlySessions`): `leftover_sessions`
names every session a killed run of a task may have left running. (An agent's processes
end with goldenloop anyway, under the sandbox's wrapper; the checks' are stopped here.)
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from orchestrator.layout import Layout
from orchestrator.processes import kill_marked, kill_sessions
from reflection.fileio import atomic_write

SLACK_S = 1.0  # how long after a kill a process it left may still be starting
HEARTBEAT_S = 0.25  # how often a running attempt records its escapees


@dataclass
class Journal:
    path: Path
    task_id: str
    subtask_id: str
    base: str
    alive: float = 0.0  # wall-clock time of the last heartbeat
    process_groups: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def start(cls, project_dir: Path, task_id: str, subtask_id: str, base: str) -> Journal:
        """Write the journal before any attempt starts."""
        journal = cls(Layout(project_dir).journal(task_id), task_id, subtask_id, base, alive=time.time())
        journal.save()
        return journal

    @classmethod
    def load(cls, project_dir: Path, task_id: str) -> Journal | None:
        path = Layout(project_dir).journal(task_id)
        try:
            body = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        alive = max(body["alive"], path.stat().st_mtime)  # the heartbeat touches the file
        return cls(path, body["taskId"], body["subtaskId"], body["base"], alive, body.get("processGroups", []))

    def save(self) -> None:
        with self._lock:  # the heartbeat thread saves too: the last write holds the latest state
            body = {"taskId": self.task_id, "subtaskId": self.subtask_id, "base": self.base,
                    "alive": self.alive, "processGroups": self.process_groups}
            atomic_write(self.path, orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")

    def touch(self) -> None:
        """A cheap heartbeat: the file's modification time, read back by `load`."""
        try:
            os.utime(self.path)
        except FileNotFoundError:
            pass

    def add_process_group(self, pgid: int) -> None:
        """A command's session, in the `.sessions` file beside the journal (as the early
        checks' are): not fsynced, as a power loss ends these processes too, so the
        journal itself is not rewritten and fsynced for each command."""
        with self._lock:
            if pgid in self.process_groups:
                return
            self.process_groups.append(pgid)
            atomic_write(early_sessions_path_of(self.path), orjson.dumps(self.process_groups), durable=False)
        self.touch()

    def end(self) -> None:
        """The subtask is over: nothing left to recover."""
        self.path.unlink(missing_ok=True)
        early_sessions_path_of(self.path).unlink(missing_ok=True)


class Heartbeat:
    """A thread that keeps a journal's time of life fresh while a subtask runs.

    A thread, not a task: it must beat while the event loop waits on a long executor call,
    and it must never turn the loop's own exceptions into exception groups.
    """

    def __init__(self, journal: Journal, also: Callable[[], None] | None = None) -> None:
        self.journal, self.also = journal, also
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="goldenloop-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.journal.touch()
            if self.also is not None:
                self.also()


class EarlySessions:
    """The process sessions of the commands a task runs before its first subtask's journal
    exists (the preflight checks), written as they start: a kill during them leaves
    nothing running that the next run cannot find."""

    def __init__(self, project_dir: Path, task_id: str) -> None:
        self.path = early_sessions_path(project_dir, task_id)
        self.sids: list[int] = []

    def add(self, sid: int) -> None:
        self.sids.append(sid)
        # Not fsynced: a power loss ends these processes too, and a torn record names none.
        atomic_write(self.path, orjson.dumps(self.sids), durable=False)

    def end(self) -> None:
        self.path.unlink(missing_ok=True)


def early_sessions_path(project_dir: Path, task_id: str) -> Path:
    """The sessions of a task's commands: its early checks', then its subtask's."""
    return early_sessions_path_of(Layout(project_dir).journal(task_id))


def early_sessions_path_of(journal: Path) -> Path:
    return journal.with_suffix(".sessions")


def leftover_sessions(project_dir: Path, task_id: str) -> list[int]:
    """Every process session a killed run of `task_id` may have left running: its early
    checks' and its subtask's (the journal's and the `.sessions` file beside it). A record
    torn by the kill names none."""
    sids: list[int] = []
    try:
        journal = Journal.load(project_dir, task_id)
    except (OSError, ValueError, KeyError):
        journal = None
    if journal is not None:
        sids += journal.process_groups
    try:
        early = orjson.loads(early_sessions_path(project_dir, task_id).read_bytes())
    except (OSError, ValueError):
        early = []
    return sids + [sid for sid in early if isinstance(sid, int)] if isinstance(early, list) else sids


def stop_leftovers(project_dir: Path, task_id: str | None = None) -> int:
    """Kill what a killed run of `task_id` (None: of any task) in `project_dir` left running:
    the sessions its records name and the processes carrying its mark; how many signals."""
    folder = Layout(project_dir).journals
    tasks = [task_id] if task_id is not None else sorted(
        ({p.stem for p in folder.glob("*.json")} | {p.stem for p in folder.glob("*.sessions")}) - {"bookkeeping"})
    recorded = [sid for task in tasks for sid in leftover_sessions(project_dir, task)]
    return kill_sessions(recorded) + kill_marked(project_dir, task_id)
