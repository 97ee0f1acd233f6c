"""The reflection stores: the JSONL contract, concurrent writers, torn writes, pruning."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from reflection.schema import FailureCategory, FailureType, Reflection, Usage
from reflection.store import (
    REQUIRED_KEYS,
    InMemoryReflectionStore,
    JsonlReflectionStore,
    ReflectionStore,
)

OPTIONAL_KEYS = {"failureType", "errorSignature", "filesModified", "source", "model", "usage"}
LOGGER = "goldenloop.store"
Spawn = Callable[..., subprocess.Popen[bytes]]

# A writer in its own process: append n records (or forever) once the `go` file exists.
WRITER = """
import os, sys, time
from pathlib import Path
from reflection.schema import Reflection
from reflection.store import JsonlReflectionStore

path, tag, n, go = sys.argv[1:5]
store = JsonlReflectionStore(Path(path))
while go != "-" and not os.path.exists(go):
    time.sleep(0.002)
i = 0
while n == "forever" or i < int(n):
    i += 1
    store.append(Reflection(
        session_id="s", task_id="t", subtask_id=tag, attempt_number=i,
        category="root_cause", analysis="x" * 300, suggestion="try again", confidence=0.5,
    ))
"""


def make(subtask: str = "sub-1", attempt: int = 1, **extra: object) -> Reflection:
    return Reflection(
        session_id="sess-1",
        task_id="task-1",
        subtask_id=subtask,
        attempt_number=attempt,
        category=FailureCategory.EDGE_CASE,
        analysis="Empty input crashes the parser.",
        suggestion="Return an empty list for empty input.",
        action_items=["guard empty input"],
        confidence=0.6,
        **extra,  # type: ignore[arg-type]
    )


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start WRITER in its own interpreter: spawn(path, tag, n, go=None); n may be "forever".

    Writers still running when the test ends (it failed) are killed.
    """
    started: list[subprocess.Popen[bytes]] = []

    def start(path: Path, tag: str, n: str, go: Path | None = None) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-c", WRITER, str(path), tag, n, str(go) if go else "-"]
        started.append(subprocess.Popen(args, cwd=tmp_path, stderr=subprocess.PIPE))
        return started[-1]

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stderr:
            proc.stderr.close()


def wait_for_lines(path: Path, at_least: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() or path.read_bytes().count(b"\n") < at_least:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "writer died"
        assert time.monotonic() < deadline, "writer produced too few lines"
        time.sleep(0.01)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    records = caplog.records
    return [r.getMessage() for r in records if r.name == LOGGER and r.levelno == logging.WARNING]


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ReflectionStore]:
    if request.param == "memory":
        yield InMemoryReflectionStore()
    else:
        jsonl = JsonlReflectionStore.for_project(tmp_path)
        yield jsonl
        jsonl.close()


# -- behaviour both stores share ------------------------------------------------


def test_both_stores_follow_the_protocol(store: ReflectionStore) -> None:
    assert isinstance(store, ReflectionStore)


def test_recent_is_newest_first_and_only_that_subtask(store: ReflectionStore) -> None:
    for attempt in range(1, 6):
        store.append(make("sub-a", attempt))
        store.append(make("sub-b", attempt))

    got = store.recent("sub-a", 3)

    assert [(r.subtask_id, r.attempt_number) for r in got] == [
        ("sub-a", 5),
        ("sub-a", 4),
        ("sub-a", 3),
    ]
    assert [r.attempt_number for r in store.recent("sub-b", 10)] == [5, 4, 3, 2, 1]
    assert [r.attempt_number for r in store.recent("sub-b")] == [5, 4, 3]
    assert store.recent("sub-unknown") == []
    assert store.recent("sub-a", 0) == []


