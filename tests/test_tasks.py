"""TaskBoard over tasks.jsonl, and the file helpers it rests on (atomic write, lock)."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from orchestrator.tasks import TaskBoard, TaskFileError
from reflection.fileio import LockTimeout, atomic_write, file_lock

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
NOW_TEXT = "2025-03-04T05:06:07Z"


def write_tasks(project: Path, *lines: dict[str, Any] | bytes) -> Path:
    path = project / ".openagents" / "tasks.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = b"".join(
        (line if isinstance(line, bytes) else orjson.dumps(line)) + b"\n" for line in lines
    )
    path.write_bytes(body)
    return path


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def by_id(path: Path, task_id: str) -> dict[str, Any]:
    return next(line for line in read_lines(path) if line.get("id") == task_id)


def board(project: Path) -> TaskBoard:
    return TaskBoard.for_project(project, clock=lambda: NOW)


def task(task_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": task_id, "title": f"task {task_id}", **fields}


# --- ready ---------------------------------------------------------------------------


def test_ready_orders_by_priority_then_created_then_id(tmp_path: Path) -> None:
    write_tasks(
        tmp_path,
        task("late", priority=1, createdAt="2025-01-03T00:00:00Z"),
        task("undated-b", priority=1),
        task("early", priority=1, createdAt="2025-01-01T00:00:00Z"),
        task("undated-a", priority=1),
        task("urgent", priority=0, createdAt="2025-02-01T00:00:00Z"),
        task("default-priority"),
        task("same-time-b", priority=3, createdAt="2025-01-01T00:00:00+00:00"),
        task("same-time-a", priority=3, createdAt="2025-01-01T00:00:00Z"),
    )

    ids = [t.id for t in board(tmp_path).ready()]

    assert ids == [
        "urgent",
        "early",
        "late",
        "undated-a",
        "undated-b",
        "default-priority",
        "same-time-a",
        "same-time-b",
    ]


def test_ready_skips_closed_and_blocked_but_keeps_in_progress(tmp_path: Path) -> None:
    write_tasks(
        tmp_path,
        task("a", status="closed"),
        task("b", status="blocked"),
        task("c", status="in_progress"),
        task("d"),
    )

    assert [t.id for t in board(tmp_path).ready()] == ["c", "d"]


def test_ready_waits_for_blocking_and_parent_child_deps_only(tmp_path: Path) -> None:
    write_tasks(
        tmp_path,
        task("done", status="closed"),
        task("pending"),
        task("waits-blocks", deps=[{"id": "pending", "type": "blocks"}]),
        task("waits-default", deps=[{"id": "pending"}]),  # type defaults to blocks
        task("waits-parent", deps=[{"id": "pending", "type": "parent-child"}]),
        task("related-only", deps=[{"id": "pending", "type": "related"}]),
        task("discovered", deps=[{"id": "pending", "type": "discovered-from"}]),
        task("after-done", deps=[{"id": "done", "type": "blocks"}]),
        task("typo-dep", deps=[{"id": "no-such-task", "type": "blocks"}]),
    )

    ready = {t.id for t in board(tmp_path).ready()}

    assert ready == {"pending", "related-only", "discovered", "after-done"}


def test_closing_a_blocker_makes_its_dependant_ready(tmp_path: Path) -> None:
    write_tasks(tmp_path, task("first", priority=3), task("second", deps=[{"id": "first"}]))
    tasks = board(tmp_path)
    assert tasks.next_ready() is not None and tasks.next_ready().id == "first"  # type: ignore[union-attr]

    tasks.close("first", "done", ["abc123"])

    assert [t.id for t in tasks.ready()] == ["second"]


def test_next_ready_is_none_when_nothing_is_ready(tmp_path: Path) -> None:
    write_tasks(tmp_path, task("a", status="closed"))

    assert board(tmp_path).next_ready() is None


# --- mutations -----------------------------------------------------------------------


def test_claim_marks_in_progress_and_stamps_updated_at(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, task("a"))

    claimed = board(tmp_path).claim("a")

    assert claimed.status == "in_progress"
    line = by_id(path, "a")
    assert line["status"] == "in_progress"
    assert line["updatedAt"] == NOW_TEXT


def test_close_records_reason_time_and_appends_commits(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, task("a", status="in_progress", commits=["old1"]))

    board(tmp_path).close("a", "all subtasks passed", ["new1", "old1", "new2"])

    line = by_id(path, "a")
    assert line["status"] == "closed"
    assert line["closedAt"] == NOW_TEXT
    assert line["updatedAt"] == NOW_TEXT
    assert line["closeReason"] == "all subtasks passed"
    assert line["commits"] == ["old1", "new1", "new2"]


def test_block_stores_the_reason_in_close_reason(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, task("a", status="in_progress"))

    board(tmp_path).block("a", "escalated: tests still fail after 3 retries")

    line = by_id(path, "a")
    assert line["status"] == "blocked"
    assert line["closeReason"] == "escalated: tests still fail after 3 retries"
    assert "closedAt" not in line


def test_reopen_clears_the_close_fields(tmp_path: Path) -> None:
    path = write_tasks(
        tmp_path,
        task(
            "a",
            status="closed",
            closedAt="2025-01-01T00:00:00Z",
            closeReason="done",
            commits=["c1"],
        ),
    )

    reopened = board(tmp_path).reopen("a")

    assert reopened.status == "open"
    line = by_id(path, "a")
    assert line["status"] == "open"
    assert line["closedAt"] is None
    assert line["closeReason"] is None
    assert line["commits"] == ["c1"]  # history of what was committed stays


def test_claiming_a_closed_task_is_refused(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, task("a", status="closed"))
    before = path.read_bytes()

    with pytest.raises(TaskFileError, match="task a is closed"):
        board(tmp_path).claim("a")

    assert path.read_bytes() == before


def test_update_changes_fields_and_extra_keys(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, task("a"))

    board(tmp_path).update("a", priority=0, labels=["backend"], assignee="night-run")

    line = by_id(path, "a")
    assert (line["priority"], line["labels"], line["assignee"]) == (0, ["backend"], "night-run")


def test_update_rejects_invalid_values_without_writing(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, task("a"))
    before = path.read_bytes()

    with pytest.raises(ValueError, match="priority"):
        board(tmp_path).update("a", priority=9)

    assert path.read_bytes() == before


def test_missing_file_is_a_clear_error_and_nothing_is_created(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match=r"^no \.openagents/tasks\.jsonl in .*: create it"):
        board(tmp_path)
    assert not (tmp_path / ".openagents").exists()

    path = write_tasks(tmp_path, task("a"))
    tasks = board(tmp_path)
    path.unlink()  # removed while a run holds the board
    with pytest.raises(TaskFileError, match=r"^no \.openagents/tasks\.jsonl in "):
        tasks.claim("a")
    assert not path.exists()


def test_unknown_id_is_a_clear_error(tmp_path: Path) -> None:
    write_tasks(tmp_path, task("a"))

    with pytest.raises(TaskFileError, match=r"^no task with id b$"):
        board(tmp_path).get("b")
    with pytest.raises(TaskFileError, match=r"^no task with id b$"):
        board(tmp_path).close("b", "done", [])


# --- preservation --------------------------------------------------------------------


def test_untouched_lines_malformed_lines_and_unknown_keys_survive(tmp_path: Path) -> None:
    odd_spacing = b'{ "id" : "b",  "title": "spaced",  "createdAt": "2025-01-01T00:00:00+00:00" }'
    malformed = b'{"id": "broken", "title": '
    wrong_type = b'{"id": "p9", "title": "bad priority", "priority": 9}'
    target = {
        "id": "a",
        "owner": "team-x",
        "title": "first",
        "status": "open",
        "createdAt": "2025-01-01T00:00:00+00:00",
        "x-tool": {"nested": [1, 2, {"deep": None}]},
        "deps": [{"id": "b", "type": "related", "weight": 3}],
    }
    path = write_tasks(tmp_path, target, odd_spacing, malformed, b"", wrong_type)
    tasks = board(tmp_path)

    tasks.claim("a")
    tasks.update("a", labels=["x"])
    tasks.close("a", "done", ["c1"])

    raw_lines = path.read_bytes().split(b"\n")
    assert raw_lines[1:] == [odd_spacing, malformed, b"", wrong_type, b""]
    changed = orjson.loads(raw_lines[0])
    assert list(changed)[:7] == ["id", "owner", "title", "status", "createdAt", "x-tool", "deps"]
    assert changed["owner"] == "team-x"
    assert changed["x-tool"] == {"nested": [1, 2, {"deep": None}]}
    assert changed["deps"] == [{"id": "b", "type": "related", "weight": 3}]
    assert changed["createdAt"] == "2025-01-01T00:00:00+00:00"  # unchanged value, unchanged text
    assert changed["status"] == "closed"
    assert changed["labels"] == ["x"]


def test_malformed_and_duplicate_lines_are_reported_once_each(tmp_path: Path) -> None:
    write_tasks(
        tmp_path,
        task("a"),
        b"not json at all",
        b"[1, 2]",
        task("c", status="done"),
        task("a", title="second a"),
    )
    tasks = board(tmp_path)

    assert [t.id for t in tasks.tasks()] == ["a"]
    assert tasks.get("a").title == "task a"
    warnings = tasks.warnings
    assert len(warnings) == 4
    assert warnings[0].startswith("tasks.jsonl line 2 is not a valid task (kept as is): not JSON")
    assert warnings[1] == "tasks.jsonl line 3 is not a valid task (kept as is): not a JSON object"
    assert warnings[2].startswith("tasks.jsonl line 4 is not a valid task (kept as is): status")
    assert warnings[3] == (
        "tasks.jsonl line 5 is not a valid task (kept as is): repeats the id a of line 1"
    )


def test_a_task_whose_priority_is_out_of_range_is_named_not_dropped_silently(tmp_path: Path) -> None:
    write_tasks(tmp_path, task("a"), task("T-9", priority=9))
    tasks = board(tmp_path)

    assert [t.id for t in tasks.ready()] == ["a"]
    assert tasks.warnings == [
        "tasks.jsonl line 2 is not a valid task (kept as is): priority must be a whole number "
        "from 0 (most urgent) to 4 (got 9), so task T-9 is left out of the backlog"
    ]
    with pytest.raises(TaskFileError, match=r"^tasks\.jsonl line 2 is not a valid task: priority must be"):
        tasks.get("T-9")  # not "no task with id T-9": it is there, and this is why it is not run


def test_a_mutation_rereads_changes_made_by_another_board(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, task("a"), task("b"))
    first, second = board(tmp_path), board(tmp_path)
    assert len(first.tasks()) == 2  # first has now cached the file

    second.close("b", "done elsewhere", ["s1"])
    first.claim("a")

    assert by_id(path, "a")["status"] == "in_progress"
    assert by_id(path, "b")["status"] == "closed"


def test_crlf_line_endings_are_kept_on_the_changed_line(tmp_path: Path) -> None:
    path = tmp_path / ".openagents" / "tasks.jsonl"
    path.parent.mkdir()
    path.write_bytes(orjson.dumps(task("a")) + b"\r\n" + orjson.dumps(task("b")) + b"\r\n")

    TaskBoard(path, clock=lambda: NOW).claim("a")

    first, second, rest = path.read_bytes().split(b"\r\n")
    assert orjson.loads(first)["status"] == "in_progress"
    assert second == orjson.dumps(task("b")) and rest == b""


# --- concurrency ---------------------------------------------------------------------


def _claim_and_close(project: str, ids: list[str], start: Any) -> None:
    tasks = TaskBoard.for_project(Path(project))
    start.wait(30)  # all workers begin together, so their rewrites really overlap
    for task_id in ids:
        tasks.claim(task_id)
        tasks.update(task_id, labels=[f"worker-{os.getpid()}"])
        tasks.close(task_id, f"closed by {os.getpid()}", [f"sha-{task_id}"])


def test_four_processes_mutating_at_once_lose_no_update(tmp_path: Path) -> None:
    ids = [f"t{n:02d}" for n in range(40)]
    path = write_tasks(tmp_path, *(task(task_id, keep=n) for n, task_id in enumerate(ids)))
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [
        context.Process(target=_claim_and_close, args=(str(tmp_path), ids[n::4], start))
        for n in range(4)
    ]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=60)

    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    lines = read_lines(path)
    assert [line["id"] for line in lines] == ids  # order of the file kept
    assert all(line["status"] == "closed" for line in lines)
    assert all(len(line["labels"]) == 1 for line in lines)
    assert [line["commits"] for line in lines] == [[f"sha-{i}"] for i in ids]
    assert [line["keep"] for line in lines] == list(range(40))
    assert len({line["closeReason"] for line in lines}) == 4  # all four really took part



def test_one_board_shared_by_threads_loses_no_update(tmp_path: Path) -> None:
    """Parallel workers on event loops of their own threads share the session's board: a
    read between another thread's read and its cache update never pairs the new file
    with the old snapshot, so no mutation is made on a stale one."""
    ids = [f"t{n:02d}" for n in range(24)]
    path = write_tasks(tmp_path, *(task(task_id) for task_id in ids))
    shared, start, reading = board(tmp_path), threading.Barrier(5), threading.Event()
    failures: list[BaseException] = []

    def work(mine: list[str]) -> None:
        try:
            start.wait(30)
            for task_id in mine:
                shared.claim(task_id)
                shared.close(task_id, "done", [f"sha-{task_id}"])
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)

    def read() -> None:
        start.wait(30)
        while not reading.is_set():
            shared.ready()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads switch often: the race has room to happen
    try:
        threads = [threading.Thread(target=work, args=(ids[n::4],)) for n in range(4)]
        reader = threading.Thread(target=read)
        for thread in [*threads, reader]:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        reading.set()
        reader.join(timeout=60)
    finally:
        sys.setswitchinterval(switch)

    assert failures == []
    lines = read_lines(path)
    assert [line["status"] for line in lines] == ["closed"] * len(ids)
    assert [line["commits"] for line in lines] == [[f"sha-{i}"] for i in ids]
    assert all(t.status == "closed" for t in shared.tasks())


# --- fileio --------------------------------------------------------------------------


def test_a_crash_before_the_rename_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "tasks.jsonl"
    target.write_bytes(b"old contents\n")

    def crash(*_args: object) -> None:
        raise OSError("simulated crash before replace")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        atomic_write(target, b"new contents\n")
    monkeypatch.undo()

    assert target.read_bytes() == b"old contents\n"
    assert [p.name for p in tmp_path.iterdir()] == ["tasks.jsonl"]  # no temp file left


def test_a_crash_during_a_mutation_leaves_the_task_file_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_tasks(tmp_path, task("a"), task("b"))
    before = path.read_bytes()
    monkeypatch.setattr(os, "replace", lambda *_args: (_ for _ in ()).throw(OSError("crash")))

    with pytest.raises(OSError):
        board(tmp_path).close("a", "done", ["c1"])
    monkeypatch.undo()

    assert path.read_bytes() == before
    assert board(tmp_path).claim("b").status == "in_progress"  # the lock was released


def test_atomic_write_keeps_the_file_mode(tmp_path: Path) -> None:
    target = tmp_path / "data.jsonl"
    target.write_bytes(b"x")
    target.chmod(0o640)

    atomic_write(target, b"y")

    assert target.read_bytes() == b"y"
    assert target.stat().st_mode & 0o777 == 0o640


def test_lock_held_elsewhere_times_out_with_a_clear_message(tmp_path: Path) -> None:
    lock = tmp_path / "deep" / "tasks.jsonl.lock"

    expected = r"could not lock .*tasks\.jsonl\.lock within 0\.05s: another goldenloop process"
    with (
        file_lock(lock),
        pytest.raises(LockTimeout, match=expected),
        file_lock(lock, timeout_s=0.05),
    ):
        pass

    with file_lock(lock, timeout_s=0.05):  # free again once released
        assert lock.exists()


def test_a_board_waits_for_the_lock_and_gives_up_cleanly(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, task("a"))
    before = path.read_bytes()
    impatient = TaskBoard(path, lock_timeout_s=0.05)

    with file_lock(impatient.lock_path), pytest.raises(LockTimeout):
        impatient.claim("a")

    assert path.read_bytes() == before


def test_atomic_write_fsyncs_unless_told_the_file_needs_no_durability(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    target = tmp_path / "state.json"

    atomic_write(target, b"durable\n")
    assert len(synced) == 2  # the file, then its folder (the rename)

    atomic_write(target, b"a report\n", durable=False)
    assert len(synced) == 2
    assert target.read_bytes() == b"a report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # still replaced, never half-written
