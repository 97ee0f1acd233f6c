"""The task backlog: `.openagents/tasks.jsonl`, one task per line.

The file belongs to the user and to other tools as much as to us, so a rewrite changes
only what it must: lines it does not touch are written back byte-for-byte (malformed
ones included), and the one line it changes keeps every key this version does not know,
in its place. Each mutation takes a cross-process lock, re-reads the file (another
process may have changed it since) and replaces it atomically.

A blocked task records its reason in `closeReason`, the only reason key the data
contract has; its `status` ("blocked" vs "closed") tells the two meanings apart.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import Field, StrictBool, ValidationError, field_serializer, model_validator

from orchestrator.layout import Layout
from orchestrator.task_archive import ArchivedTasks
from reflection.fileio import atomic_write, file_lock
from reflection.schema import CamelModel

log = logging.getLogger("goldenloop.tasks")

TaskStatus = Literal["open", "in_progress", "blocked", "closed"]
DepType = Literal["blocks", "related", "parent-child", "discovered-from"]

PRIORITIES = range(0, 5)  # 0 is the most urgent

# Dependency types that hold a task back until their target is closed.
_GATING_DEPS = frozenset({"blocks", "parent-child"})
_ACTIVE = frozenset({"open", "in_progress"})


class TaskFileError(Exception):
    """The task file is missing or does not hold what was asked for; one sentence."""


class Dep(CamelModel, extra="allow"):
    """A dependency of one task on another; a bare id string means a `blocks` dependency."""

    id: str
    type: DepType = "blocks"

    @model_validator(mode="before")
    @classmethod
    def _bare_id(cls, value: Any) -> Any:
        return {"id": value} if isinstance(value, str) else value


VERIFICATION_ONLY = "verification-only"  # the label of a task that needs no change


class Task(CamelModel, extra="allow"):
    """One line of tasks.jsonl; keys this version does not know are kept as extras."""

    id: str = Field(min_length=1)
    title: str
    description: str = ""
    status: TaskStatus = "open"
    priority: int = Field(default=2, ge=PRIORITIES[0], le=PRIORITIES[-1])
    type: str = "task"
    labels: list[str] = Field(default_factory=list)
    deps: list[Dep] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    closed_at: datetime | None = None
    close_reason: str | None = None
    commits: list[str] = Field(default_factory=list)
    acceptance_criteria: str | list[str] | None = None
    # Task reflection for this task: true or false wins over memory.taskReflection; None: the project's.
    reflect: StrictBool | None = None

    @property
    def verification_only(self) -> bool:
        """A task that only checks the repository: an attempt that changes nothing may close it."""
        return VERIFICATION_ONLY in self.labels

    @field_serializer("created_at", "updated_at", "closed_at")
    def _iso_utc(self, value: datetime | None) -> str | None:
        return None if value is None else iso_utc(value)


def iso_utc(value: datetime) -> str:
    """ISO-8601 in UTC with a `Z`; a naive datetime is taken to be UTC already."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _now() -> datetime:
    # Whole seconds: the stamps are for people and for ordering, not for profiling.
    return datetime.now(UTC).replace(microsecond=0)


# Statuses whose lines are validated only when used: a long backlog is mostly these, and
# validating 100k closed tasks with pydantic on every read cost seconds per run.
_LAZY = frozenset({"closed", "blocked"})


class _Line:
    """One physical line of the file, as read; `data` is set when the line is a task.

    A closed or blocked line is only parsed as JSON when read; its `Task` is validated the
    first time it is used (`task`), so a problem with it is reported then, not at read.
    """

    __slots__ = ("raw", "data", "_task")

    def __init__(self, raw: bytes, data: dict[str, Any] | None = None, task: Task | None = None) -> None:
        self.raw = raw  # exactly as on disk, including its line terminator
        self.data = data
        self._task = task

    @property
    def status(self) -> str:
        assert self.data is not None
        return self._task.status if self._task is not None else self.data.get("status", "open")

    @property
    def task(self) -> Task | None:
        """The validated task; None for a line that is not one (TaskFileError: lazily found invalid)."""
        if self._task is None and self.data is not None:
            self._task = _validated(self.data)
        return self._task


