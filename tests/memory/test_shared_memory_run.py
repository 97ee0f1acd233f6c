"""A team's memory end to end: `do-one-task` on a project whose memory.store names a
PostgreSQL database through an environment variable. The reflections land in the
database, not in the clone's files, and another clone (another machine) is shown the
first clone's lesson in its prompt."""

from __future__ import annotations

from pathlib import Path

import pytest
from projects import WRONG_ADD, do_one_task, events_of, git, make_project, task

from reflection.postgres.lessons import PostgresLessonIndex
from reflection.postgres.store import PostgresReflectionStore

pytestmark = pytest.mark.postgres

FIX_ABS = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
KEEP_SUM = "calc.py\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a + b  # the sum\n>>>>>>> REPLACE\n"
BREAK_SUM = "calc.py\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a - b\n>>>>>>> REPLACE\n"
REFLECTIONS = Path(".openagents") / "memory" / "reflections.jsonl"


def test_a_lesson_learned_on_one_machine_reaches_the_next_through_postgresql(
    git_repo: Path, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_MEMORY_URL", pg_url)
    replies = [  # T-2 passes at once only when its first prompt carries T-1's lesson
        {"match": "Task T-1:", "reply": WRONG_ADD},
        {"match": "Task T-1:", "reply": FIX_ABS},
        {"match": r"Task T-2:.*Lessons from earlier tasks.*task T-1", "reply": KEEP_SUM},
        {"match": "Task T-2:", "reply": BREAK_SUM},
    ]
    tasks = [task("T-1", "Fix add in calc.py"),
             task("T-2", "Document add in calc.py", description="Comment the sum in calc.py's add.", priority=2,
                  type="chore")]
    config = {"projectId": "calc", "reflexion": {"useLLM": False}, "retry": {"preflight": False},
              "memory": {"store": "env:TEAM_MEMORY_URL"}}
    first = make_project(git_repo, replies, tasks=tasks, config=config)
    assert do_one_task(first, "--task", "T-1") == 0

    second = tmp_path / "second-machine"
    git(tmp_path, "clone", "-q", str(first), str(second))
    for key, value in (("user.email", "dev@example.invalid"), ("user.name", "second machine")):
        git(second, "config", key, value)
    assert do_one_task(second, "--task", "T-2") == 0

    (shown,) = events_of(second, "lessons_injected", "T-2")
    assert shown["lessons"][0]["fromTask"] == "T-1"
    assert len(events_of(second, "attempt_started", "T-2")) == 1  # the lesson's reply passed at once
    assert not (first / REFLECTIONS).exists() and not (second / REFLECTIONS).exists()
    with PostgresReflectionStore(pg_url, project="calc") as store:
        (success,) = store.outcomes()
        assert success.task_id == "T-1" and success.outcome == "success"
        assert [r.task_id for r in store.iterate()] == ["T-1"]  # the failed attempt's reflection
    with PostgresLessonIndex(pg_url, project="calc") as index:
        assert index.usefulness(success.id) == (1, 1)
