"""Every failed attempt leaves a reflection (seed 004: "Reflection generated after each
subtask failure"): the last before an escalation, a timeout, an agent's failed or timed-out
run, an environment that cannot run the checks, an attempt that changed what judges it.
So the escalation packet and the memory say why the last try failed, not only the earlier ones."""

from __future__ import annotations

import sys
from pathlib import Path

from projects import (
    CALC,
    REFLECTION,
    WRONG_ADD,
    do_one_task,
    events_of,
    make_project,
    reflection_lines,
    tasks_on_disk,
    write_file,
)

PY = sys.executable
HEURISTIC_ONE_TRY = {"reflexion": {"maxRetries": 0, "useLlm": False}}


def packet(repo: Path) -> str:
    return (repo / ".openagents" / "escalations" / "T-1.md").read_text()


def test_the_last_attempt_before_escalation_is_reflected_on_and_the_packet_says_why(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD},
               {"match": "Task T-1", "reply": write_file("calc.py", CALC.replace("a - b", "0"))},
               {"match": "Failure digest", "reply": REFLECTION, "times": None}]
    repo = make_project(git_repo, replies, config={"reflexion": {"maxRetries": 1},
                                                    "retry": {"stopOnPlateau": False}})

    assert do_one_task(repo) == 1

    saved = reflection_lines(repo)
    assert [r["attemptNumber"] for r in saved] == [1, 2]
    concluded = packet(repo).split("## What the reflections concluded")[1].split("## Last failure")[0]
    assert f"- Attempt 2 [{saved[1]['category']}]: {saved[1]['analysis'][:40]}" in concluded  # the last try's why
    assert "- Attempt 1 [edge_case]: add used abs()" in concluded
    assert [e["attempt"] for e in events_of(repo, "reflection")] == [1, 2]


def test_a_test_run_that_times_out_is_reflected_on(git_repo: Path) -> None:
    hang = f"{PY} -c 'import time; time.sleep(60)'"
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": WRONG_ADD}],
                        config={**HEURISTIC_ONE_TRY, "testCommands": [hang], "timeouts": {"verifySeconds": 1},
                                "retry": {"preflight": False}})

    assert do_one_task(repo) == 1

    (why,) = reflection_lines(repo)
    assert why["failureType"] == "timeout" and why["category"] == "verification"
    assert "timed out" in why["analysis"] and "- Attempt 1 [verification]: The check timed out" in packet(repo)


def test_an_agent_run_that_fails_is_reflected_on(git_repo: Path) -> None:
    crash = {"executor": {"kind": "command", "command": "sh -c 'echo agent crashed; exit 3' {prompt_file}"}}
    repo = make_project(git_repo, [], config={**HEURISTIC_ONE_TRY, **crash})

    assert do_one_task(repo) == 1

    (why,) = reflection_lines(repo)
    assert why["category"] == "environment" and "exited with code 3" in why["analysis"]
    assert events_of(repo, "reflection")[0]["stage"] == "agent"
    assert "exited with code 3" in packet(repo)


def test_an_agent_stopped_at_its_time_limit_is_told_to_take_a_smaller_step(git_repo: Path) -> None:
    slow = {"executor": {"kind": "command", "command": "sh -c 'sleep 30' {prompt_file}", "timeoutSeconds": 1}}
    repo = make_project(git_repo, [], config={**HEURISTIC_ONE_TRY, **slow})

    assert do_one_task(repo) == 1

    (why,) = reflection_lines(repo)
    assert why["failureType"] == "timeout" and why["category"] == "approach_error"
    assert "time limit" in why["analysis"] and "smaller step" in why["suggestion"]


def test_checks_that_cannot_run_here_are_reflected_on_as_the_environment(git_repo: Path) -> None:
    missing = {"testCommands": ["no-such-test-runner-xyz"], "retry": {"preflight": False}}
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": WRONG_ADD}],
                        config={**HEURISTIC_ONE_TRY, **missing})

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    (why,) = reflection_lines(repo)
    assert why["category"] == "environment"
    assert "[environment]" in packet(repo)


TAMPER = """import pathlib
pathlib.Path("calc.py").write_text({calc!r})
pathlib.Path(".openagents/project.json").write_text('{{"testCommands": ["true"]}}')
"""


def test_an_attempt_that_rewrites_its_judge_is_reflected_on_as_an_approach_error(
    git_repo: Path, tmp_path: Path
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(TAMPER.format(calc=CALC.replace("a - b", "0")))
    tamper = {"executor": {"kind": "command", "command": f"{PY} {agent} {{prompt_file}}"}}
    repo = make_project(git_repo, [], config={**HEURISTIC_ONE_TRY, **tamper})

    assert do_one_task(repo) == 1

    (why,) = reflection_lines(repo)
    assert why["category"] == "approach_error" and "changed what judges it" in why["analysis"]
    assert events_of(repo, "reflection")[0]["stage"] == "integrity"


def test_a_crashed_agent_is_reflected_on_with_the_exception_its_traceback_ends_with(
    git_repo: Path, tmp_path: Path
) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text("import sys\nKEY = 'sk-proj-' + 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6'\n"
                     "def deep(n):\n    return deep(n - 1) if n else open(sys.argv[1])\n"
                     "print('working with', KEY)\ndeep(12)\n")
    crash = {"executor": {"kind": "command", "command": f"{PY} {agent} --prompt {{prompt_file}}"}}
    repo = make_project(git_repo, [], config={**HEURISTIC_ONE_TRY, **crash})

    assert do_one_task(repo) == 1

    (why,) = reflection_lines(repo)
    assert "exited with code 1" in why["analysis"]
    assert "FileNotFoundError: [Errno 2] No such file or directory: '--prompt'" in why["analysis"]
    assert "a1B2c3D4e5F6" not in why["analysis"]
