"""Task notes (seed 000) as a team meets them: a reopened task that ran nothing new leaves
its notes alone; the notes reach a fresh clone; the store and the strategy are the
project's choice in project.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from projects import FIX_ADD, do_one_task, events_of, git, goldenloop, make_project, model_calls, task

DESCRIPTION = task()["description"]
IDENTITY = hashlib.sha256(DESCRIPTION.encode()).hexdigest()
ON = {"memory": {"taskReflection": True}}
NOTES = json.dumps({"refinedDescription": "REFINED: make add() return a + b.",
                    "refinedExpectedOutput": "every test in test_calc.py passes.",
                    "observations": ["the bug was a sign error."], "suggestions": ["Read the assertion first."]})
ASKS_REFLECTION = "refinedDescription"  # only the task reflection question asks for this key


def notes(repo: Path) -> dict:
    path = repo / ".openagents" / "memory" / "task-reflections.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_a_reopened_task_that_ran_no_new_attempt_keeps_its_notes_and_run_count(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": FIX_ADD},
               {"match": ASKS_REFLECTION, "reply": NOTES, "times": None}]
    repo = make_project(git_repo, replies, config=ON)
    assert do_one_task(repo) == 0
    first = notes(repo)[IDENTITY]
    assert first["runCount"] == 1

    assert goldenloop(repo, "reopen", "T-1") == 0  # its subtask stays done: nothing to run again
    assert do_one_task(repo) == 0

    assert notes(repo)[IDENTITY] == first  # no new reflection, no runCount bump
    assert model_calls(repo, "task_reflect") == 1
    (skipped,) = events_of(repo, "task_reflection_skipped", "T-1")
    assert skipped["reason"] == "no attempt ran in this run"
    assert len(events_of(repo, "task_closed", "T-1")) == 2
