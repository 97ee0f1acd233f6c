"""reflexion.retentionDays is applied at session open, at most once a day, and the
reflections stay out of git (docs/ARCHITECTURE.md, "Files")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.layout import Layout
from orchestrator.session.housekeeping import apply_retention, ensure_runtime_ignored, is_memory
from reflection.schema import FailureCategory, Reflection
from reflection.store import JsonlReflectionStore

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def make(days_old: float, attempt: int) -> Reflection:
    return Reflection(
        session_id="s", task_id="t", subtask_id="t.1", attempt_number=attempt,
        category=FailureCategory.EDGE_CASE, analysis="a", suggestion="s", action_items=[],
        confidence=0.5, created_at=NOW - timedelta(days=days_old),
    )


def test_old_reflections_are_pruned_at_most_once_a_day(tmp_path: Path) -> None:
    path = Layout(tmp_path).reflections
    store = JsonlReflectionStore(path)
    store.append(make(100, 1))
    store.append(make(10, 2))
    now = NOW.timestamp()

    assert apply_retention(tmp_path, 90, now=now) == 1
    assert [r.attempt_number for r in store.recent("t.1", 5)] == [2]

    store.append(make(100, 3))  # old again, but pruning ran less than a day ago
    assert apply_retention(tmp_path, 90, now=now + 3600) is None
    assert store.count() == 2
    assert apply_retention(tmp_path, 90, now=now + 25 * 3600) == 1
    assert [r.attempt_number for r in store.recent("t.1", 5)] == [2]


def test_no_memory_no_pruning(tmp_path: Path) -> None:
    assert apply_retention(tmp_path, 90) is None
    assert not Layout(tmp_path).reflections.parent.exists()


def test_reflections_are_ignored_and_left_out_of_bookkeeping(tmp_path: Path) -> None:
    gitignore = Layout(tmp_path).gitignore
    gitignore.parent.mkdir()
    gitignore.write_text("*.lock")  # a project from before: the memory line is added once
    ensure_runtime_ignored(tmp_path)
    ensure_runtime_ignored(tmp_path)
    assert gitignore.read_text().count("memory/reflections.jsonl*") == 1
    assert gitignore.read_text().startswith("*.lock\n")
    assert is_memory(".openagents/memory/reflections.jsonl")
    assert not is_memory(".openagents/memory/edit-formats.json")
