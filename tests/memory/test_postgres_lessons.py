"""PostgresLessonIndex on a real PostgreSQL: what a subtask's first prompt is shown from a
team's memory, ranked as the SQLite index ranks it (tests/reflection/test_lesson_index.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reflection.lessons import LessonQuery
from reflection.outcome import OutcomeReflection
from reflection.postgres.lessons import PostgresLessonIndex
from reflection.postgres.store import PostgresReflectionStore

pytestmark = pytest.mark.postgres

PROJECT = "team/app"


def lesson(lesson_id: str, task_id: str, analysis: str, suggestion: str = "Try again more carefully.",
           **extra: Any) -> OutcomeReflection:
    """The outcome reflection of a failed task: what went wrong and what to do instead."""
    body = {"id": lesson_id, "kind": "outcome", "outcome": "failed", "sessionId": "s1", "taskId": task_id,
            "agent": "coder", "title": "a task", "createdAt": "2025-03-01T10:00:00Z", "labels": [], "files": [],
            "whatWentWrong": analysis, "whatToDoDifferently": f"{analysis} {suggestion}", "source": "heuristic",
            **extra}
    return OutcomeReflection.model_validate(body)


@pytest.fixture
def remember(pg_url: str) -> Iterator:
    """remember(*lessons, project=PROJECT): outcome records appended as that project's store would."""
    stores: dict[str, PostgresReflectionStore] = {}

    def append(*records: OutcomeReflection, project: str = PROJECT) -> PostgresReflectionStore:
        store = stores.setdefault(project, PostgresReflectionStore(pg_url, project=project))
        for record in records:
            store.append_outcome(record)
        return store

    yield append
    for store in stores.values():
        store.close()


@pytest.fixture
def index(pg_url: str) -> Iterator[PostgresLessonIndex]:
    with PostgresLessonIndex(pg_url, project=PROJECT) as opened:
        yield opened


def ids(ranked: list) -> list[str]:
    return [r.lesson.id for r in ranked]


def test_a_lesson_about_the_same_file_or_error_ranks_above_unrelated_ones(remember, index) -> None:
    remember(
        lesson("unrelated", "T-2", "The retry loop in the scheduler never stops.", "Bound the retry loop."),
        lesson("same-file", "T-3", "Forgot the header row.", "Skip the header.", files=["src/report.py"]),
        lesson("same-error", "T-4", "Wrong fixture.", "Use tmp_path.", errorSignature="KeyError@tests/test_report.py"),
    )
    ranked = index.rank(LessonQuery("Fix the retry loop in report export", files=("src/report.py",),
                                    error_signatures=("KeyError@tests/test_report.py",), exclude_task_id="T-1"),
                        limit=3)
    assert ids(ranked) == ["same-error", "same-file", "unrelated"]
    assert ranked[0].why["signature"] == 1.0 and ranked[1].why["files"] == 1.0


def test_a_lesson_sharing_only_words_is_found_and_one_sharing_nothing_is_not(remember, index) -> None:
    remember(lesson("words", "T-2", "The CSV exporter wrote semicolons instead of commas."),
             lesson("nothing", "T-3", "Docker image lacked libpq."))
    ranked = index.rank(LessonQuery("csv exporter delimiter"), limit=3)
    assert ids(ranked) == ["words"] and ranked[0].why["shared_words"] == 2  # csv, exporter


def test_a_rare_shared_word_weighs_more_than_a_common_one(remember, index) -> None:
    remember(*(lesson(f"common-{n}", f"T-{n}", f"Parser step {n} failed on the input.") for n in range(6)),
             lesson("rare", "T-9", "Tokenizer dropped the trailing comment."))
    ranked = index.rank(LessonQuery("parser tokenizer"), limit=7)
    assert ids(ranked)[0] == "rare"


def test_the_asking_tasks_own_lessons_are_never_returned(remember, index) -> None:
    remember(lesson("own", "T-1", "Timezone lost in the parser.", files=["src/dates.py"]),
             lesson("other", "T-2", "Timezone lost in the parser again.", files=["src/dates.py"]))
    remember(lesson("elsewhere", "T-1", "Timezone lost in their parser too.", files=["src/dates.py"]),
             project="team/shop")  # another project's T-1 is another task
    ranked = index.rank(LessonQuery("timezone parser", files=("src/dates.py",), exclude_task_id="T-1"), limit=5)
    assert sorted(ids(ranked)) == ["elsewhere", "other"]