@dataclass(frozen=True)
class _Snapshot:
    lines: list[_Line]
    warnings: list[str]
    refused: dict[str, str] = field(default_factory=dict)  # task id -> why its line is not a task
    by_id: dict[str, int] = field(default_factory=dict)  # task id -> index of its line

    def index_of(self, task_id: str) -> int:
        index = self.by_id.get(task_id)
        if index is not None:
            return index
        # "no task with id" would be wrong when the task is there but invalid.
        raise TaskFileError(self.refused.get(task_id, f"no task with id {task_id}"))

    @cached_property
    def closed(self) -> frozenset[str]:
        """Ids of closed tasks: computed once per read, as a waiting worker asks every 50 ms."""
        return frozenset(task_id for task_id, i in self.by_id.items() if self.lines[i].status == "closed")

    def tasks(self, statuses: frozenset[str] | None = None) -> list[Task]:
        """Valid tasks (of these statuses), in file order; a lazily found invalid line is skipped."""
        found = []
        for line in self.lines:
            if line.data is None or (statuses is not None and line.status not in statuses):
                continue
            with suppress(TaskFileError):
                found.append(line.task)
        return found


class TaskBoard:
    """Read and update a tasks.jsonl file; safe to use from several processes at once.

    The file is read when the board is made (TaskFileError if it is missing, unless
    `missing_ok`: then it is an empty backlog that `add` starts) and checked by every
    query and mutation, so a long run sees other processes' changes; while it is
    unchanged (inode, size, mtime) the check is one stat. Closed and blocked lines are
    parsed as JSON but validated only when used, so a problem with one is reported then.
    """

    def __init__(
        self,
        path: Path,
        *,
        lock_timeout_s: float | None = 10.0,
        clock: Callable[[], datetime] = _now,
        archive: Path | None = None,
        missing_ok: bool = False,
    ) -> None:
        self.path = Path(path)
        self._missing_ok = missing_ok
        self.lock_path = self.path.with_suffix(self.path.suffix + ".lock")
        self._lock_timeout_s = lock_timeout_s
        self._clock = clock
        self._logged: set[str] = set()
        self.archive = ArchivedTasks(archive or self.path.parent / "archive")  # closed tasks moved out
        # The file a snapshot was read from, with the snapshot: one tuple, replaced whole, so
        # that a thread reading the board never pairs a new file with an old snapshot.
        self._cache: tuple[tuple[int, ...] | None, _Snapshot] | None = None
        # Read now, so that a missing or unreadable file is reported where the board is made.
        self._read()

    @classmethod
    def for_project(cls, project_dir: Path, **kwargs: Any) -> TaskBoard:
        layout = Layout(Path(project_dir))
        return cls(layout.tasks, archive=layout.task_archive, **kwargs)

    # --- reading -----------------------------------------------------------------------

    @property
    def warnings(self) -> list[str]:
        """One line per malformed or duplicate line, as of the last read."""
        cached = self._cache
        return list(cached[1].warnings) if cached is not None else []

    def tasks(self) -> list[Task]:
        """Every valid task, in file order (re-reads the file)."""
        return self._read().tasks()

    def with_status(self, *statuses: TaskStatus) -> list[Task]:
        """The valid tasks of these statuses, in file order; cheaper than `tasks()` on a long backlog."""
        return self._read().tasks(frozenset(statuses))

    def statuses(self) -> dict[str, str]:
        """Task id -> status, without validating every task."""
        snapshot = self._read()
        return {task_id: snapshot.lines[i].status for task_id, i in snapshot.by_id.items()}

    def get(self, task_id: str) -> Task:
        """The task, from tasks.jsonl or else from the archive of closed tasks."""
        snapshot = self._read()
        if task_id not in snapshot.by_id and task_id not in snapshot.refused:
            archived = self.archive.get(task_id)
            if archived is not None:
                return _validated(archived)
        task = snapshot.lines[snapshot.index_of(task_id)].task
        assert task is not None  # index_of only returns task lines
        return task

    def is_closed(self, task_id: str) -> bool:
        """Whether the task is closed: in tasks.jsonl, or moved to the archive."""
        snapshot = self._read()
        if task_id in snapshot.by_id:
            return snapshot.lines[snapshot.by_id[task_id]].status == "closed"
        return self.archive.get(task_id) is not None

    def ready(self) -> list[Task]:
        """Open or in-progress tasks whose blocking deps are all closed, most urgent first.

        Order: priority, then createdAt (tasks without one last), then id. A dependency
        on an id that is not in the file counts as not closed: a typo must not unblock.
        """
        snapshot = self._read()
        active = snapshot.tasks(_ACTIVE)
        closed: set[str] | frozenset[str] = snapshot.closed
        elsewhere = {d.id for task in active for d in task.deps if d.id not in snapshot.by_id}
        if elsewhere:  # only a dependency named nowhere in tasks.jsonl opens the archive
            closed = closed | (elsewhere & self.archive.ids())
        ready = [task for task in active if _unblocked(task, closed)]
        return sorted(ready, key=_ready_order)

    def next_ready(self) -> Task | None:
        ready = self.ready()
        return ready[0] if ready else None

    # --- mutations ---------------------------------------------------------------------

    def claim(self, task_id: str) -> Task:
        """Mark a task in progress; a closed task must be reopened first."""

        def change(task: Task) -> dict[str, Any]:
            if task.status == "closed":
                raise TaskFileError(f"task {task_id} is closed: reopen it before working on it")
            return {"status": "in_progress"}

        return self._mutate(task_id, change)

    def close(self, task_id: str, reason: str, commits: list[str] | None = None) -> Task:
        """Close a task, stamping closedAt and appending the commits it produced."""

        def change(task: Task) -> dict[str, Any]:
            added = [sha for sha in commits or [] if sha not in task.commits]
            return {
                "status": "closed",
                "closed_at": self._clock(),
                "close_reason": reason,
                "commits": [*task.commits, *added],
            }

        return self._mutate(task_id, change)

    def block(self, task_id: str, reason: str) -> Task:
        """Mark a task blocked (escalated); the reason goes in closeReason."""
        return self._mutate(task_id, lambda _task: {"status": "blocked", "close_reason": reason})

    def reopen(self, task_id: str) -> Task:
        """Put a task back to open (an interrupted run, or a human unblocking it)."""
        return self._mutate(
            task_id, lambda _task: {"status": "open", "closed_at": None, "close_reason": None}
        )

    def update(self, task_id: str, **changes: Any) -> Task:
        """Change any fields (snake_case names, or extra keys as they are spelled)."""
        if "id" in changes:
            raise ValueError("a task's id cannot be changed")
        return self._mutate(task_id, lambda _task: changes)

    def add(self, drafts: list[dict[str, Any]], prefix: str = "T-") -> list[Task]:
        """Append new tasks, each given the next free id `<prefix><n>` under the lock, so two
        processes adding at once never hand out one id twice; archived ids count as taken."""
        if not self._missing_ok and not self.path.exists():
            raise TaskFileError(self._missing_message())
        with file_lock(self.lock_path, timeout_s=self._lock_timeout_s):
            snapshot = self._read()
            taken = set(snapshot.by_id) | set(snapshot.refused) | self.archive.ids()
            now, added = self._clock(), []
            for draft in drafts:
                task_id = next_free_id(taken, prefix)
                taken.add(task_id)
                added.append(_apply_new({"created_at": now, "updated_at": now, **draft, "id": task_id}))
            data = b"".join(line.raw for line in snapshot.lines)
            if data and not data.endswith(b"\n"):
                data += b"\n"  # a last line without its terminator must not swallow ours
            atomic_write(self.path, data + b"".join(orjson.dumps(_dump_new(t)) + b"\n" for t in added))
            self._read()  # still under the lock: the snapshot is the file as written
        return added

    # --- internals ---------------------------------------------------------------------

    def _read(self) -> _Snapshot:
        """The file's snapshot; an unchanged file (same inode, size and mtime) costs a stat.

        Our own rewrites replace the file (a new inode), and so does any tool that writes
        atomically; an in-place edit of the same size within one mtime tick would be missed.
        """
        try:
            identity, cached = _identity(os.stat(self.path)), self._cache
            if cached is not None and identity == cached[0]:
                return cached[1]
            with open(self.path, "rb") as handle:
                identity, data = _identity(os.fstat(handle.fileno())), handle.read()
        except FileNotFoundError:
            if not self._missing_ok:
                raise TaskFileError(self._missing_message()) from None
            self._cache = (None, _parse(b"", self.path.name))  # an empty backlog
            return self._cache[1]
        except OSError as exc:
            raise TaskFileError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        snapshot = _parse(data, self.path.name)
        for warning in snapshot.warnings:
            if warning not in self._logged:  # say each problem once per board
                self._logged.add(warning)
                log.info("%s", warning)  # the caller shows board.warnings
        self._cache = (identity, snapshot)
        return snapshot

    def _missing_message(self) -> str:
        parent = self.path.parent
        if parent.name == ".openagents":
            where = f".openagents/{self.path.name} in {parent.parent}"
        else:
            where = f"{self.path.name} in {parent}"
        return f"no {where}: create it with one task per line, see README"

    def _mutate(self, task_id: str, change: Callable[[Task], dict[str, Any]]) -> Task:
        if not self._missing_ok and not self.path.exists():  # before locking: a typo'd path creates nothing
            raise TaskFileError(self._missing_message())
        with file_lock(self.lock_path, timeout_s=self._lock_timeout_s):
            snapshot = self._read()
            index = snapshot.index_of(task_id)
            line = snapshot.lines[index]
            current = line.task
            assert current is not None and line.data is not None
            changes = {"updated_at": self._clock(), **change(current)}
            task = _apply(current, changes)
            new_line = _rewrite(line, task)
            lines = [*snapshot.lines[:index], new_line, *snapshot.lines[index + 1 :]]
            atomic_write(self.path, b"".join(item.raw for item in lines))
            # Still under the lock: the file is ours as written, so it need not be read again.
            self._cache = (_identity(os.stat(self.path)),
                           _Snapshot(lines, snapshot.warnings, snapshot.refused, snapshot.by_id))
        log.debug("task %s: %s", task_id, ", ".join(sorted(changes)))
        return task


