"""LessonIndex on real files: what a retry is shown, and how the cache follows the JSONL."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

from reflection.lesson_index import LessonIndex
from reflection.lessons import LessonQuery


def attempt_reflection(lesson_id: str, task_id: str, analysis: str, suggestion: str) -> dict[str, object]:
    """An attempt reflection: it serves its own subtask's retries, it is no lesson here."""
    return {
        "id": lesson_id,
        "sessionId": "s1",
        "taskId": task_id,
        "subtaskId": f"{task_id}.1",
        "attemptNumber": 1,
        "category": "root_cause",
        "analysis": analysis,
        "suggestion": suggestion,
        "actionItems": [],
        "confidence": 0.6,
        "createdAt": "2025-03-01T10:00:00Z",
    }


def attempt(
    lesson_id: str, task_id: str, analysis: str, suggestion: str = "Try again more carefully.", **extra: object
) -> dict[str, object]:
    """The outcome reflection of a failed task: what went wrong and what to do instead."""
    files = extra.pop("filesModified", [])
    return outcome(lesson_id, task_id, f"{analysis} {suggestion}", whatWentWrong=analysis, files=files, **extra)


def outcome(lesson_id: str, task_id: str, advice: str, **extra: object) -> dict[str, object]:
    return {
        "id": lesson_id,
        "kind": "outcome",
        "outcome": "failed",
        "sessionId": "s1",
        "taskId": task_id,
        "agent": "coder",
        "title": "a task",
        "createdAt": "2025-03-01T10:00:00Z",
        "labels": [],
        "files": [],
        "whatToDoDifferently": advice,
        "source": "agent",
        **extra,
    }


def write_records(memory: Path, *records: dict[str, object], mode: str = "a") -> None:
    memory.mkdir(parents=True, exist_ok=True)
    with open(memory / "reflections.jsonl", mode, encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)


def ids(ranked: list) -> list[str]:
    return [r.lesson.id for r in ranked]


def test_a_lesson_about_the_same_file_or_error_ranks_above_unrelated_ones(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        attempt("unrelated", "T-2", "The retry loop in the scheduler never stops.", "Bound the retry loop."),
        attempt("same-file", "T-3", "Forgot the header row.", "Skip the header.", filesModified=["src/report.py"]),
        attempt("same-error", "T-4", "Wrong fixture.", "Use tmp_path.", errorSignature="KeyError@tests/test_report.py"),
    )
    index = LessonIndex(tmp_path)
    ranked = index.rank(
        LessonQuery(
            "Fix the retry loop in report export",
            files=("src/report.py",),
            error_signatures=("KeyError@tests/test_report.py",),
            exclude_task_id="T-1",
        ),
        limit=3,
    )
    assert ids(ranked)[:2] == ["same-error", "same-file"] and ids(ranked)[2] == "unrelated"


def test_a_lesson_sharing_only_words_is_found_and_one_sharing_nothing_is_not(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        attempt("words", "T-2", "The CSV exporter wrote semicolons instead of commas."),
        attempt("nothing", "T-3", "Docker image lacked libpq."),
    )
    assert ids(LessonIndex(tmp_path).rank(LessonQuery("csv exporter delimiter"), limit=3)) == ["words"]


def test_the_asking_tasks_own_lessons_are_never_returned(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        attempt("own", "T-1", "Timezone lost in the parser.", filesModified=["src/dates.py"]),
        attempt("other", "T-2", "Timezone lost in the parser again.", filesModified=["src/dates.py"]),
    )
    ranked = LessonIndex(tmp_path).rank(
        LessonQuery("timezone parser", files=("src/dates.py",), exclude_task_id="T-1"), limit=5
    )
    assert ids(ranked) == ["other"]


def test_a_lesson_that_never_helped_ranks_below_one_that_did(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        attempt("idle", "T-2", "Pin the numpy version in requirements."),
        attempt("helper", "T-3", "Pin the numpy release in requirements."),
    )
    index = LessonIndex(tmp_path)
    for attempt_number in range(1, 6):
        index.record_use(["idle"], task_id="T-8", attempt=attempt_number, passed=False)
    index.record_use(["helper"], task_id="T-9", attempt=1, passed=True)
    ranked = index.rank(LessonQuery("pin numpy requirements"), limit=2)
    assert ids(ranked) == ["helper", "idle"]
    assert (ranked[1].why["shown"], ranked[1].why["helped"]) == (5, 0)
    assert index.usefulness("idle") == (5, 0) and index.usefulness("helper") == (1, 1)
    assert index.usefulness("never-shown") == (0, 0)


def test_uses_are_one_json_line_each(tmp_path: Path) -> None:
    index = LessonIndex(tmp_path)
    index.record_use(["a", "b", "a"], task_id="T-1", attempt=2, passed=True)
    lines = [json.loads(line) for line in (tmp_path / "lesson-uses.jsonl").read_text().splitlines()]
    assert [(u["lessonId"], u["taskId"], u["attempt"], u["passed"]) for u in lines] == [
        ("a", "T-1", 2, True),
        ("b", "T-1", 2, True),
    ]
    assert all(u["at"].endswith("Z") for u in lines)


def test_lines_appended_by_another_process_are_found_without_a_rebuild(tmp_path: Path) -> None:
    write_records(tmp_path, attempt("first", "T-2", "Migrations ran out of order."))
    index = LessonIndex(tmp_path)
    assert ids(index.search("migrations")) == ["first"]
    # Mark the cached row: a rebuild would lose the mark.
    with sqlite3.connect(tmp_path / "lessons.sqlite") as db:
        db.execute("UPDATE lessons SET task_id = 'marked' WHERE lesson_id = 'first'")
    line = json.dumps(attempt("second", "T-3", "Migrations need a lock.")) + "\n"
    script = "import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND); os.write(fd, sys.argv[2].encode())"
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "reflections.jsonl"), line], check=True)
    assert sorted(ids(index.search("migrations"))) == ["first", "second"]
    with sqlite3.connect(tmp_path / "lessons.sqlite") as db:
        assert db.execute("SELECT task_id FROM lessons WHERE lesson_id = 'first'").fetchone() == ("marked",)


