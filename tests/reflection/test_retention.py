"""Archive instead of delete: outcome records beyond 30 per agent, pruned attempt
reflections, and outcome lines living beside attempt reflections in one file."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from reflection.outcome import OutcomeReflection, decision_reflection
from reflection.outcome_markdown import write_markdown_view
from reflection.retention import LIVE_PER_AGENT, archive_outcomes, archived_outcomes
from reflection.schema import FailureCategory, Reflection
from reflection.store import JsonlReflectionStore

START = datetime(2025, 12, 31, 12, tzinfo=UTC)


def outcome(agent: str, n: int) -> OutcomeReflection:
    record = decision_reflection(session_id="s", task_id=f"T-{n}", agent=agent, title=f"choice {n}",
                                 decision=f"option {n}", alternatives=["other"], why="it was simpler")
    return record.model_copy(update={"created_at": START + timedelta(days=n)})


def attempt(subtask: str, number: int, created_at: datetime | None = None) -> Reflection:
    extra = {"created_at": created_at} if created_at else {}
    return Reflection(session_id="s", task_id="T", subtask_id=subtask, attempt_number=number,
                      category=FailureCategory.ROOT_CAUSE, analysis="a", suggestion="b", confidence=0.5, **extra)


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


@pytest.fixture
def store(tmp_path: Path) -> JsonlReflectionStore:
    return JsonlReflectionStore(tmp_path / "memory" / "reflections.jsonl")


def test_the_31st_record_of_an_agent_is_archived_while_another_agents_30_stay(store: JsonlReflectionStore) -> None:
    coder = [outcome("coder", n) for n in range(LIVE_PER_AGENT + 1)]
    planner = [outcome("planner", n) for n in range(LIVE_PER_AGENT)]
    for record in [*planner, *coder]:
        store.append_outcome(record)
    store.append(attempt("T.1", 1))

    assert archive_outcomes(store) == 1

    oldest = coder[0]  # 2025-12-31: the archive of 2025
    archive = store.path.parent / "archive" / "reflections-2025.jsonl"
    assert [obj["id"] for obj in lines(archive)] == [oldest.id]
    live_ids = [obj["id"] for obj in lines(store.path)]
    assert oldest.id not in live_ids
    assert [r.id for r in store.outcomes()] == [r.id for r in [*planner, *coder[1:]]]
    assert store.count() == 1  # the attempt reflection stays
    assert archived_outcomes(store.path.parent) == [oldest]
    assert archive_outcomes(store) == 0


def test_the_markdown_view_shows_archived_records_under_their_year(store: JsonlReflectionStore) -> None:
    for n in range(3):
        store.append_outcome(outcome("coder", n))
    archive_outcomes(store, keep_per_agent=2)

    memory = store.path.parent
    paths = write_markdown_view(store.outcomes(), memory, archived=archived_outcomes(memory))

    assert memory / "reflections" / "coder" / "archive" / "2025" / "2025-12-31-choice-0.md" in paths
    assert len(paths) == 3


def test_pruned_attempt_reflections_end_up_in_the_archive(store: JsonlReflectionStore) -> None:
    old = attempt("T.1", 1, created_at=datetime(2024, 5, 1, tzinfo=UTC))
    new = attempt("T.1", 2)
    kept_outcome = outcome("coder", 0).model_copy(update={"created_at": datetime(2020, 1, 1, tzinfo=UTC)})
    store.append(old)
    store.append_outcome(kept_outcome)
    store.append(new)
    archive = store.path.parent / "archive" / "reflections-2024.jsonl"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b'{"id": "torn')  # an earlier append cut short

    assert store.prune(datetime.now(UTC) - timedelta(days=30)) == 1

    assert archive.read_bytes().splitlines()[-1] == old.to_json_line().rstrip(b"\n")  # on a line of its own
    assert [r.attempt_number for r in store.iterate()] == [2]
    assert [r.id for r in store.outcomes()] == [kept_outcome.id]  # not pruned by age


def test_move_out_moves_what_the_caller_selects(store: JsonlReflectionStore) -> None:
    store.append(attempt("a", 1))
    store.append(attempt("b", 1))
    assert store.move_out(lambda obj: obj.get("subtaskId") == "a") == 1
    assert [r.subtask_id for r in store.iterate()] == ["b"]
    year = datetime.now(UTC).year
    assert [obj["subtaskId"] for obj in lines(store.path.parent / "archive" / f"reflections-{year}.jsonl")] == ["a"]


def test_outcome_lines_do_not_disturb_attempt_reflections(
    store: JsonlReflectionStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="goldenloop.store")
    store.append(attempt("T.1", 1))
    store.append_outcome(outcome("coder", 1))
    store.append(attempt("T.1", 2))
    store.append_outcome(outcome("coder", 2))

    fresh = JsonlReflectionStore(store.path)  # reads without an index: recent() scans backwards
    assert [r.attempt_number for r in fresh.recent("T.1", 5)] == [2, 1]
    assert fresh.count() == 2
    assert [r.attempt_number for r in fresh.iterate()] == [1, 2]
    assert [r.attempt_number for r in store.recent("T.1", 5)] == [2, 1]  # the indexed path
    assert store.count() == 2 and [r.attempt_number for r in store.iterate()] == [1, 2]
    assert len(store.outcomes()) == 2
    assert store.skipped_lines == 0 and fresh.skipped_lines == 0
    assert caplog.records == []


def test_an_outcome_line_with_every_attempt_key_is_still_not_an_attempt(store: JsonlReflectionStore) -> None:
    disguised = attempt("T.1", 1).to_dict() | {"kind": "outcome"}
    store.path.parent.mkdir(parents=True)
    line = orjson.dumps(disguised) + b"\n"
    store.path.write_bytes(line + attempt("T.1", 2).to_json_line())

    assert store.count() == 1 and [r.attempt_number for r in store.recent("T.1", 5)] == [2]
    assert store.prune(datetime.now(UTC) + timedelta(days=1)) == 1
    assert store.path.read_bytes() == line  # kept byte for byte by the rewrite