def next_free_id(taken: set[str], prefix: str = "T-") -> str:
    """`<prefix><n>` with n one past the highest number already used (gaps are not reused:
    an id in old commits and reflections must keep naming one task)."""
    numbers = [int(rest) for rest in (i.removeprefix(prefix) for i in taken if i.startswith(prefix)) if rest.isdigit()]
    return f"{prefix}{max(numbers, default=0) + 1}"


def _apply_new(fields: dict[str, Any]) -> Task:
    try:
        return Task.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(f"invalid new task {fields.get('title')!r}: {_first_problem(exc)}") from None


def _dump_new(task: Task) -> dict[str, Any]:
    # Empty optional keys are left out: a new line carries what was said, and a default.
    return task.model_dump(mode="json", by_alias=True, exclude_none=True)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _validated(data: dict[str, Any]) -> Task:
    try:
        return Task.model_validate(data)
    except ValidationError as exc:
        raise TaskFileError(f"task {data['id']} is not a valid task: {_first_problem(exc)}") from None


def _unblocked(task: Task, closed: set[str] | frozenset[str]) -> bool:
    return all(dep.id in closed for dep in task.deps if dep.type in _GATING_DEPS)


def waiting_on(task: Task, closed: set[str], statuses: dict[str, str]) -> list[str]:
    """The dependencies that hold `task` back (not closed), each as `T-6 (blocked)`."""
    return [f"{d.id} ({statuses.get(d.id, 'unknown id')})" for d in task.deps
            if d.type in _GATING_DEPS and d.id not in closed]


