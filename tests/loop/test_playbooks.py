"""Record & Replay (seed 001): a success procedure's steps offered to a later similar task
as a playbook, and used."""

from __future__ import annotations

from pathlib import Path

import orjson
from projects import WRONG_ADD, do_one_task, events_of, make_project, outcome_lines, task

from reflection.lessons import Lesson, LessonQuery, score_lesson
from reflection.playbook import PLAYBOOK_HEADING, choose_playbook, playbook_block

MEMORY = Path(".openagents") / "memory"
FIX_ABS = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
KEEP_SUM = "calc.py\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a + b  # the sum\n>>>>>>> REPLACE\n"
BREAK_SUM = "calc.py\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a - b\n>>>>>>> REPLACE\n"
FIX_BROKEN = "calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b  # the sum\n>>>>>>> REPLACE\n"
# Answers only a prompt that carries T-1's playbook, its steps numbered.
WITH_PLAYBOOK = rf"Task T-2:.*{PLAYBOOK_HEADING}.*Task T-1, a similar one.*\n> 1\. Read the failure of attempt 1"


def two_tasks(git_repo: Path, t2_replies: list[dict]) -> Path:
    replies = [{"match": "Task T-1:", "reply": WRONG_ADD}, {"match": "Task T-1:", "reply": FIX_ABS}, *t2_replies]
    tasks = [task("T-1", "Fix add in calc.py"),
             task("T-2", "Document add in calc.py", description="Comment the sum in calc.py's add.", priority=2,
                  type="chore")]
    return make_project(git_repo, replies, tasks=tasks,
                        config={"reflexion": {"useLLM": False}, "retry": {"preflight": False}})


def test_a_later_similar_task_is_offered_the_steps_that_worked_and_replays_them(git_repo: Path, capsys) -> None:
    repo = two_tasks(git_repo, [{"match": WITH_PLAYBOOK, "reply": KEEP_SUM},
                                {"match": "Task T-2:", "reply": BREAK_SUM, "times": None}])
    assert do_one_task(repo) == 0
    (procedure,) = outcome_lines(repo)
    assert procedure["outcome"] == "success" and len(procedure["procedure"]) >= 3

    assert do_one_task(repo) == 0

    assert "playbook of T-1 in the first prompt:" in capsys.readouterr().out
    (offered,) = events_of(repo, "playbook_offered", "T-2")
    assert offered["id"] == procedure["id"] and offered["fromTask"] == "T-1"
    assert offered["steps"] == len(procedure["procedure"])
    assert len(events_of(repo, "attempt_started", "T-2")) == 1  # the playbook's reply passed at once
    (replayed,) = events_of(repo, "playbook_replayed", "T-2")
    assert replayed["id"] == procedure["id"] and replayed["passed"] is True
    uses = [orjson.loads(line) for line in (repo / MEMORY / "lesson-uses.jsonl").read_bytes().splitlines()]
    assert {"lessonId": procedure["id"], "taskId": "T-2", "passed": True}.items() <= uses[0].items()


def test_the_outcome_of_a_task_that_replayed_a_playbook_names_it(git_repo: Path) -> None:
    repo = two_tasks(git_repo, [{"match": WITH_PLAYBOOK, "reply": BREAK_SUM},
                                {"match": "Task T-2:", "reply": FIX_BROKEN}])
    assert do_one_task(repo) == 0
    assert do_one_task(repo) == 0

    first, second = outcome_lines(repo)
    assert second["taskId"] == "T-2" and second["replayedFrom"] == first["id"]
    (replayed,) = events_of(repo, "playbook_replayed", "T-2")
    assert replayed["passed"] is False  # it did not help this time: its usefulness says so


def success(lesson_id: str, **fields: object) -> Lesson:
    record = {"id": lesson_id, "kind": "outcome", "outcome": "success", "sessionId": "s", "taskId": "T-1",
              "agent": "coder", "title": "Parse ISO dates", "createdAt": "2026-11-01T00:00:00Z", "labels": [],
              "files": [], "strategy": "Parse with fromisoformat.", "whyItWorked": "It keeps the timezone.",
              "procedure": ["Read the failing test.", "Use datetime.fromisoformat.", "Run the tests."], **fields}
    lesson = Lesson.from_record(record)
    assert lesson is not None
    return lesson


def test_only_a_similar_task_gets_a_playbook_not_one_worded_alike() -> None:
    query = LessonQuery("Parse ISO dates in the export with their timezone", task_type="bug")
    worded_alike = score_lesson(success("words"), query, 1.0)
    same_type = score_lesson(success("type", taskType="bug"), query, 1.0)
    no_steps = score_lesson(success("bare", taskType="bug", procedure=[]), query, 1.0)
    assert worded_alike and same_type and no_steps
    assert choose_playbook([worded_alike]) is None
    assert choose_playbook([no_steps, worded_alike, same_type]) is same_type
    block = playbook_block(same_type.lesson)
    assert block.splitlines()[0] == PLAYBOOK_HEADING and block.splitlines()[-1] == "> 3. Run the tests."
