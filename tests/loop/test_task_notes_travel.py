"""Task notes (seed 000) as a team meets them: a reopened task that ran nothing new leaves
its notes alone; the notes reach a fresh clone; the store and the strategy are the
project's choice in project.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from projects import CALC, FIX_ADD, do_one_task, events_of, git, make_project, model_calls, task

from orchestrator.tasks import TaskBoard

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


def test_a_task_closed_again_with_no_new_attempt_keeps_its_notes_and_run_count(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": FIX_ADD},
               {"match": ASKS_REFLECTION, "reply": NOTES, "times": None}]
    repo = make_project(git_repo, replies, config=ON)
    assert do_one_task(repo) == 0
    first = notes(repo)[IDENTITY]
    assert first["runCount"] == 1

    # Open again with its subtask done and its tests passing, as a run killed after the
    # commit leaves it (`goldenloop reopen` would run its subtasks again): nothing to run.
    TaskBoard.for_project(repo).reopen("T-1")
    assert do_one_task(repo) == 0

    assert notes(repo)[IDENTITY] == first  # no new reflection, no runCount bump
    assert model_calls(repo, "task_reflect") == 1
    (skipped,) = events_of(repo, "task_reflection_skipped", "T-1")
    assert skipped["reason"] == "no attempt ran in this run"
    assert len(events_of(repo, "task_closed", "T-1")) == 2


def later_task_with_the_same_description(repo: Path) -> None:
    """The bug comes back, and T-2 says the same as T-1 under another id."""
    (repo / "calc.py").write_text(CALC)
    with (repo / ".openagents" / "tasks.jsonl").open("a") as backlog:
        backlog.write(json.dumps(task("T-2", "Fix add again")) + "\n")
    git(repo, "commit", "-qam", "the bug is back")


def clone(repo: Path, to: Path) -> Path:
    git(repo.parent, "clone", "-q", str(repo), str(to))
    for key, value in (("user.email", "ci@example.invalid"), ("user.name", "a fresh clone")):
        git(to, "config", key, value)
    return to


# Answers only a prompt that carries T-1's notes before T-2's description.
WITH_NOTES = {"match": r"# Task T-2[\s\S]*Task Improvement Notes[\s\S]*REFINED: make add", "reply": FIX_ADD}


def test_the_notes_are_committed_so_a_fresh_clone_starts_from_them(git_repo: Path, tmp_path: Path) -> None:
    replies = [{"match": "Task T-1", "reply": FIX_ADD}, WITH_NOTES,
               {"match": ASKS_REFLECTION, "reply": NOTES, "times": None}]
    repo = make_project(git_repo, replies, config=ON)
    assert do_one_task(repo) == 0
    later_task_with_the_same_description(repo)

    fresh = clone(repo, tmp_path / "ci-runner")
    assert notes(fresh)[IDENTITY]["refinedDescription"].startswith("REFINED")
    assert do_one_task(fresh, "--task", "T-2") == 0

    assert len(events_of(fresh, "attempt_started", "T-2")) == 1  # the prompt carried the notes
    assert notes(fresh)[IDENTITY]["runCount"] == 2
    assert git(fresh, "status", "--porcelain") == ""


def test_a_project_from_before_gets_its_notes_out_of_gitignore_and_committed(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": FIX_ADD}, {"match": ASKS_REFLECTION, "reply": NOTES}]
    repo = make_project(git_repo, replies, config=ON,
                        files={".openagents/.gitignore": "*.lock\nruns/\nmemory/task-reflections.json*\n"})

    assert do_one_task(repo) == 0

    ignored = (repo / ".openagents" / ".gitignore").read_text()
    assert "memory/task-reflections.json*" not in ignored and "memory/.task-reflections.json.*.tmp" in ignored
    assert ".openagents/memory/task-reflections.json" in git(repo, "ls-files", ".openagents").split()


def test_two_workers_notes_merge_by_identity_and_the_later_wins() -> None:
    from orchestrator.fleet.bookkeeping import merge_file

    def body(entries: dict[str, tuple[str, str]]) -> bytes:
        return json.dumps({k: {"refinedDescription": d, "reflectedAt": at, "runCount": 1}
                           for k, (d, at) in entries.items()}).encode()

    base = body({"a": ("old a", "2026-11-01T00:00:00Z")})
    ours = body({"a": ("ours a", "2026-11-03T00:00:00Z"), "b": ("ours b", "2026-11-03T00:00:00Z")})
    theirs = body({"a": ("tip a", "2026-11-02T00:00:00Z"), "c": ("tip c", "2026-11-02T00:00:00Z")})

    merged = json.loads(merge_file(".openagents/memory/task-reflections.json", base, ours, theirs) or b"")

    assert {k: v["refinedDescription"] for k, v in merged.items()} == {"a": "ours a", "b": "ours b", "c": "tip c"}
