"""The retention watermark: a run reads only what was appended after it, a fresh clone of a
memory committed with its mark reads nothing more, and a mark that no longer describes the
file (edited, shortened, rewritten) is noticed and the whole file read again. The automatic
pass keeps the markdown view in step with the records it moves."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from orchestrator.layout import Layout
from orchestrator.session.housekeeping import apply_retention
from reflection.outcome import decision_reflection
from reflection.outcome_markdown import view_paths, write_page
from reflection.retention_mark import WINDOW, brought_up_to_date, mark_path, read_mark
from reflection.schema import FailureCategory, Reflection
from reflection.store import JsonlReflectionStore

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def attempt(n: int, days_old: float) -> Reflection:
    return Reflection(session_id="s", task_id="T", subtask_id=f"T.{n}", attempt_number=1,
                      category=FailureCategory.EDGE_CASE, analysis="a" * 200, suggestion="s",
                      action_items=[], confidence=0.5, created_at=NOW - timedelta(days=days_old))


def big_memory(project: Path, records: int = 2000) -> Path:
    """Enough records that the middle of the file lies outside both hashed windows."""
    path = Layout(project).reflections
    store = JsonlReflectionStore(path)
    for n in range(records):
        store.append(attempt(n, 10))
    store.close()
    assert path.stat().st_size > 4 * WINDOW
    return path


def same_length_edit(path: Path, at: int) -> None:
    """Make the record that starts after byte `at` a year older, keeping the file's size."""
    data = bytearray(path.read_bytes())
    start = data.index(b'"createdAt":"2026', at) + len('"createdAt":"')
    data[start:start + 4] = b"2025"
    path.write_bytes(bytes(data))


def test_a_valid_mark_is_followed_by_reading_only_the_appended_lines(tmp_path: Path) -> None:
    path = big_memory(tmp_path)
    assert apply_retention(tmp_path, 90, now=NOW.timestamp()) is None  # nothing older than 90 days
    mark = read_mark(mark_path(path))
    assert mark is not None and mark.size == path.stat().st_size

    same_length_edit(path, path.stat().st_size // 2)  # inside the prefix, outside both windows
    JsonlReflectionStore(path).append(attempt(9999, 5))
    later = brought_up_to_date(path, mark)
    assert later is not None and later.size == path.stat().st_size
    assert later.oldest_attempt == mark.oldest_attempt  # the prefix was taken from the mark, not re-read
    assert brought_up_to_date(path, None).oldest_attempt < mark.oldest_attempt  # a full read sees the edit


def test_an_edit_near_either_end_or_a_shorter_file_makes_the_mark_be_read_again(tmp_path: Path) -> None:
    path = big_memory(tmp_path)
    mark = brought_up_to_date(path, None)
    for edit in (lambda: same_length_edit(path, 0),
                 lambda: same_length_edit(path, path.stat().st_size - 1000),
                 lambda: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])):
        original = path.read_bytes()
        edit()
        assert brought_up_to_date(path, mark) == brought_up_to_date(path, None)
        path.write_bytes(original)


def test_a_user_edit_that_makes_a_record_old_is_pruned_though_a_mark_said_nothing_was_due(tmp_path: Path) -> None:
    path = big_memory(tmp_path)
    assert apply_retention(tmp_path, 90, now=NOW.timestamp()) is None
    inode = path.stat().st_ino
    assert apply_retention(tmp_path, 90, now=NOW.timestamp() + 2 * 86400) is None
    assert path.stat().st_ino == inode  # nothing due: the file was not rewritten

    data = path.read_bytes()
    path.write_bytes(data.replace(b'"createdAt":"2026-02-19', b'"createdAt":"2025-02-19', 1))  # the first line
    assert apply_retention(tmp_path, 90, now=NOW.timestamp() + 3 * 86400) == 1
    assert JsonlReflectionStore(path).count() == 1999


def test_a_fresh_clone_of_a_memory_committed_with_its_mark_trusts_the_mark(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    path = big_memory(origin)
    apply_retention(origin, 90, now=NOW.timestamp())
    git = ["git", "-c", "user.email=a@b.invalid", "-c", "user.name=a", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    subprocess.run([*git, "-C", str(origin), "add", "-f", ".openagents/memory"], check=True)
    subprocess.run([*git, "-C", str(origin), "commit", "-q", "-m", "memory"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)

    cloned = Layout(clone).reflections
    mark = read_mark(mark_path(cloned))
    assert mark == read_mark(mark_path(path))
    same_length_edit(cloned, cloned.stat().st_size // 2)  # what only a full read would see
    assert brought_up_to_date(cloned, mark) == mark


def test_the_automatic_pass_moves_the_markdown_pages_of_the_records_it_archives(tmp_path: Path) -> None:
    memory = Layout(tmp_path).reflections.parent
    store = JsonlReflectionStore(Layout(tmp_path).reflections)
    records = []
    for n in range(5):
        record = decision_reflection(session_id="s", task_id=f"T-{n}", agent="coder", title=f"choice {n}",
                                     decision=f"option {n}", alternatives=["other"], why="simpler")
        record = record.model_copy(update={"created_at": NOW - timedelta(days=5 - n)})
        store.append_outcome(record)
        write_page(record, memory)  # as a run writes each page
        records.append(record)

    assert apply_retention(tmp_path, 90, now=NOW.timestamp(), live_per_agent=2) == 3

    live_pages = sorted(p for p in (memory / "reflections" / "coder").glob("*.md"))
    assert live_pages == sorted(view_paths([records[3], records[4]], memory))
    archived = sorted((memory / "reflections" / "coder" / "archive").rglob("*.md"))
    assert len(archived) == 3
    assert os.path.commonpath([*archived, memory]) == str(memory)


def test_a_fresh_lesson_index_reads_the_lessons_the_mark_points_at_as_a_full_read_would(tmp_path: Path) -> None:
    from reflection.lesson_index import LessonIndex

    path = big_memory(tmp_path)
    store = JsonlReflectionStore(path)
    for n in range(3):
        record = decision_reflection(session_id="s", task_id=f"T-{n}", agent="coder", title=f"parse dates {n}",
                                     decision="use fromisoformat", alternatives=["strptime"], why="simpler")
        store.append_outcome(record)
        store.append(attempt(5000 + n, 1))
    apply_retention(tmp_path, 90, now=NOW.timestamp())
    mark = read_mark(mark_path(path))
    assert mark is not None and mark.outcome_spans is not None and len(mark.outcome_spans) == 3
    store.append_outcome(decision_reflection(session_id="s", task_id="T-9", agent="coder", title="after the mark",
                                             decision="d", alternatives=["a"], why="w"))

    def lesson_ids() -> list[str]:
        with LessonIndex(path.parent) as index:
            index.sync()
            return sorted(lesson.id for lesson in index.lessons())

    from_mark = lesson_ids()
    for suffix in ("", "-wal", "-shm"):
        (path.parent / f"lessons.sqlite{suffix}").unlink(missing_ok=True)
    mark_path(path).unlink()  # no mark: the whole file
    assert from_mark == lesson_ids() and len(from_mark) == 4
