"""One conformance suite for every reflection store (in memory, JSONL, PostgreSQL): what a
user of the protocol notices, the same on each. A new backend proves itself here."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from conftest import PROJECT, Backend
from memory_fixtures import attempt, outcome, start_writer

from reflection.outcome import OutcomeReflection
from reflection.schema import Reflection
from reflection.store import ReflectionStore

NOW = datetime.now(UTC)


def numbers(records: list[Reflection]) -> list[int]:
    return [r.attempt_number for r in records]


# -- reading what was appended ------------------------------------------------------


def test_it_is_a_reflection_store_that_names_its_place_without_a_password(backend: Backend,
                                                                          store: ReflectionStore) -> None:
    assert isinstance(store, ReflectionStore)
    if backend.name == "memory":
        assert store.location is None
    else:
        assert store.location and "password" not in store.location


def test_recent_is_the_latest_of_one_subtask_first_and_honours_the_limit(store: ReflectionStore) -> None:
    for number in range(1, 6):
        store.append(attempt("sub-a", number))
        store.append(attempt("sub-b", number))

    assert [(r.subtask_id, r.attempt_number) for r in store.recent("sub-a", 3)] == [
        ("sub-a", 5), ("sub-a", 4), ("sub-a", 3)]
    assert numbers(store.recent("sub-b", 10)) == [5, 4, 3, 2, 1]
    assert numbers(store.recent("sub-b")) == [5, 4, 3]  # 3 by default
    assert store.recent("sub-a", 0) == []
    assert store.recent("no-such-subtask") == []


def test_iterate_and_count_cover_every_attempt_in_append_order(store: ReflectionStore) -> None:
    written = [attempt(f"sub-{i % 3}", 1 + i // 3) for i in range(7)]
    for record in written:
        store.append(record)
    store.append_outcome(outcome())  # not an attempt reflection

    assert store.count() == 7
    assert [r.id for r in store.iterate()] == [r.id for r in written]
    assert list(store.iterate())[2] == written[2]


def test_a_record_comes_back_whole_with_keys_the_store_does_not_know(store: ReflectionStore) -> None:
    body = attempt().to_dict() | {"reviewer": "ana", "scores": {"novelty": 2, "tags": ["a", "b"]}}
    record = Reflection.model_validate(body)
    store.append(record)

    (read,) = store.recent("sub-1")
    assert read == record
    assert read.model_extra == {"reviewer": "ana", "scores": {"novelty": 2, "tags": ["a", "b"]}}
    assert read.to_dict() == body
    assert store.find(record.id) == body

    extra = outcome().to_dict() | {"ticket": "OPS-12"}
    store.append_outcome(OutcomeReflection.model_validate(extra))
    assert store.outcomes()[0].to_dict() == extra
    assert store.find(extra["id"]) == extra


def test_another_handle_on_the_same_memory_sees_every_append(backend: Backend) -> None:
    writer, reader = backend.open(), backend.open()
    assert reader.recent("sub-1") == []
    writer.append(attempt(number=1))
    writer.append_outcome(outcome())
    writer.append(attempt(number=2))

    assert numbers(reader.recent("sub-1")) == [2, 1]
    assert reader.count() == 2 and len(reader.outcomes()) == 1


def test_find_knows_nothing_of_an_unknown_id(store: ReflectionStore) -> None:
    store.append(attempt())
    assert store.find("no-such-id") is None


def test_a_closed_store_opens_again_when_used(store: ReflectionStore) -> None:
    store.append(attempt(number=1))
    store.close()
    store.append(attempt(number=2))
    assert numbers(store.recent("sub-1")) == [2, 1]


def test_empty_until_something_is_stored_and_never_again(store: ReflectionStore) -> None:
    assert store.empty()
    store.append(attempt(created_at=NOW - timedelta(days=400)))
    assert not store.empty()
    assert store.prune(NOW) == 1
    assert not store.empty()  # archived is not gone


def test_a_record_with_values_that_fail_validation_is_skipped_and_reported_once(
    written_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = written_backend.open()
    bad = attempt(number=1).to_dict() | {"confidence": 7}
    store.append(attempt(number=2))
    store.add_raw([(bad, False)])  # as another tool, or an older goldenloop, wrote it
    caplog.set_level(logging.WARNING, logger="goldenloop.store")

    assert numbers(store.recent("sub-1")) == [2]
    assert numbers(store.recent("sub-1")) == [2]
    assert numbers(list(store.iterate())) == [2]
    warnings = [r.getMessage() for r in caplog.records if r.name == "goldenloop.store"]
    assert len(warnings) == 1 and "confidence" in warnings[0]
    assert store.find(bad["id"]) == bad  # still there, as written


# -- moving records to the archive ----------------------------------------------------


def test_prune_moves_older_attempts_to_the_archive_where_find_still_sees_them(store: ReflectionStore) -> None:
    old = [attempt("sub-1", n, created_at=NOW - timedelta(days=40 + n)) for n in (1, 2)]
    new = [attempt("sub-1", 3, created_at=NOW - timedelta(days=1)), attempt("sub-2", 1)]
    kept_outcome = outcome(created_at=NOW - timedelta(days=400))
    for record in (old[0], new[0], old[1], new[1]):
        store.append(record)
    store.append_outcome(kept_outcome)

    assert store.prune(NOW - timedelta(days=30)) == 2
    assert [r.id for r in store.iterate()] == [r.id for r in new]
    assert store.count() == 2
    assert numbers(store.recent("sub-1", 5)) == [3]
    assert store.find(old[0].id) == old[0].to_dict()
    assert [r.id for r in store.outcomes()] == [kept_outcome.id]  # prune moves attempts only
    assert store.prune(NOW - timedelta(days=30)) == 0


def test_prune_takes_a_naive_cutoff_as_utc(store: ReflectionStore) -> None:
    store.append(attempt(created_at=datetime(2024, 1, 1, 12, 0, tzinfo=UTC)))
    assert store.prune(datetime(2024, 1, 1, 11, 59)) == 0
    assert store.prune(datetime(2024, 1, 1, 12, 1)) == 1


def test_outcomes_are_listed_in_append_order_apart_from_attempts(store: ReflectionStore) -> None:
    first, second = outcome("T-1"), outcome("T-2", ended="success", strategy="Parse with the zone.")
    store.append_outcome(first)
    store.append(attempt())
    store.append_outcome(second)

    assert [(r.id, r.outcome) for r in store.outcomes()] == [(first.id, "failed"), (second.id, "success")]
    assert store.outcomes()[1] == second
    assert numbers(store.recent("sub-1")) == [1] and store.count() == 1


def test_archive_moves_outcomes_by_id_and_they_stay_findable(store: ReflectionStore) -> None:
    records = [outcome(f"T-{n}", created_at=NOW - timedelta(days=10 - n)) for n in range(4)]
    for record in records:
        store.append_outcome(record)

    assert store.archive([records[2].id, records[0].id, "no-such-id"]) == 2
    assert [r.id for r in store.outcomes()] == [records[1].id, records[3].id]
    assert [r.id for r in store.archived_outcomes()] == [records[0].id, records[2].id]  # oldest first
    assert store.find(records[2].id) == records[2].to_dict()
    assert store.archive([records[2].id]) == 0  # already archived
    assert store.archive([]) == 0


def test_the_archive_lists_each_id_once(store: ReflectionStore) -> None:
    record = outcome()
    store.append_outcome(record)
    assert store.archive([record.id, record.id]) == 1
    assert store.archive([record.id]) == 0
    assert [r.id for r in store.archived_outcomes()] == [record.id]
    assert store.outcomes() == []


# -- many writers ---------------------------------------------------------------------------


def test_writers_at_once_neither_lose_nor_interleave_records(backend: Backend, tmp_path: Path) -> None:
    writers, per_writer = 4, 50
    if backend.across_processes:
        go = tmp_path / "go"
        procs = [start_writer(backend.url, backend.memory_dir, PROJECT, f"w-{k}", str(per_writer), go)
                 for k in range(writers)]
        go.touch()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
    else:
        shared = backend.open()
        threads = [threading.Thread(target=lambda k=k: [shared.append(attempt(f"w-{k}", n))
                                                        for n in range(1, per_writer + 1)]) for k in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    store = backend.open()
    records = list(store.iterate())
    assert store.count() == len(records) == writers * per_writer
    assert len({r.id for r in records}) == writers * per_writer
    for k in range(writers):
        assert [r.attempt_number for r in records if r.subtask_id == f"w-{k}"] == list(range(1, per_writer + 1))
        assert numbers(store.recent(f"w-{k}")) == [50, 49, 48]


@pytest.mark.postgres
def test_a_server_restart_during_appends_loses_no_acknowledged_record(pg_server, pg_url: str, tmp_path: Path) -> None:
    """The writer prints an id once its append returned; after the server crashed and came
    back in the middle of the appends, every printed id is in the store, once."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # the crash recovery replays this test's appends, not the session's databases
    writer = start_writer(pg_url, tmp_path, PROJECT, "restart", "forever")
    try:
        acknowledged = _read_ids(writer, 30)
        pg_server.restart()  # immediate: a crash, recovered from the WAL
        acknowledged += _read_ids(writer, 30)
    finally:
        writer.terminate()
        rest, _ = writer.communicate(timeout=60)
    acknowledged += [line for line in rest.splitlines() if len(line) == 32]

    store = Backend("postgresql", tmp_path, pg_url).open()
    assert [store.find(rid) is not None for rid in acknowledged] == [True] * len(acknowledged)
    stored = [r.attempt_number for r in store.iterate()]
    assert len(stored) == len(set(stored)) >= len(acknowledged)  # none twice
    store.close()


def _read_ids(proc, count: int) -> list[str]:
    deadline = time.monotonic() + 90
    ids = []
    while len(ids) < count:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        ids.append(line.strip())
        assert time.monotonic() < deadline, "the writer stalled"
    return ids
