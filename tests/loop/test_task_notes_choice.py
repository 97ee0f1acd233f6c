"""Where task notes live and how they are made, chosen in project.json (seed 000's
ReflectionStore and ReflectionStrategy SPI): the built-ins, the project's own classes,
and a team's PostgreSQL database, from which a fresh clone reads them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from projects import CALC, FIX_ADD, do_one_task, events_of, git, make_project, model_calls, task

DESCRIPTION = task()["description"]
IDENTITY = hashlib.sha256(DESCRIPTION.encode()).hexdigest()
NOTES = json.dumps({"refinedDescription": "REFINED: make add() return a + b.",
                    "observations": ["the bug was a sign error."]})
NOTES_FILE = Path(".openagents") / "memory" / "task-reflections.json"
ASKS_REFLECTION = "refinedDescription"

OWN = '''from reflection import InMemoryTaskReflectionStore, TaskReflection

KEPT = InMemoryTaskReflectionStore()


def keeper():
    return KEPT


class Notes:
    def __init__(self, model):
        self.model = model

    async def reflect(self, given):
        return TaskReflection(refined_description="OWN: " + given.description,
                              observations=["written by the project's own strategy"])
'''


def memory(**choice: object) -> dict:
    return {"memory": {"taskReflection": True, **choice}}


def test_the_projects_own_store_and_strategy_are_named_in_project_json(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "own_notes_a.py").write_text(OWN)
    monkeypatch.syspath_prepend(str(tmp_path))
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}],
                        config=memory(taskReflectionStore="own_notes_a:keeper",
                                      taskReflectionStrategy="own_notes_a:Notes"))

    assert do_one_task(repo) == 0

    import own_notes_a  # the module the run imported

    kept = own_notes_a.KEPT.retrieve(IDENTITY)
    assert kept is not None and kept.refined_description == "OWN: " + DESCRIPTION and kept.run_count == 1
    assert model_calls(repo, "task_reflect") == 0  # the strategy asked no model
    assert not (repo / NOTES_FILE).exists()
    assert events_of(repo, "task_reflected", "T-1")[0]["isFirstReflection"] is True


def test_notes_kept_in_memory_leave_no_file(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": FIX_ADD}, {"match": ASKS_REFLECTION, "reply": NOTES}]
    repo = make_project(git_repo, replies, config=memory(taskReflectionStore="memory"))

    assert do_one_task(repo) == 0

    assert events_of(repo, "task_reflected", "T-1")
    assert not (repo / NOTES_FILE).exists()


@pytest.mark.parametrize(("choice", "said"), [
    ({"taskReflectionStrategy": "no_such_module_xyz:Thing"}, "cannot import no_such_module_xyz"),
    ({"taskReflectionStore": "json:dumps"}, "'json:dumps' could not be made"),
    ({"taskReflectionStore": "sqlite"}, 'must be "file" or "memory"'),
])
def test_a_store_or_strategy_that_cannot_be_used_is_one_sentence_and_exit_2(
    git_repo: Path, capsys: pytest.CaptureFixture[str], choice: dict, said: str
) -> None:
    repo = make_project(git_repo, [], config=memory(**choice))

    assert do_one_task(repo) == 2

    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


@pytest.mark.parametrize(("choice", "key", "other"), [
    ({"taskReflectionStore": "nosuch.mod:Store"}, "(memory.taskReflectionStore)", "taskReflectionStrategy"),
    ({"taskReflectionStrategy": "nosuch.mod:Notes"}, "(memory.taskReflectionStrategy)", "taskReflectionStore"),
])
def test_without_a_model_the_names_are_checked_all_the_same_and_the_wrong_key_named(
    git_repo: Path, capsys: pytest.CaptureFixture[str], choice: dict, key: str, other: str
) -> None:
    config = {**memory(**choice), "reflexion": {"useLLM": False}}
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}], config=config)

    assert do_one_task(repo) == 2

    err = capsys.readouterr().err
    assert "cannot import nosuch.mod" in err and key in err and other not in err
    assert "Traceback" not in err


def test_task_reflection_that_cannot_run_says_why_once(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {**memory(), "reflexion": {"useLLM": False}}
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}], config=config)

    assert do_one_task(repo) == 0

    out = capsys.readouterr()
    said = (out.out + out.err).count("memory.taskReflection is on but no task notes will be written")
    assert said == 1
    assert not events_of(repo, "task_reflected", "T-1")


@pytest.mark.postgres
def test_with_a_shared_memory_the_notes_live_in_the_database_and_reach_a_fresh_clone(
    git_repo: Path, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_MEMORY_URL", pg_url)
    replies = [
        {"match": "# Task T-1", "reply": FIX_ADD},
        # Answers only a prompt that carries T-1's notes before T-2's description.
        {"match": r"# Task T-2[\s\S]*Task Improvement Notes[\s\S]*REFINED: make add", "reply": FIX_ADD},
        {"match": ASKS_REFLECTION, "reply": NOTES, "times": None},
    ]
    config = {"projectId": "calc", "retry": {"preflight": False}, **memory(store="env:TEAM_MEMORY_URL")}
    first = make_project(git_repo, replies, config=config)
    assert do_one_task(first) == 0
    (first / "calc.py").write_text(CALC)  # the bug is back, and T-2 says the same as T-1
    with (first / ".openagents" / "tasks.jsonl").open("a") as backlog:
        backlog.write(json.dumps(task("T-2", "Fix add again")) + "\n")
    git(first, "commit", "-qam", "the bug is back")

    second = tmp_path / "fleet-worker"
    git(tmp_path, "clone", "-q", str(first), str(second))
    for key, value in (("user.email", "worker@example.invalid"), ("user.name", "a fleet worker")):
        git(second, "config", key, value)
    assert not (second / NOTES_FILE).exists()  # not in git: in the database
    assert do_one_task(second, "--task", "T-2") == 0

    assert len(events_of(second, "attempt_started", "T-2")) == 1  # the prompt carried the notes
    from reflection.postgres.task_notes import PostgresTaskReflectionStore

    store = PostgresTaskReflectionStore(pg_url, project="calc")
    try:
        kept = store.retrieve(IDENTITY)
    finally:
        store.close()
    assert kept is not None and kept.run_count == 2 and kept.refined_description.startswith("REFINED")
    assert not (first / NOTES_FILE).exists() and not (second / NOTES_FILE).exists()