def _ready_order(task: Task) -> tuple[int, bool, datetime, str]:
    created = task.created_at
    if created is not None and created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    # (missing?, value) so tasks without createdAt sort after every dated one.
    return (task.priority, created is None, created or datetime.min.replace(tzinfo=UTC), task.id)


def _parse(data: bytes, name: str) -> _Snapshot:
    lines: list[_Line] = []
    warnings: list[str] = []
    refused: dict[str, str] = {}
    seen: dict[str, int] = {}
    by_id: dict[str, int] = {}
    for number, raw in enumerate(_split_lines(data), start=1):
        line, problem, claimed = _parse_line(raw)
        task_id = line.data["id"] if line.data is not None else None
        if task_id is not None and task_id in seen:
            problem = f"repeats the id {task_id} of line {seen[task_id]}"
            line = _Line(raw)
        elif problem and claimed:  # the task the user meant is not run: say which
            problem += f", so task {claimed} is left out of the backlog"
            refused.setdefault(claimed, f"{name} line {number} is not a valid task: {problem}")
        if problem:
            warnings.append(f"{name} line {number} is not a valid task (kept as is): {problem}")
        elif task_id is not None:
            seen[task_id] = number
            by_id[task_id] = len(lines)
        lines.append(line)
    return _Snapshot(lines, warnings, refused, by_id)