def test_iterate_and_count_cover_every_record_in_order(store: ReflectionStore) -> None:
    written = [make(f"sub-{i % 3}", 1 + i // 3) for i in range(7)]
    for reflection in written:
        store.append(reflection)

    assert store.count() == 7
    assert [r.id for r in store.iterate()] == [r.id for r in written]
    assert list(store.iterate())[2] == written[2]


def test_prune_removes_only_older_records(store: ReflectionStore) -> None:
    now = datetime.now(UTC)
    old = [make("sub-1", i, created_at=now - timedelta(days=40 + i)) for i in (1, 2)]
    new = [make("sub-1", 3, created_at=now - timedelta(days=1)), make("sub-2", 1)]
    for reflection in [old[0], new[0], old[1], new[1]]:
        store.append(reflection)

    assert store.prune(now - timedelta(days=30)) == 2
    assert [r.id for r in store.iterate()] == [r.id for r in new]
    assert store.count() == 2
    assert store.prune(now - timedelta(days=30)) == 0


def test_prune_takes_a_naive_cutoff_as_utc(store: ReflectionStore) -> None:
    store.append(make(created_at=datetime(2024, 1, 1, 12, 0, tzinfo=UTC)))
    assert store.prune(datetime(2024, 1, 1, 11, 59)) == 0
    assert store.prune(datetime(2024, 1, 1, 12, 1)) == 1


def test_memory_store_keeps_its_own_copies() -> None:
    store = InMemoryReflectionStore()
    reflection = make()
    store.append(reflection)
    reflection.action_items.append("changed later")
    store.recent("sub-1")[0].action_items.clear()
    assert store.recent("sub-1")[0].action_items == ["guard empty input"]


# -- the file contract --------------------------------------------------------------


def test_each_line_is_the_records_json_line_with_camelcase_keys(tmp_path: Path) -> None:
    store = JsonlReflectionStore.for_project(tmp_path)
    full = make(
        failure_type=FailureType.TEST_FAILURE,
        error_signature="abc123",
        files_modified=["src/app.py"],
        source="llm",
        model="openai/gpt-4o-mini",
        usage=Usage(input_tokens=10, output_tokens=5, cost_usd=None),
    )
    minimal = make(attempt=2)
    store.append(full)
    store.append(minimal)

    path = tmp_path / ".openagents" / "memory" / "reflections.jsonl"
    assert store.path == path
    assert lines_of(path) == [full.to_json_line(), minimal.to_json_line()]
    first, second = (orjson.loads(line) for line in lines_of(path))
    assert set(first) == REQUIRED_KEYS | OPTIONAL_KEYS
    assert set(second) == REQUIRED_KEYS
    assert REQUIRED_KEYS == {
        "id", "sessionId", "taskId", "subtaskId", "attemptNumber", "category", "analysis",
        "suggestion", "actionItems", "confidence", "createdAt",
    }  # fmt: skip
    assert first["usage"] == {"inputTokens": 10, "outputTokens": 5}  # unknown cost stays absent
    assert first["createdAt"].endswith("Z")
    assert first["failureType"] == "test_failure" and first["category"] == "edge_case"
    assert JsonlReflectionStore(path).recent("sub-1", 5) == [minimal, full]


def test_a_missing_file_reads_as_empty_and_creates_nothing(tmp_path: Path) -> None:
    store = JsonlReflectionStore.for_project(tmp_path)
    assert store.recent("sub-1") == []
    assert store.count() == 0
    assert list(store.iterate()) == []
    assert store.prune(datetime.now(UTC)) == 0
    assert not (tmp_path / ".openagents").exists()


def test_hand_written_lines_with_unknown_keys_are_read_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "reflections.jsonl"
    body = make().to_dict() | {"reviewer": "ana", "scores": {"novelty": 2}}
    hand_written = orjson.dumps(body, option=orjson.OPT_INDENT_2).replace(b"\n", b"") + b"\n"
    path.write_bytes(hand_written)
    store = JsonlReflectionStore(path)

    (read,) = store.recent("sub-1")
    store.append(make(attempt=2))

    assert read.model_extra == {"reviewer": "ana", "scores": {"novelty": 2}}
    assert orjson.loads(read.to_json_line()) == body
    assert lines_of(path)[0] == hand_written
    assert store.count() == 2


def test_a_bad_line_in_the_middle_is_skipped_and_reported_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "reflections.jsonl"
    good = [make(attempt=i) for i in (1, 2, 3)]
    foreign = b'{"kind": "note", "text": "written by another tool"}\n'
    path.write_bytes(good[0].to_json_line() + b"{not json\n" + good[1].to_json_line() + foreign)
    store = JsonlReflectionStore(path)
    caplog.set_level(logging.WARNING, logger=LOGGER)

    assert store.count() == 2
    store.append(good[2])
    assert [r.attempt_number for r in store.recent("sub-1", 5)] == [3, 2, 1]
    assert [r.attempt_number for r in store.iterate()] == [1, 2, 3]

    warnings = warnings_of(caplog)
    assert len(warnings) == 2
    assert f"{path}:2:" in warnings[0] and "not valid JSON" in warnings[0]
    assert f"{path}:4:" in warnings[1] and "missing" in warnings[1]
    assert store.skipped_lines == 2
    assert lines_of(path)[1] == b"{not json\n" and lines_of(path)[3] == foreign

    caplog.clear()  # another store reports them again, once
    assert JsonlReflectionStore(path).count() == 3
    assert len(warnings_of(caplog)) == 2


def test_a_record_with_invalid_values_is_skipped_when_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "reflections.jsonl"
    bad = make(attempt=1).to_dict() | {"confidence": 7}
    path.write_bytes(make(attempt=2).to_json_line() + orjson.dumps(bad) + b"\n")
    store = JsonlReflectionStore(path)
    caplog.set_level(logging.WARNING, logger=LOGGER)

    assert [r.attempt_number for r in store.recent("sub-1")] == [2]
    assert [r.attempt_number for r in store.recent("sub-1")] == [2]
    assert [r.attempt_number for r in store.iterate()] == [2]
    assert store.count() == 1
    assert len(warnings_of(caplog)) == 1 and "confidence" in warnings_of(caplog)[0]


# -- torn writes ------------------------------------------------------------------------


def test_a_torn_last_line_is_skipped_and_the_next_append_starts_a_fresh_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "reflections.jsonl"
    writer = JsonlReflectionStore(path)
    before = [make(attempt=1), make(attempt=2)]
    for reflection in before:
        writer.append(reflection)
    reader = JsonlReflectionStore(path)
    assert reader.count() == 2
    caplog.set_level(logging.WARNING, logger=LOGGER)

    torn = make(attempt=3).to_json_line()[:40]  # what a writer killed mid-write leaves
    with path.open("ab") as out:
        out.write(torn)
    assert reader.count() == 2 and warnings_of(caplog) == []  # may be a write in progress

    after = make(attempt=4)
    JsonlReflectionStore(path).append(after)

    expected = [*(r.to_json_line() for r in before), torn + b"\n", after.to_json_line()]
    assert lines_of(path) == expected
    assert [r.attempt_number for r in reader.recent("sub-1", 5)] == [4, 2, 1]
    assert reader.count() == 3 and reader.skipped_lines == 1
    (warning,) = warnings_of(caplog)
    assert f"{path}:3:" in warning


def test_a_writer_killed_mid_loop_loses_nothing_complete(tmp_path: Path, spawn: Spawn) -> None:
    path = tmp_path / "reflections.jsonl"
    proc = spawn(path, "killed", "forever")
    wait_for_lines(path, 200, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1].splitlines(keepends=True)
    reader = JsonlReflectionStore(path)
    records = list(reader.iterate())
    assert [r.to_json_line() for r in records] == complete
    assert [r.attempt_number for r in records] == list(range(1, len(complete) + 1))
    assert reader.skipped_lines <= 1

    survivor = make("after-kill")
    JsonlReflectionStore(path).append(survivor)

    assert reader.recent("after-kill") == [survivor]
    assert path.read_bytes().startswith(b"".join(complete))
    assert reader.count() == len(complete) + 1
    assert reader.skipped_lines <= 1


# -- several processes ----------------------------------------------------------------


def test_processes_appending_at_once_neither_interleave_nor_lose_lines(
    tmp_path: Path, spawn: Spawn
) -> None:
    path = tmp_path / "memory" / "reflections.jsonl"
    go = tmp_path / "go"
    writers = [spawn(path, f"proc-{k}", "250", go) for k in range(4)]
    go.touch()
    for proc in writers:
        assert proc.wait(timeout=120) == 0, proc.stderr.read().decode() if proc.stderr else ""

    lines = lines_of(path)
    assert len(lines) == 1000
    records = [Reflection.from_json_line(line) for line in lines]
    assert len({r.id for r in records}) == 1000
    store = JsonlReflectionStore(path)
    assert store.count() == 1000 and store.skipped_lines == 0
    for k in range(4):
        mine = [r.attempt_number for r in records if r.subtask_id == f"proc-{k}"]
        assert mine == list(range(1, 251))  # each writer's own order survives
        assert [r.attempt_number for r in store.recent(f"proc-{k}")] == [250, 249, 248]


def test_a_long_lived_store_sees_what_others_appended_since(tmp_path: Path, spawn: Spawn) -> None:
    path = tmp_path / "reflections.jsonl"
    mine = JsonlReflectionStore(path)
    mine.append(make("shared", 1))
    assert mine.count() == 1

    proc = spawn(path, "shared", "3")
    assert proc.wait(timeout=60) == 0
    JsonlReflectionStore(path).append(make("shared", 9))

    assert [r.attempt_number for r in mine.recent("shared", 10)] == [9, 3, 2, 1, 1]
    assert mine.count() == 5
    mine.append(make("shared", 10))  # its own append, after catching up
    assert [r.attempt_number for r in mine.recent("shared", 2)] == [10, 9]


# -- pruning the file --------------------------------------------------------------------


def test_prune_keeps_foreign_lines_byte_for_byte_and_readers_keep_working(tmp_path: Path) -> None:
    path = tmp_path / "reflections.jsonl"
    long_ago = datetime.now(UTC) - timedelta(days=90)
    old = [make("sub-1", i, created_at=long_ago) for i in (1, 2, 3)]
    new = make("sub-1", 4)
    extra = orjson.dumps(make("sub-1", 5).to_dict() | {"reviewer": "ana"}) + b"\n"
    foreign, garbage = b'{"kind":"note"}\n', b"not json at all\n"
    path.write_bytes(
        old[0].to_json_line() + foreign + old[1].to_json_line() + new.to_json_line()
        + garbage + old[2].to_json_line() + extra
    )  # fmt: skip
    reader = JsonlReflectionStore(path)
    assert reader.count() == 5
    iterating = reader.iterate()
    assert next(iterating).attempt_number == 1

    removed = JsonlReflectionStore(path).prune(datetime.now(UTC) - timedelta(days=30))

    assert removed == 3
    assert lines_of(path) == [foreign, new.to_json_line(), garbage, extra]
    assert [r.attempt_number for r in iterating] == [2, 4, 3, 5]  # the snapshot it started on
    assert [r.attempt_number for r in reader.recent("sub-1", 5)] == [5, 4]
    assert reader.count() == 2
    reader.append(make("sub-1", 6))
    assert [r.attempt_number for r in JsonlReflectionStore(path).recent("sub-1", 5)] == [6, 5, 4]


def test_prune_drops_a_torn_last_line_and_leaves_an_untouched_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "reflections.jsonl"
    store = JsonlReflectionStore(path)
    keep = make()
    store.append(keep)
    inode = path.stat().st_ino

    assert store.prune(datetime(2000, 1, 1, tzinfo=UTC)) == 0
    assert path.stat().st_ino == inode  # nothing to remove: no rewrite

    with path.open("ab") as out:
        out.write(b'{"id": "torn')
    assert store.prune(datetime(2000, 1, 1, tzinfo=UTC)) == 0
    assert path.read_bytes() == keep.to_json_line()
    assert not list(tmp_path.glob("*.tmp"))
    assert os.stat(path).st_mode & 0o777 == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- recent() without the index: the file read from its end ------------------------------


def _write(path: Path, reflections: list[Reflection]) -> None:
    path.write_bytes(b"".join(r.to_json_line() for r in reflections))


def test_recent_reads_back_past_many_records_of_other_subtasks(tmp_path: Path) -> None:
    path = tmp_path / "reflections.jsonl"
    before = [make(f"old-{i // 4}", i + 1) for i in range(20_000)]
    mine = [make("sub-x", i) for i in (1, 2, 3, 4)]
    after = [make(f"new-{i // 4}", i + 1) for i in range(20_000)]
    _write(path, [*before, mine[0], mine[1], *after[:5], mine[2], mine[3], *after])
    assert path.stat().st_size > 8 << 20  # more than one run of reading back

    store = JsonlReflectionStore(path)
    assert [r.attempt_number for r in store.recent("sub-x", 3)] == [4, 3, 2]
    assert [r.attempt_number for r in store.recent("sub-x", 10)] == [4, 3, 2, 1]
    assert store.recent("old-0", 10) == before[:4][::-1]
    assert store.recent("new-4999") == after[-4:][::-1][:3]
    assert store.recent("nowhere") == []
    assert store.count() == 40_009  # the index, built now, agrees
    assert [r.attempt_number for r in store.recent("sub-x", 10)] == [4, 3, 2, 1]


def test_recent_finds_a_record_far_from_the_end(tmp_path: Path) -> None:
    path = tmp_path / "reflections.jsonl"
    far = make("sub-far", 1)
    _write(path, [make("other", 1), far, *(make(f"sub-{i}", i + 1) for i in range(30_000))])
    assert JsonlReflectionStore(path).recent("sub-far") == [far]


def test_recent_skips_a_torn_last_line_without_the_index(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "reflections.jsonl"
    kept = [make(attempt=1), make("other", 1), make(attempt=2)]
    torn = make(attempt=3).to_json_line()[:150]
    assert b'"subtaskId":"sub-1"' in torn  # so recent() reads it
    path.write_bytes(b"".join(r.to_json_line() for r in kept) + torn)
    caplog.set_level(logging.WARNING, logger=LOGGER)

    store = JsonlReflectionStore(path)
    assert [r.attempt_number for r in store.recent("sub-1", 5)] == [2, 1]
    assert warnings_of(caplog) == []  # may be a write in progress

    JsonlReflectionStore(path).append(make(attempt=4))  # ends the torn line
    assert [r.attempt_number for r in store.recent("sub-1", 5)] == [4, 2, 1]
    (warning,) = warnings_of(caplog)
    assert "byte" in warning and "not valid JSON" in warning
    assert store.count() == 4 and store.skipped_lines == 1  # the index does not warn again
    assert len(warnings_of(caplog)) == 1


def test_recent_without_the_index_reads_as_the_index_does(tmp_path: Path) -> None:
    path = tmp_path / "reflections.jsonl"
    r1, r2, r3 = make(attempt=1), make(attempt=2), make(attempt=3)
    escaped = orjson.dumps(make(attempt=4).to_dict() | {"subtaskId": "x"}).replace(
        b'"subtaskId":"x"', b'"subtaskId":"\\u0073ub-1"'
    )
    slashed = orjson.dumps(make("a/b", 5).to_dict()).replace(b"a/b", b"a\\/b")
    extra = orjson.dumps(make(attempt=6).to_dict() | {"reviewer": "ana"})
    missing = orjson.dumps({k: v for k, v in make(attempt=7).to_dict().items() if k != "id"})
    invalid = orjson.dumps(make(attempt=8).to_dict() | {"confidence": 7})
    long_line = orjson.dumps(make(attempt=9).to_dict() | {"pad": "z" * (9 << 20)})
    body = b"\n".join([
        r1.to_json_line().rstrip(), b"{not json", escaped, r2.to_json_line().rstrip(), slashed,
        long_line, b"", extra, missing, r2.to_json_line().rstrip(), invalid, r3.to_json_line().rstrip()
    ]) + b"\n"  # fmt: skip
    path.write_bytes(body)

    def attempts(store: JsonlReflectionStore, sid: str) -> list[int]:
        return [r.attempt_number for r in store.recent(sid, 20)]

    backwards = JsonlReflectionStore(path)
    assert attempts(backwards, "sub-1") == [3, 2, 6, 9, 2, 4, 1]  # duplicate r2 twice
    assert attempts(backwards, "a/b") == [5]
    assert backwards.recent("sub-1", 20)[2].model_extra == {"reviewer": "ana"}
    indexed = JsonlReflectionStore(path)
    assert indexed.count() == 9
    for sid in ("sub-1", "a/b", "nowhere"):
        assert attempts(indexed, sid) == attempts(JsonlReflectionStore(path), sid)
    assert backwards.count() == 8  # the invalid record it met is not counted, as before
    assert [r.attempt_number for r in backwards.recent("sub-1", 2)] == [3, 2]


def test_recent_without_the_index_follows_a_pruned_file(tmp_path: Path) -> None:
    path = tmp_path / "reflections.jsonl"
    long_ago = datetime.now(UTC) - timedelta(days=90)
    _write(path, [make(attempt=1, created_at=long_ago), make(attempt=2), make("o", 1)])
    store = JsonlReflectionStore(path)
    assert [r.attempt_number for r in store.recent("sub-1")] == [2, 1]
    assert JsonlReflectionStore(path).prune(datetime.now(UTC) - timedelta(days=30)) == 1
    store.append(make(attempt=3))
    assert [r.attempt_number for r in store.recent("sub-1")] == [3, 2]
    assert store.count() == 3