def test_a_replaced_file_is_reindexed_and_removed_lessons_are_forgotten(tmp_path: Path) -> None:
    kept = attempt("kept", "T-3", "Cache expiry too short.")
    write_records(tmp_path, attempt("old", "T-2", "Cache keys collide."), kept)
    index = LessonIndex(tmp_path)
    assert len(index.search("cache")) == 2
    replacement = tmp_path / "reflections.new"
    replacement.write_text(json.dumps(kept) + "\n")
    os.replace(replacement, tmp_path / "reflections.jsonl")  # how a pruning process replaces it
    assert ids(index.search("cache")) == ["kept"]
    assert index.get("old") is None


def test_a_file_that_shrank_in_place_is_reindexed(tmp_path: Path) -> None:
    write_records(tmp_path, attempt("a", "T-2", "Flaky network test."), attempt("b", "T-3", "Flaky clock test."))
    index = LessonIndex(tmp_path)
    assert len(index.lessons()) == 2
    write_records(tmp_path, attempt("c", "T-4", "Flaky disk test."), mode="w")
    assert [lesson.id for lesson in index.lessons()] == ["c"]


def test_a_corrupt_database_is_rebuilt_not_an_error(tmp_path: Path) -> None:
    write_records(tmp_path, attempt("a", "T-2", "Serializer dropped nulls."))
    LessonIndex(tmp_path).rank(LessonQuery("serializer"))
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp_path / 'lessons.sqlite'}{suffix}").unlink(missing_ok=True)
    (tmp_path / "lessons.sqlite").write_bytes(b"this is not a database" * 100)
    assert ids(LessonIndex(tmp_path).search("serializer")) == ["a"]


def test_torn_and_garbage_lines_are_skipped_until_complete(tmp_path: Path) -> None:
    good = json.dumps(attempt("good", "T-2", "Lockfile was stale."))
    later = json.dumps(attempt("later", "T-3", "Lockfile owner died."))
    (tmp_path / "reflections.jsonl").write_text(
        "not json at all\n" + json.dumps({"kind": "note", "id": "x"}) + "\n[1, 2]\n" + good + "\n" + later[:25]
    )
    index = LessonIndex(tmp_path)
    assert ids(index.search("lockfile")) == ["good"]
    with open(tmp_path / "reflections.jsonl", "a") as handle:
        handle.write(later[25:] + "\n")  # the write in progress completes
    assert sorted(ids(index.search("lockfile"))) == ["good", "later"]


def test_two_indexes_on_one_directory_keep_each_lesson_once(tmp_path: Path) -> None:
    write_records(tmp_path, attempt("a", "T-2", "Port already in use."))
    first, second = LessonIndex(tmp_path), LessonIndex(tmp_path)
    first.sync()
    write_records(tmp_path, attempt("b", "T-3", "Port taken by a zombie."))
    second.sync()
    first.sync()
    assert [lesson.id for lesson in first.lessons()] == ["a", "b"]
    first.close()
    second.close()


def test_lessons_and_get_serve_a_cli(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        attempt("a", "T-2", "One."),
        outcome("b", "T-3", "Two.", tacticalRule="Always two."),
        attempt("c", "T-4", "", suggestion=""),  # teaches nothing: not a lesson
    )
    index = LessonIndex(tmp_path)
    assert [lesson.id for lesson in index.lessons()] == ["a", "b"]
    found = index.get("b")
    assert found is not None and found.rule == "Always two."
    assert index.get("c") is None


def test_identical_texts_are_returned_once(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        attempt("a", "T-2", "Quote the shell arguments.", "Use shlex."),
        attempt("b", "T-3", "Quote the shell arguments.", "Use shlex."),
    )
    assert len(LessonIndex(tmp_path).search("shell arguments")) == 1


# A fake embedder: words of one meaning share a dimension, so paraphrases without a
# shared word still point the same way. Deterministic, no network.
SYNONYMS = {
    "slow": "latency", "sluggish": "latency", "lag": "latency", "latency": "latency",
    "request": "call", "call": "call", "calls": "call", "requests": "call",
    "remote": "network", "network": "network", "http": "network",
}


def fake_embedder(texts: list[str]) -> list[list[float]]:
    vectors = []
    for text in texts:
        vector = [0.0] * 64
        for word in text.lower().replace(".", " ").split():
            vector[zlib.crc32(SYNONYMS.get(word, word).encode()) % 64] += 1.0
        vectors.append(vector)
    return vectors


def test_the_embedder_ranks_a_paraphrase_above_an_unrelated_lesson(tmp_path: Path) -> None:
    write_records(
        tmp_path,
        attempt("unrelated", "T-2", "Typo in README", "Fix spelling"),
        attempt("paraphrase", "T-3", "sluggish http requests", "cache remote calls"),
    )
    index = LessonIndex(tmp_path, embedder=fake_embedder)
    ranked = index.rank(LessonQuery("slow network call latency"), limit=2)
    assert ids(ranked)[0] == "paraphrase"
    assert ranked[0].why["text"] > 0.3


def test_attempt_reflections_are_not_lessons(tmp_path: Path) -> None:
    write_records(tmp_path, attempt_reflection("a-1", "T-2", "The parser drops the header row.", "Skip the header."))
    index = LessonIndex(tmp_path)
    assert index.search("parser header row") == []
    assert index.lessons() == []
