"""What a bookkeeping commit holds: goldenloop's own writes under `.openagents/`, never yours.

goldenloop writes the backlog (`tasks.jsonl`, `archive/`), the plans (`subtasks/`),
`escalations/`, `memory/` and `.openagents/.gitignore`. Everything else there
(`project.json`, `model.json`, prompt files, whatever you put there) is yours: a run
never commits it, however it got there (`goldenloop checks waive` included).

Two of goldenloop's files you may edit too: the backlog (by hand, or `goldenloop add`,
which leaves its task uncommitted) and `memory/rules.md`. When one of them already has
uncommitted changes as a run begins (`Pending.note`, before the run writes anything), the
run commits only goldenloop's part of it. In `tasks.jsonl` that is each task's state
(`STATE`: a killed run's closed tasks included) and the whole line of every task the run
worked on (one you added too); never a task you added that it did not work on, nor your
edit of another task's title, description or priority. Of `rules.md`, nothing. The other
files are only ever written by goldenloop: committed as they are, a killed run's
leftovers included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from orchestrator.git.repo import Repo
from orchestrator.layout import PREFIX

OWN = tuple(PREFIX + p for p in ("tasks.jsonl", "archive/", "subtasks/", "escalations/", "memory/", ".gitignore"))
TASKS, RULES = PREFIX + "tasks.jsonl", PREFIX + "memory/rules.md"
STATE = ("status", "updatedAt", "closedAt", "closeReason", "commits")  # the keys of a task goldenloop keeps


def is_own(path: str) -> bool:
    """Whether goldenloop writes `path` (and may commit it)."""
    return path.startswith(OWN)


@dataclass(frozen=True)
class Pending:
    """The uncommitted paths under `.openagents/` as a run begins, and the content then of
    those you may edit by hand."""

    paths: frozenset[str]
    content: dict[str, bytes | None]

    @classmethod
    def note(cls, repo: Repo) -> Pending:
        paths = frozenset(repo.dirty_paths_under(PREFIX))
        return cls(paths, {p: _read(repo, p) for p in paths & {TASKS, RULES}})

    def yours(self) -> list[str]:
        """The pending paths this run never commits."""
        return sorted(p for p in self.paths if not is_own(p) or p == RULES)

    def to_commit(self, repo: Repo, dirty: list[str]) -> tuple[list[str], dict[str, bytes | None]]:
        """Of the dirty paths now, what the bookkeeping commit holds: (paths, the content of
        those committed otherwise than the working tree has them)."""
        paths, contents = [], {}
        for path in dirty:
            if not is_own(path) or path in self.yours():
                continue
            if path == TASKS and path in self.content:
                head = repo.blob("HEAD", path)
                ours = own_tasks(self.content[path] or b"", _read(repo, path) or b"", head or b"",
                                 archived=_archived_ids(repo))
                if ours == head or (head is None and not ours):
                    continue  # the run changed no task: the changes there are all yours
                contents[path] = ours
            paths.append(path)
        return paths, contents


def own_tasks(start: bytes, now: bytes, head: bytes, archived: frozenset[str] = frozenset()) -> bytes:
    """tasks.jsonl as `head` has it, with goldenloop's changes: a task whose line changed
    between the run's `start` and `now` takes its line as now (gone now: dropped; new:
    appended); a task gone now that the archive holds was moved there by goldenloop (an
    earlier run that stopped before its commit included): dropped too; every other task
    takes now's state (`STATE`), which a killed run may have left uncommitted, and keeps
    the rest as `head` has it."""
    before, after = _tasks(start), _tasks(now)
    worked = {i for i in before.keys() | after.keys() if _body(before.get(i)) != _body(after.get(i))}
    out, seen = [], set()
    for line in _lines(head):
        task_id = _id(line)
        seen.add(task_id)
        if task_id in archived and task_id not in after:
            continue
        if task_id in worked:
            line = after.get(task_id, b"")
        elif task_id in after:
            line = _with_state(line, after[task_id])
        out.append(line)
    out += [line for task_id, line in after.items() if task_id in worked and task_id not in seen]
    return b"".join(out)


def _with_state(line: bytes, now: bytes) -> bytes:
    """`line` with the state keys as `now` has them (the line itself when nothing differs)."""
    body, state = _body(line), _body(now)
    merged = {k: v for k, v in body.items() if k not in STATE or k in state}
    merged.update({k: state[k] for k in STATE if k in state})
    return line if merged == body else orjson.dumps(merged) + b"\n"


def _lines(data: bytes) -> list[bytes]:
    return [line + b"\n" for line in data.splitlines() if line.strip()]


def _tasks(data: bytes) -> dict[str, bytes]:
    """Task id -> its line (the first, as TaskBoard reads a duplicate)."""
    found: dict[str, bytes] = {}
    for line in _lines(data):
        task_id = _id(line)
        if task_id is not None:
            found.setdefault(task_id, line)
    return found


def _id(line: bytes) -> str | None:
    body = _body(line)
    return body["id"] if isinstance(body, dict) and isinstance(body.get("id"), str) else None


def _body(line: bytes | None) -> Any:
    try:
        return None if line is None else orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _archived_ids(repo: Repo) -> frozenset[str]:
    """The ids of the tasks in `.openagents/archive/tasks-*.jsonl`."""
    ids: set[str] = set()
    for path in (repo.root / PREFIX / "archive").glob("tasks-*.jsonl"):
        ids |= {i for i in map(_id, _lines(path.read_bytes())) if i is not None}
    return frozenset(ids)


def _read(repo: Repo, path: str) -> bytes | None:
    try:
        return (repo.root / path).read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