def _split_lines(data: bytes) -> list[bytes]:
    """Lines with their `\\n` kept, so that joining them gives back `data` exactly."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])  # a last line without a terminator
    return lines


def _parse_line(raw: bytes) -> tuple[_Line, str | None, str | None]:
    """The line, what is wrong with it, and the task id an invalid line names."""
    body = raw.strip()
    if not body:
        return _Line(raw), None, None  # blank lines are allowed and kept
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return _Line(raw), f"not JSON ({exc.msg})", None
    if not isinstance(data, dict):
        return _Line(raw), "not a JSON object", None
    task_id = data.get("id")
    if data.get("status") in _LAZY and type(task_id) is str and task_id:
        return _Line(raw, data), None, None  # validated when used (see _Line)
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        claimed = data.get("id")
        return _Line(raw), _first_problem(exc), claimed if isinstance(claimed, str) and claimed else None
    return _Line(raw, data, task), None, None


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    if tuple(error["loc"]) == ("priority",):  # pydantic would name only the bound crossed
        low, high = PRIORITIES[0], PRIORITIES[-1]
        got = orjson.dumps(error["input"], default=repr).decode()
        return f"priority must be a whole number from {low} (most urgent) to {high} (got {got})"
    if tuple(error["loc"]) == ("reflect",):  # pydantic would say "a valid boolean"
        return f"reflect must be true or false (got {orjson.dumps(error['input'], default=repr).decode()})"
    where = ".".join(str(part) for part in error["loc"]) or "line"
    return f"{where}: {error['msg']}"


def _apply(task: Task, changes: dict[str, Any]) -> Task:
    """The task with `changes` applied, validated like a freshly read line."""
    merged = {**task.model_dump(), **changes}
    try:
        return Task.model_validate(merged)
    except ValidationError as exc:
        raise ValueError(f"invalid change to task {task.id}: {_first_problem(exc)}") from None


def _rewrite(line: _Line, task: Task) -> _Line:
    """The line's JSON object with only the changed keys replaced, order kept."""
    assert line.data is not None and line.task is not None
    before = _dump(line.task)
    data = dict(line.data)
    for key, value in _dump(task).items():
        if before.get(key, _MISSING) == value:
            continue  # untouched keys keep their original spelling, e.g. a +00:00 date
        target = _existing_key(data, key)
        if value is None and target not in data:
            continue
        data[target] = value
    terminator = b"\r\n" if line.raw.endswith(b"\r\n") else b"\n"
    return _Line(orjson.dumps(data) + terminator, data, task)


_MISSING = object()


def _dump(task: Task) -> dict[str, Any]:
    return task.model_dump(mode="json", by_alias=True)


def _existing_key(data: dict[str, Any], alias: str) -> str:
    """Write to the key the line already uses for a field: camelCase, else snake_case."""
    if alias in data:
        return alias
    for name, info in Task.model_fields.items():
        if info.alias == alias and name in data:
            return name
    return alias