def test_a_lesson_that_never_helped_ranks_below_one_that_did(remember, index) -> None:
    remember(lesson("idle", "T-2", "Pin the numpy version in requirements."),
             lesson("helper", "T-3", "Pin the numpy release in requirements."))
    assert not index.has_uses()
    for number in range(1, 6):
        index.record_use(["idle"], task_id="T-8", attempt=number, passed=False)
    index.record_use(["helper"], task_id="T-9", attempt=1, passed=True)

    ranked = index.rank(LessonQuery("pin numpy requirements"), limit=2)
    assert ids(ranked) == ["helper", "idle"]
    assert (ranked[1].why["shown"], ranked[1].why["helped"]) == (5, 0)
    assert index.usefulness("idle") == (5, 0) and index.usefulness("helper") == (1, 1)
    assert index.usefulness("never-shown") == (0, 0)
    assert index.has_uses()


def test_a_lesson_shown_twice_to_one_attempt_counts_once(remember, index) -> None:
    remember(lesson("a", "T-2", "Quote the shell arguments."))
    index.record_use(["a", "a"], task_id="T-5", attempt=1, passed=True)
    assert index.usefulness("a") == (1, 1)


def test_rules_are_proven_by_the_projects_own_attempts(remember, pg_url: str) -> None:
    remember(lesson("rule", "T-2", "Shell quoting broke paths.", tacticalRule="Always quote shell arguments."))
    shop = PostgresLessonIndex(pg_url, project="team/shop")
    app = PostgresLessonIndex(pg_url, project=PROJECT)
    for number in range(3):
        shop.record_use(["rule"], task_id=f"S-{number}", attempt=1, passed=True)

    ((found, shown, helped),) = shop.proven(3)
    assert (found.id, found.rule, found.project, shown, helped) == ("rule", "Always quote shell arguments.",
                                                                      PROJECT, 3, 3)
    assert app.proven(1) == [] and not app.has_uses()
    assert app.usefulness("rule") == (3, 3)  # how useful a lesson is counts every project's showings
    shop.close()
    app.close()


def test_identical_texts_are_returned_once(remember, index) -> None:
    remember(lesson("a", "T-2", "Quote the shell arguments.", "Use shlex."),
             lesson("b", "T-3", "Quote the shell arguments.", "Use shlex."))
    assert len(index.search("shell arguments")) == 1


def test_archived_lessons_are_no_longer_shown(remember, index) -> None:
    store = remember(lesson("old", "T-2", "Cache keys collide."), lesson("kept", "T-3", "Cache expiry too short."))
    assert len(index.search("cache")) == 2
    store.archive(["old"])
    assert ids(index.search("cache")) == ["kept"]


def test_attempt_reflections_are_not_lessons(pg_url: str, index) -> None:
    from reflection.schema import Reflection

    with PostgresReflectionStore(pg_url, project=PROJECT) as store:
        store.append(Reflection(session_id="s", task_id="T-2", subtask_id="T-2.1", attempt_number=1,
                                category="root_cause", analysis="The parser drops the header row.",
                                suggestion="Skip the header.", confidence=0.6))
    assert index.search("parser header row") == []


def test_with_an_embedder_a_paraphrase_is_found_by_meaning(remember, pg_url: str, tmp_path: Path) -> None:
    from reflection.embeddings import litellm_embedder

    script = tmp_path / "embed.json"
    script.write_text(json.dumps({"concepts": [["slow", "sluggish", "latency"], ["request", "requests", "calls"],
                                               ["remote", "network", "http"]]}))
    embedder = litellm_embedder(f"scripted/{script}")
    remember(lesson("unrelated", "T-2", "Typo in README", "Fix spelling"),
             lesson("paraphrase", "T-3", "sluggish http requests", "cache remote calls"))
    with PostgresLessonIndex(pg_url, project=PROJECT, embedder=embedder) as index:
        ranked = index.rank(LessonQuery("slow network request latency"), limit=2)
        assert ids(ranked)[0] == "paraphrase" and ranked[0].why["text"] > 0.3

        remember(lesson("later", "T-4", "latency of network calls doubled"))  # embedded when next asked
        assert "later" in ids(index.rank(LessonQuery("slow remote requests"), limit=3))
