"""Memory across tasks, end to end: what a task leaves when it ends, and what the next
task's first prompt carries (seed 001)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import orjson
from projects import FIX_ADD, WRONG_ADD, do_one_task, events_of, git, make_project, outcome_lines, task

MEMORY = Path(".openagents") / "memory"

# After T-1's fix, the file holds `return a + b`; T-2 may keep it (a comment) or break it.
KEEP_SUM = "calc.py\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a + b  # the sum\n>>>>>>> REPLACE\n"
BREAK_SUM = "calc.py\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a - b\n>>>>>>> REPLACE\n"
FIX_ABS = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
ZERO_ABS = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return 0\n>>>>>>> REPLACE\n"
FIX_BROKEN = "calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b  # the sum\n>>>>>>> REPLACE\n"


def two_tasks(repo: Path, **memory: object) -> Path:
    """T-1 fails once, then passes; T-2, about the same file, passes at once only when its
    first prompt carries T-1's lesson (the scripted model stands for one that reads it)."""
    replies = [
        {"match": "Task T-1:", "reply": WRONG_ADD},
        {"match": "Task T-1:", "reply": FIX_ABS},
        {"match": r"Task T-2:.*Lessons from earlier tasks.*task T-1", "reply": KEEP_SUM},
        {"match": "Task T-2:", "reply": BREAK_SUM},
        {"match": "Task T-2:", "reply": FIX_BROKEN},
    ]
    tasks = [task("T-1", "Fix add in calc.py"),
             task("T-2", "Document add in calc.py", description="Comment the sum in calc.py's add.",
                  priority=2, type="chore")]
    config = {"reflexion": {"useLLM": False}, "retry": {"preflight": False}, "memory": memory}
    return make_project(repo, replies, tasks=tasks, config=config)


def test_a_fail_then_pass_leaves_a_procedure_and_the_next_task_is_shown_it(git_repo: Path) -> None:
    repo = two_tasks(git_repo)
    assert do_one_task(repo) == 0

    (success,) = outcome_lines(repo)
    assert success["outcome"] == "success" and success["taskId"] == "T-1"
    assert success["procedure"] and "calc.py" in success["files"]
    assert "the change: - return a - b / + return a + b" in success["strategy"]  # what finally worked
    page = repo / events_of(repo, "outcome_reflected")[0]["page"]
    assert page.read_text().startswith("# Procedure: ") and "## Strategy" in page.read_text()

    assert do_one_task(repo) == 0
    (shown,) = events_of(repo, "lessons_injected", "T-2")
    assert [lesson["id"] for lesson in shown["lessons"]] == [success["id"]]
    assert shown["lessons"][0]["why"]["files"] > 0  # found by the file both tasks name
    assert len(events_of(repo, "attempt_started", "T-2")) == 1  # the lesson's reply passed at once
    uses = [orjson.loads(line) for line in (repo / MEMORY / "lesson-uses.jsonl").read_bytes().splitlines()]
    assert uses == [{**uses[0], "lessonId": success["id"], "taskId": "T-2", "passed": True}]


def test_with_the_switch_off_the_next_task_starts_from_nothing(git_repo: Path) -> None:
    repo = two_tasks(git_repo, crossTaskLessons=False)
    assert do_one_task(repo) == 0
    assert do_one_task(repo) == 0
    assert events_of(repo, "lessons_injected") == []
    assert len(events_of(repo, "attempt_started", "T-2")) == 2  # the pitfall again, then the fix


def test_an_escalated_task_leaves_a_failed_reflection_of_its_last_attempt(git_repo: Path) -> None:
    replies = [{"match": "Task T-1:", "reply": WRONG_ADD}, {"match": "Task T-1:", "reply": ZERO_ABS}]
    repo = make_project(git_repo, replies, config={"reflexion": {"maxRetries": 1, "useLLM": False},
                                                   "retry": {"preflight": False, "reaskRepeats": False}})
    assert do_one_task(repo) == 1

    rollback, failed = outcome_lines(repo)  # the worse attempt 2 was rolled back: a decision
    assert rollback["outcome"] == "decision" and "rolled back to the tree of attempt 1" in rollback["decision"].lower()
    assert failed["outcome"] == "failed"
    assert "test_add" in failed["whatWentWrong"] and "2 ==" not in failed["whatWentWrong"]  # the last attempt
    assert all(failed[key] for key in ("whatHappened", "whyItWentWrong", "whatToDoDifferently", "tacticalRule"))
    assert "# Reflection: " in (repo / events_of(repo, "outcome_reflected")[-1]["page"]).read_text()


def test_every_prompt_carries_the_project_rules(git_repo: Path) -> None:
    replies = [{"match": r"Task T-1:.*Project rules.*Never use abs\(\) in add", "reply": FIX_ADD},
               {"match": "Task T-1:", "reply": WRONG_ADD, "times": None}]
    repo = make_project(git_repo, replies, config={"reflexion": {"useLLM": False}})
    rules = repo / MEMORY / "rules.md"
    rules.parent.mkdir(parents=True, exist_ok=True)
    rules.write_text("# Rules\n\n- Never use abs() in add.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a rule")
    assert do_one_task(repo) == 0
    assert len(events_of(repo, "attempt_started")) == 1


