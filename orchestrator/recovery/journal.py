"""The journal of the subtask in flight: what recovery needs after a kill, on disk first.

Before a subtask's first attempt starts, `.openagents/journal/<taskId>.json` records its
base commit, the user's dirty paths with a copy of their content, and the tree each
attempt starts from (paths and content hashes: ours). While an attempt runs, a heartbeat
keeps the journal's `alive` time fresh, and the process groups of the agent and the
checks are added as they start. A commit in progress is written down before the index or
HEAD changes, with the working tree it is made in; the next run finishes it there.

The checks a task runs before its first subtask's journal exists (the preflight) have
their sessions recorded too, in `<taskId>.sessions` (`EarlySessions`): `leftover_sessions`
names every session a killed run of a task may have left running.

After a kill, `Journal.load` gives recovery all of it: a path changed since the base is
the attempt's when the journal knows its content or it was written while the run was
alive; one written after the run died is the user's and is kept; one that cannot be
told (a deletion after the run died) stops recovery with a sentence.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from orchestrator.git.repo import Repo
from orchestrator.layout import Layout
from orchestrator.processes import kill_marked, kill_sessions
from reflection.fileio import atomic_write

SLACK_S = 1.0  # a write this long after the last heartbeat may still be the dead run's
HEARTBEAT_S = 0.25  # how often a running attempt refreshes `alive`


def content_hash(path: Path) -> str | None:
    """The sha256 of a file's bytes (a symlink's target text), or None when it is absent."""
    try:
        data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    return hashlib.sha256(data).hexdigest()


@dataclass
class Journal:
    path: Path
    task_id: str
    subtask_id: str
    base: str
    user_paths: list[str] = field(default_factory=list)
    user_copies: dict[str, str] = field(default_factory=dict)  # path -> copy file name
    ours: dict[str, str | None] = field(default_factory=dict)  # path -> hash of our content; None: deleted
    alive: float = 0.0  # wall-clock time of the last heartbeat
    process_groups: list[int] = field(default_factory=list)
    commit: dict[str, object] | None = None  # {"paths", "old", "new"} while committing
    root: str = ""  # the working tree the subtask runs in (a worktree's, in a parallel run)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def start(cls, project_dir: Path, task_id: str, subtask_id: str, base: str, root: Path,
              user_files: dict[str, bytes], user_paths: set[str]) -> Journal:
        """Write the journal, copies of the user's files first, before any attempt starts."""
        path = Layout(project_dir).journal(task_id)
        copies = {}
        for rel, data in user_files.items():
            name = hashlib.sha256(rel.encode()).hexdigest()[:24]
            atomic_write(path.with_suffix(".files") / name, data)
            copies[rel] = name
        journal = cls(path, task_id, subtask_id, base, sorted(user_paths), copies, alive=time.time(), root=str(root))
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
        return cls(path, body["taskId"], body["subtaskId"], body["base"], body["userPaths"],
                   body["userCopies"], body["ours"], alive, body["processGroups"], body.get("commit"),
                   root=body.get("root", ""))

    def save(self) -> None:
        with self._lock:  # the heartbeat thread saves too: the last write holds the latest state
            self._write()

    def _write(self) -> None:
        body = {"taskId": self.task_id, "subtaskId": self.subtask_id, "base": self.base,
                "userPaths": self.user_paths, "userCopies": self.user_copies, "ours": self.ours,
                "alive": self.alive, "processGroups": self.process_groups, "commit": self.commit,
                "root": self.root}
        atomic_write(self.path, orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")

    def user_copy(self, rel: str) -> bytes | None:
        name = self.user_copies.get(rel)
        return None if name is None else (self.path.with_suffix(".files") / name).read_bytes()

    def beat(self) -> None:
        self.alive = time.time()
        self.save()

    def touch(self) -> None:
        """A cheap heartbeat: the file's modification time, read back by `load`."""
        try:
            os.utime(self.path)
        except FileNotFoundError:
            pass

    def remember_tree(self, root: Path, changed: list[str]) -> None:
        """The tree the next attempt starts from: every change in it is ours."""
        ours = {rel: content_hash(root / rel) for rel in changed}
        if ours == self.ours:  # as recorded (a first attempt: none): only the time of life is news
            self.touch()
            return
        self.ours = ours
        self.beat()

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

    def committing(self, paths: list[str], old: str, new: str) -> None:
        self.commit = {"paths": paths, "old": old, "new": new}
        self.save()

    def finish_commit(self, repo: Repo) -> bool:
        """Finish the commit the killed run began in `repo` (Repo.finish_commit); False when
        there is none, or it was another working tree's (a parallel worker's worktree)."""
        c = self.commit
        if c is None or (self.root and Path(self.root) != repo.root):
            return False
        if not self.root and repo.head() != c["new"]:  # a journal from before roots: only a moved HEAD tells
            return False
        return repo.finish_commit(list(c["paths"]), str(c["old"]), str(c["new"]))

    def written_by_run(self, root: Path, rel: str) -> bool | None:
        """Whether the dead run made this change: True, False (the user's), None (cannot tell)."""
        target = root / rel
        if rel in self.ours and content_hash(target) == self.ours[rel]:
            return True
        try:
            changed_at = target.lstat().st_mtime
        except (FileNotFoundError, NotADirectoryError):
            # A deletion leaves no time of its own: its folder's is the best witness.
            folder = _nearest_folder(root, target)
            changed_at = folder.stat().st_mtime
            if changed_at <= self.alive + SLACK_S:
                return True
            return None
        return changed_at <= self.alive + SLACK_S

    def end(self) -> None:
        """The subtask is over: nothing left to recover."""
        self.path.unlink(missing_ok=True)
        early_sessions_path_of(self.path).unlink(missing_ok=True)
        files = self.path.with_suffix(".files")
        if files.is_dir():
            for item in files.iterdir():
                item.unlink()
            files.rmdir()


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


def _nearest_folder(root: Path, target: Path) -> Path:
    folder = target.parent
    while folder != root and not folder.is_dir():
        folder = folder.parent
    return folder


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
