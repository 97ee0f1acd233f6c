"""A reflection made through the API feeds the memory the golden loop reads: its lesson
lands in the project's reflections.jsonl, and the next task's first prompt carries it."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import orjson
import pytest
from apikit import REFLECT, Serve, history_file, reflect_body
from projects import FIX_ADD, WRONG_ADD, do_one_task, events_of, goldenloop, init_repo, make_project, task

MEMORY = Path(".openagents") / "memory"
SWALLOWED = "def add(a, b):\n    try:\n        return a - b\n    except:\n        pass\n"
STUCK = [
    {"role": "user", "content": "Fix add in calc.py"},
    {"role": "assistant", "content": f"I changed calc.py:\n\ncalc.py\n```python\n{SWALLOWED}```"},
    {"role": "tool", "name": "Bash", "content": "FAILED test_calc.py::test_add - assert -1 == 5\n1 failed, 2 passed"},
    {"role": "assistant", "content": "I could not fix add yet."},
]
CLEAN = [
    {"role": "user", "content": "Fix add in calc.py"},
    {"role": "assistant", "content": "I changed calc.py:\n\ncalc.py\n```python\ndef add(a, b):\n    return a + b\n```"},
    {"role": "tool", "name": "Bash", "content": "pytest -q\n3 passed in 0.01s"},
    {"role": "assistant", "content": "Done: all tests pass."},
]


def _reflect(serve: Serve, project: Path, talk: list[dict[str, str]], task: str = "Fix add in calc.py",
             **settings: object) -> dict:
    async def post() -> dict:
        async with serve(**settings) as client:
            body = reflect_body(project, "session-9", conversation=talk, taskDescription=task)
            response = await client.post(REFLECT, json=body)
            assert response.status_code == 200, response.text
            return response.json()

    return anyio.run(post)


def _records(project: Path) -> list[dict]:
    path = project / MEMORY / "reflections.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []


def test_the_next_task_is_shown_what_an_api_reflection_taught(
        serve: Serve, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The scripted model stands for one that reads its lessons: it fixes add only when shown this one.
    replies = [{"match": r"Task T-1:.*Lessons from earlier tasks.*reflect:session-9", "reply": FIX_ADD},
               {"match": "Task T-1:", "reply": WRONG_ADD, "times": None}]
    repo = make_project(init_repo(root / "calc"), replies, tasks=[task("T-1", "Fix add in calc.py")],
                        config={"reflexion": {"useLLM": False, "maxRetries": 0}, "retry": {"preflight": False}})
    answer = _reflect(serve, repo, STUCK)

    (lesson,) = _records(repo)
    assert answer["memory"] == {"lessonId": lesson["id"], "reason": "kept as a partial lesson in the project's memory"}
    assert (lesson["kind"], lesson["outcome"], lesson["taskId"], lesson["agent"]) == (
        "outcome", "partial", "reflect:session-9", "reflect-api")
    assert lesson["files"] == ["calc.py"] and lesson["title"] == "Fix add in calc.py"
    assert "Add more comprehensive error handling" in lesson["whatToDoDifferently"]
    assert "drops errors without a word" in lesson["whatWentWrong"]
    capsys.readouterr()
    assert goldenloop(repo, "memory", "list", "--agent", "reflect-api", "--json") == 0
    assert lesson["id"] in capsys.readouterr().out  # listed like any task's lesson

    assert do_one_task(repo) == 0
    (shown,) = events_of(repo, "lessons_injected", "T-1")
    assert [item["id"] for item in shown["lessons"]] == [lesson["id"]]
    assert len(events_of(repo, "attempt_started", "T-1")) == 1  # the prompt with the lesson passed at once


def test_a_clean_pass_teaches_nothing_and_the_switch_turns_the_feed_off(serve: Serve, project: Path) -> None:
    clean = _reflect(serve, project, CLEAN)
    assert clean["result"]["satisfactory"] is True
    assert clean["memory"]["lessonId"] is None and clean["memory"]["reason"].startswith("nothing to learn")
    from orchestrator.api.settings import ReflectConfig

    off = _reflect(serve, project, STUCK, reflect=ReflectConfig(to_memory=False))
    assert off["memory"] is None
    assert _records(project) == []


@pytest.mark.parametrize("name", ["reflections.jsonl", "reflections.jsonl.lock"])
def test_a_linked_memory_file_is_never_written_through(serve: Serve, project: Path, tmp_path: Path,
                                                       name: str) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("")
    (project / MEMORY).mkdir(parents=True)
    os.symlink(elsewhere, project / MEMORY / name)
    answer = _reflect(serve, project, STUCK)
    assert answer["memory"] == {"lessonId": None, "reason": f"the project's .openagents/memory/{name} is a symbolic "
                                                            "link; this server follows no link inside .openagents/memory"}
    assert elsewhere.read_text() == "" and answer["result"]["sessionId"] == "session-9"
    assert len(history_file(project).read_bytes().splitlines()) == 1  # the reflection itself is kept


def test_a_folder_for_the_memory_file_costs_the_lesson_only(serve: Serve, project: Path) -> None:
    (project / MEMORY / "reflections.jsonl").mkdir(parents=True)
    answer = _reflect(serve, project, STUCK)
    assert answer["memory"]["lessonId"] is None and answer["memory"]["reason"] == (
        "the project's .openagents/memory/reflections.jsonl is a folder, not a regular file; "
        "this server uses only regular files there")


def test_a_project_json_edited_while_the_server_runs_is_read_again(serve: Serve, root: Path) -> None:
    repo = init_repo(root / "calc")

    async def twice() -> list[dict]:
        answers = []
        async with serve() as client:
            for n in (1, 2):
                body = reflect_body(repo, f"session-{n}", conversation=STUCK, taskDescription="Fix add in calc.py")
                answers.append((await client.post(REFLECT, json=body)).json())
                (repo / ".openagents" / "project.json").write_text('{"reflexion": {"maxRetries": "many"}}')
        return answers

    kept, refused = anyio.run(twice)
    assert kept["memory"]["reason"] == "kept as a partial lesson in the project's memory"
    assert refused["memory"] == {"lessonId": None, "reason": "the project's .openagents/project.json cannot be used, "
                                                             "so its memory was left alone"}
    assert len(_records(repo)) == 1


def test_personal_data_of_a_conversation_reaches_neither_the_history_nor_the_lesson(
        serve: Serve, project: Path) -> None:
    (project / ".openagents").mkdir(parents=True, exist_ok=True)
    (project / ".openagents" / "project.json").write_bytes(orjson.dumps(
        {"redaction": {"ownDomains": ["acme-corp.com"], "keepNames": ["Build Bot"]}}))
    told = ("Confirmed with Jane Doe; the order paid with 4539899720743225 from DE62370400440532013001 "
            "failed on vault.acme-corp.com. Thanks Build Bot.")
    talk = [*STUCK[:-1], {"role": "assistant", "content": f"I could not fix add yet. {told}"}]

    answer = _reflect(serve, project, talk, task=f"Fix add in calc.py. {told}")

    (lesson,) = _records(project)
    stored = history_file(project).read_text() + orjson.dumps(lesson).decode() + orjson.dumps(answer).decode()
    for value in ("Jane Doe", "4539899720743225", "DE62370400440532013001", "vault.acme-corp.com"):
        assert value not in stored, value
    assert "[REDACTED:internal_host]" in stored and "Thanks Build Bot" in stored


RETRIES_ADDED = [
    {"role": "user", "content": "Make fetch retry on network errors"},
    {"role": "assistant", "content": "I changed net.py:\n\nnet.py\n```python\ndef fetch(url, tries=3):\n"
                                     "    for n in range(tries):\n        try:\n            return get(url)\n"
                                     "        except ConnectionError as exc:\n            last = exc\n"
                                     "    raise RuntimeError(f'gave up on {url}') from last\n```"},
    {"role": "tool", "name": "Bash", "content": "pytest -q\n4 passed in 0.02s"},
    {"role": "assistant", "content": "Done: fetch now retries on ConnectionError and raises RuntimeError after "
                                     "three tries; all tests pass."},
]
EXIT_LEFT = [*RETRIES_ADDED[:2], {"role": "tool", "name": "Bash", "content": "make lint\nexited with code 2"},
             {"role": "assistant", "content": "fetch now retries on ConnectionError."}]
TRACEBACK_LEFT = [*RETRIES_ADDED[:2],
                  {"role": "tool", "name": "Bash", "content": "Traceback (most recent call last):\n  File \"net.py\", "
                                                               "line 3\nConnectionError: refused"},
                  {"role": "assistant", "content": "fetch now retries on ConnectionError."}]
BARE = [{"role": "user", "content": "Implement feature X"}, {"role": "assistant", "content": "Done!"}]


def test_an_exception_named_in_the_last_turn_is_not_an_error_left_standing(serve: Serve, project: Path) -> None:
    answer = _reflect(serve, project, RETRIES_ADDED)

    result = answer["result"]
    assert result["satisfactory"] is True and result["successScore"] >= 0.8 and result["confidence"] == 1.0
    assert "An error was left unresolved at the end" not in result["insights"]
    assert [r["outcome"] for r in _records(project)] == []  # no "partial" lesson for a success


@pytest.mark.parametrize(("talk", "said"), [(EXIT_LEFT, "non-zero exit"), (TRACEBACK_LEFT, "traceback")])
def test_a_failed_tool_result_left_standing_is_an_error_and_a_partial_lesson(
        serve: Serve, project: Path, talk: list[dict[str, str]], said: str) -> None:
    result = _reflect(serve, project, talk)["result"]

    assert result["satisfactory"] is False and "An error was left unresolved at the end" in result["insights"]
    assert any(said in insight for insight in result["insights"])
    assert [r["outcome"] for r in _records(project)] == ["partial"]


def test_a_bare_claim_of_done_is_low_confidence_never_satisfactory_and_no_lesson(
        serve: Serve, project: Path) -> None:
    answer = _reflect(serve, project, BARE, task="Implement feature X")

    result = answer["result"]
    assert result["confidence"] < 0.5 and result["satisfactory"] is False
    assert [c["name"] for c in result["criterionScores"] if c["score"] is None] == [
        "code_quality", "error_handling", "test_coverage"]
    assert answer["memory"] == {"lessonId": None, "reason": "nothing to learn: most criteria could not be judged, "
                                                           "so the score is not trusted"}
    assert _records(project) == []