def test_a_rule_that_kept_helping_is_promoted_and_copied_to_agents_md_in_its_own_commit(git_repo: Path) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": FIX_ADD}],
                       config={"reflexion": {"useLLM": False}, "memory": {"promoteRulesTo": "AGENTS.md"}})
    memory = repo / MEMORY
    memory.mkdir(parents=True, exist_ok=True)
    lesson = {"id": "L-1", "kind": "outcome", "outcome": "failed", "sessionId": "old", "taskId": "OLD-1",
              "agent": "coder", "title": "an old task", "createdAt": "2026-11-01T00:00:00Z", "files": [],
              "labels": [], "whatToDoDifferently": "Return the plain sum.",
              "tacticalRule": "Never wrap operands of add in abs().", "source": "heuristic"}
    (memory / "reflections.jsonl").write_bytes(orjson.dumps(lesson) + b"\n")
    uses = [{"lessonId": "L-1", "taskId": f"OLD-{n}", "attempt": 1, "passed": True, "at": "2026-11-02T00:00:00Z"}
            for n in range(2, 5)]
    (memory / "lesson-uses.jsonl").write_text("".join(json.dumps(use) + "\n" for use in uses))

    assert do_one_task(repo) == 0

    assert "Never wrap operands of add in abs()." in (memory / "rules.md").read_text()
    assert "Never wrap operands of add in abs()." in (repo / "AGENTS.md").read_text()
    subjects = git(repo, "log", "--format=%s").splitlines()
    assert any(s.startswith("goldenloop:") and "rule" in s for s in subjects)
    copied = next(line.split()[0] for line in git(repo, "log", "--format=%h %s").splitlines() if "rule" in line)
    assert git(repo, "show", "--name-only", "--format=", copied).split() == ["AGENTS.md"]


def test_retention_archives_the_31st_task_reflection_of_an_agent(git_repo: Path) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": FIX_ADD}], config={"reflexion": {"useLLM": False}})
    memory = repo / MEMORY
    memory.mkdir(parents=True, exist_ok=True)
    records = [{"id": f"R-{n}", "kind": "outcome", "outcome": "failed", "sessionId": "old", "taskId": f"OLD-{n}",
                "agent": "coder", "title": f"old task {n}", "createdAt": f"2026-10-{n % 28 + 1:02d}T00:00:{n:02d}Z",
                "files": [], "labels": [], "whatToDoDifferently": "Something.", "source": "heuristic"}
               for n in range(31)]
    (memory / "reflections.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))

    assert do_one_task(repo) == 0

    live = {line["id"] for line in outcome_lines(repo) if line["agent"] == "coder"}
    archived = [orjson.loads(line)["id"] for f in (memory / "archive").glob("reflections-*.jsonl")
                for line in f.read_bytes().splitlines()]
    assert len(live) == 30 and len(archived) == 1 and archived[0] not in live
    oldest = min(records, key=lambda r: r["createdAt"])
    assert archived == [oldest["id"]]


def test_a_pass_over_a_failure_the_user_waived_is_a_plain_pass(git_repo: Path) -> None:
    other = "def other():\n    return 0\n"
    other_tests = "from other import other\n\n\ndef test_other():\n    assert other() == 1\n"
    repo = make_project(
        git_repo, [{"match": "Task T-1", "reply": FIX_ADD}],
        tasks=[task("T-1", "Fix add", description="add() in calc.py returns a - b; make test_add pass.")],
        files={"other.py": other, "test_other.py": other_tests},
        config={"testCommands": [f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py test_other.py"],
                "reflexion": {"useLLM": False}, "checks": {"knownFailures": ["test_other.py::test_other"]}},
    )
    assert do_one_task(repo) == 0  # test_other failed before the task, and the user waived it

    # The user's waiver makes it a plain pass at the first attempt: nothing to learn, no lesson.
    assert outcome_lines(repo) == []


def test_with_an_embedding_model_a_lesson_is_found_by_meaning(git_repo: Path) -> None:
    # T-2 shares no word with T-1's lesson but "total", which the embedding model (the
    # scripted one, told that "sum" and "total" mean the same) ranks as the same idea.
    repo = two_tasks(git_repo, embeddingModel="scripted/.openagents/script.json")
    script = repo / ".openagents" / "script.json"
    body = json.loads(script.read_text())
    body["concepts"] = [["sum", "total", "addition"]]
    body["replies"][2]["match"] = r"Task T-2:.*Lessons from earlier tasks"
    script.write_text(json.dumps(body))
    tasks = repo / ".openagents" / "tasks.jsonl"
    tasks.write_text(tasks.read_text().replace("Comment the sum in calc.py's add.", "Describe the total it returns."))
    git(repo, "commit", "-qam", "T-2 says it in other words")
    assert do_one_task(repo) == 0
    assert do_one_task(repo) == 0
    (shown,) = events_of(repo, "lessons_injected", "T-2")
    assert shown["lessons"][0]["fromTask"] == "T-1" and shown["lessons"][0]["why"]["text"] > 0
    with sqlite3.connect(repo / MEMORY / "lessons.sqlite") as db:  # the vector kept beside the lesson
        assert db.execute("SELECT count(*) FROM lessons WHERE vector IS NOT NULL").fetchone() == (1,)


def test_the_console_says_what_was_learned_and_what_was_shown(git_repo: Path, capsys) -> None:
    repo = two_tasks(git_repo)
    assert do_one_task(repo) == 0
    assert "success reflection kept for other tasks: .openagents/memory/reflections/" in capsys.readouterr().out
    assert do_one_task(repo) == 0
    assert "lessons from earlier tasks in the first prompt: success of T-1" in capsys.readouterr().out


def test_an_agent_that_exits_with_an_error_is_not_blamed_on_an_edit_block(git_repo: Path) -> None:
    repo = make_project(git_repo, [], config={
        "executor": {"kind": "command", "command": "test -s {prompt_file} && echo 'no API credit left' && exit 1"},
        "reflexion": {"maxRetries": 0, "useLLM": False}, "retry": {"preflight": False}})
    assert do_one_task(repo) == 1
    (failed,) = outcome_lines(repo)
    assert "agent" in failed["whyItWentWrong"] and "edit block" not in failed["whyItWentWrong"]
