"""do-one-task end to end: real git repositories, real pytest runs, the scripted model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from projects import (
    CALC,
    FIX_ADD,
    REFLECTION,
    WRONG_ADD,
    do_one_task,
    git,
    goldenloop,
    make_project,
    reflection_lines,
    run_events,
    task,
    tasks_on_disk,
)

from orchestrator.batch.worktree import Worktrees
from orchestrator.cli import do_one_task_main


def reflections(repo: Path) -> list[dict]:
    """The attempt reflections (a task's outcome reflection is not one of them)."""
    return reflection_lines(repo)


def test_pass_on_first_try_commits_exactly_the_changed_file(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}])

    assert do_one_task(repo) == 0

    out = capsys.readouterr().out
    assert "attempt 1, up to 3 retries" in out and "PASS" in out
    log = git(repo, "log", "--format=%s", "-n", "2").splitlines()
    assert log == ["T-1: goldenloop bookkeeping", "T-1: Fix add"]
    code_commit = git(repo, "show", "--name-only", "--format=", "HEAD~1").split()
    assert code_commit == ["calc.py"]
    closed = tasks_on_disk(repo)["T-1"]
    assert closed["status"] == "closed" and closed["closedAt"]
    assert closed["commits"] == [git(repo, "rev-parse", "HEAD~1").strip()]
    assert reflections(repo) == []
    assert git(repo, "status", "--porcelain") == ""


def test_fail_reflect_pass_puts_the_reflection_in_the_retry_prompt(git_repo, capsys):
    replies = [
        {"match": "Task T-1", "reply": WRONG_ADD},
        {"match": "Failure digest", "reply": "Reflection:\n```json\n" + REFLECTION + "\n```"},
        # Answers only if the retry prompt carries the reflection and the last failure.
        {
            "match": r"Attempt 1 failed[\s\S]*test_add_negative[\s\S]*Reflections from Previous "
            r"Attempts[\s\S]*add used abs\(\)",
            "reply": "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n"
            "    return a + b\n>>>>>>> REPLACE\n",
        },
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    out = capsys.readouterr().out
    assert "attempt 2, retry 1 of 3" in out and "[edge_case]" in out
    saved = reflections(repo)
    assert len(saved) == 1
    r = saved[0]
    assert r["taskId"] == "T-1" and r["subtaskId"] == "T-1.1" and r["attemptNumber"] == 1
    assert r["category"] == "edge_case" and r["source"] == "llm"
    assert r["failureType"] == "test_failure" and r["filesModified"] == ["calc.py"]
    assert "abs()" in r["analysis"]
    assert (repo / "calc.py").read_text().count("return a + b") == 1
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"


def test_four_failures_escalate_and_restore_the_tree(git_repo, capsys):
    replies = [
        {"match": "Task T-1", "reply": WRONG_ADD},
        {"match": "Failure digest", "reply": REFLECTION, "times": None},
        {
            "match": "Task T-1",
            "reply": "helper.py\n<<<<<<< FILE\nVALUE = 1\n>>>>>>> FILE\n",
        },
        {"match": "Task T-1", "reply": "notes/new.txt\n<<<<<<< FILE\nscratch\n>>>>>>> FILE\n", "times": 2},
        {"match": "Task T-1", "reply": "notes/new.txt\n<<<<<<< FILE\nscratch, again\n>>>>>>> FILE\n"},
    ]
    no_early_stop = {"retry": {"stopOnPlateau": False, "stopOnOscillation": False}}
    repo = make_project(git_repo, replies, config=no_early_stop)
    (repo / "mine.txt").write_text("the user's own untracked notes\n")

    assert do_one_task(repo, "--allow-dirty") == 1

    assert (repo / "calc.py").read_text() == CALC  # base restored
    assert not (repo / "helper.py").exists() and not (repo / "notes").exists()
    assert (repo / "mine.txt").read_text() == "the user's own untracked notes\n"
    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked" and "escalations/T-1.md" in blocked["closeReason"]
    packet = (repo / ".openagents" / "escalations" / "T-1.md").read_text()
    assert "Attempt 4" in packet and "add used abs()" in packet
    patch = (repo / ".openagents" / "escalations" / "T-1.patch").read_text()
    assert "abs(a) + abs(b)" in patch  # the best attempt: it passed 2 of 3 tests
    # The last attempt is reflected on too: the packet and the memory keep why it failed.
    assert [r["attemptNumber"] for r in reflections(repo)] == [1, 2, 3, 4]
    subtasks = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    assert subtasks["subtasks"][0]["status"] == "failed"
    assert subtasks["subtasks"][0]["failureCount"] == 4
    assert "ESCALATED" in capsys.readouterr().out


CONTACT = "jane.doe@" + "acme-corp.com"  # personal data: masked wherever goldenloop writes it


def test_an_escalation_whose_patch_lost_a_value_to_redaction_says_how_to_apply_the_exact_one(git_repo, capsys):
    # The saved patch may be shared; the exact diff stays in the attempt history, out of git.
    # (A credential written into a file is rejected before any patch: tests/loop/test_secrets_at_rest.py.)
    reply = f"Name the maintainer.\n\nsettings.py\n<<<<<<< FILE\nCONTACT = \"{CONTACT}\"\n>>>>>>> FILE\n"
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": reply}],
                        config={"reflexion": {"maxRetries": 0, "useLLM": False}})

    assert do_one_task(repo) == 1

    saved = (repo / ".openagents" / "escalations" / "T-1.patch").read_text()
    assert CONTACT not in saved and "[REDACTED:" in saved
    packet = (repo / ".openagents" / "escalations" / "T-1.md").read_text()
    command = "goldenloop history T-1 --subtask T-1.1 --patch 1 | git apply"
    assert f"so it does not apply as it is: `{command}` applies the exact one" in packet
    assert all(CONTACT not in p.read_text() for p in (repo / ".openagents").rglob("*.patch"))
    capsys.readouterr()
    assert goldenloop(repo, "history", "T-1", "--subtask", "T-1.1", "--patch", "1") == 0
    subprocess.run(["git", "apply"], input=capsys.readouterr().out, text=True, cwd=repo, check=True)
    assert CONTACT in (repo / "settings.py").read_text()


def test_reflexion_off_retries_with_the_raw_digest_only(git_repo):
    replies = [
        {"match": "Task T-1", "reply": WRONG_ADD},
        {
            "match": r"^(?![\s\S]*Reflections from Previous)[\s\S]*Attempt 1 failed[\s\S]*test_add_negative",
            "reply": "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n"
            "    return a + b\n>>>>>>> REPLACE\n",
        },
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo, "--no-reflexion") == 0

    assert reflections(repo) == []
    kinds = [e["event"] for e in run_events(repo)]
    assert "reflection" not in kinds and kinds.count("attempt_started") == 2


def test_dirty_tree_is_refused_with_exit_4(git_repo, capsys):
    repo = make_project(git_repo, [{"reply": FIX_ADD}])
    (repo / "calc.py").write_text(CALC + "\n# my work in progress\n")

    assert do_one_task(repo) == 4

    assert "uncommitted changes of yours (calc.py)" in capsys.readouterr().err
    assert "# my work in progress" in (repo / "calc.py").read_text()
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"


def test_bad_config_exits_2_naming_the_key_path(git_repo, capsys):
    repo = make_project(git_repo, [{"reply": FIX_ADD}], config={"reflexion": {"maxRetries": "three"}})

    assert do_one_task(repo) == 2

    err = capsys.readouterr().err
    assert "reflexion.maxRetries" in err and "Traceback" not in err


def test_no_ready_task_exits_3(git_repo, capsys):
    repo = make_project(
        git_repo,
        [{"reply": FIX_ADD}],
        tasks=[task("T-1", status="closed"), task("T-2", deps=[{"id": "T-9", "type": "blocks"}])],
    )

    assert do_one_task(repo) == 3

    assert "no ready task" in capsys.readouterr().err


def test_hanging_test_command_times_out_and_leaves_no_process(git_repo, tmp_path):
    pidfile = tmp_path / "child.pid"
    hang = f"sh -c 'sleep 300 & echo $! > {pidfile}; wait'"
    repo = make_project(
        git_repo,
        [{"match": "Task T-1", "reply": FIX_ADD, "times": None}, {"reply": REFLECTION, "times": None}],
        config={"testCommands": [hang], "timeouts": {"verifySeconds": 1}, "reflexion": {"maxRetries": 0},
                "retry": {"preflight": False}},  # a hang before any change blocks at preflight
    )

    assert do_one_task(repo) == 1

    verdicts = [e for e in run_events(repo) if e["event"] == "verdict"]
    assert verdicts and verdicts[0]["failureType"] == "timeout"
    child = int(pidfile.read_text())
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is not running
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone, or gone while read
        return False


def test_edit_escaping_the_repository_is_refused(git_repo, tmp_path):
    outside = tmp_path / "outside.txt"
    replies = [
        {"match": "Task T-1", "reply": "../outside.txt\n<<<<<<< FILE\npwned\n>>>>>>> FILE\n"},
        {"match": "Task T-1", "reply": FIX_ADD},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    assert not outside.exists()
    failed = [e for e in run_events(repo) if e["event"] == "edit_failed"]
    assert len(failed) == 1 and "outside the repository" in failed[0]["error"]


def test_malformed_edit_reply_is_a_failed_attempt_not_a_crash(git_repo):
    replies = [
        {"match": "Task T-1", "reply": "I think you should change the subtraction to addition."},
        {"match": r"could not be applied[\s\S]*holds no code to apply[\s\S]*files are: [\s\S]*calc\.py",
         "reply": FIX_ADD},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    plan = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    outcomes = [a["outcome"] for a in plan["subtasks"][0]["attempts"]]
    assert outcomes == ["edit_failed", "passed"]


def test_model_failing_mid_run_restores_and_reopens(git_repo, capsys):
    replies = [
        {"match": "Task T-1", "reply": WRONG_ADD},
        {"match": "Failure digest", "reply": REFLECTION},
        {"match": "Task T-1", "error": "auth"},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 1

    assert (repo / "calc.py").read_text() == CALC
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert "model error (auth)" in capsys.readouterr().out


def test_malformed_reflection_reply_falls_back_to_the_heuristic(git_repo):
    replies = [
        {"match": "Task T-1", "reply": WRONG_ADD},
        {"match": "Failure digest", "reply": "Sorry, I cannot help with that."},
        {"match": "Task T-1", "reply": "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n"
         "    return a + b\n>>>>>>> REPLACE\n"},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    (saved,) = reflections(repo)
    assert saved["source"] == "heuristic" and "test_add_negative" in saved["analysis"] + saved["suggestion"]


def test_unknown_keys_and_a_malformed_task_line_survive(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}],
                        tasks=[task("T-1", sprint="42", owner={"team": "core"})])
    path = repo / ".openagents" / "tasks.jsonl"
    path.write_text(path.read_text() + "{this is not json\n")
    git(repo, "commit", "-qam", "a broken line")

    assert do_one_task(repo) == 0

    text = path.read_text()
    assert "{this is not json\n" in text
    body = tasks_on_disk(repo)["T-1"]
    assert body["sprint"] == "42" and body["owner"] == {"team": "core"} and body["status"] == "closed"
    assert "line 2" in capsys.readouterr().out


def test_missing_api_key_is_found_before_any_work(git_repo, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    repo = make_project(git_repo, [], config={"defaultModel": "gpt-4o"})

    assert do_one_task(repo) == 2

    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert not (repo / ".openagents" / "subtasks").exists()


def test_a_second_run_on_a_locked_repository_exits_4(git_repo, capsys):
    from orchestrator.lock import AgentLock

    repo = make_project(git_repo, [{"reply": FIX_ADD}])
    with AgentLock(repo):
        assert do_one_task(repo) == 4
    assert f"pid {os.getpid()}" in capsys.readouterr().err


def test_a_killed_run_is_recovered_on_the_next_run(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}])
    base = git(repo, "rev-parse", "HEAD").strip()
    # What a run killed mid-attempt leaves: the task in progress, its worktree with a half-made edit.
    board = repo / ".openagents" / "tasks.jsonl"
    board.write_text(board.read_text().replace('"status":"open"', '"status":"in_progress"'))
    plan = {
        "taskId": "T-1",
        "subtasks": [{"id": "T-1.1", "title": "Fix add", "status": "in_progress",
                      "baseCommit": base, "dirtyBefore": []}],
    }
    (repo / ".openagents" / "subtasks").mkdir()
    (repo / ".openagents" / "subtasks" / "T-1.json").write_text(json.dumps(plan))
    left = Worktrees(repo).home / "worker-1"
    left.parent.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "--detach", str(left), base)
    (left / "calc.py").write_text("half written")
    (left / "tmp_from_attempt.py").write_text("x = 1\n")

    assert do_one_task(repo) == 0

    out = capsys.readouterr().out
    assert "recovered task(s) left in progress by an earlier run: T-1" in out
    assert "removed 1 worktree(s) left by a crashed run" in out
    assert not left.exists() and not (repo / "tmp_from_attempt.py").exists()
    assert "return a + b" in (repo / "calc.py").read_text()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_help_does_not_import_litellm():
    code = (
        "import sys\n"
        "from orchestrator.cli import do_one_task_main\n"
        "try:\n    do_one_task_main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--no-reflexion" in done.stdout


def test_run_from_a_subfolder_uses_the_projects_own_config(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}])
    (repo / "docs").mkdir()

    assert do_one_task_main(["--dir", str(repo / "docs")]) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert "return a + b" in (repo / "calc.py").read_text()


def test_a_project_without_checks_is_refused(git_repo, capsys):
    repo = make_project(git_repo, [{"reply": FIX_ADD}], config={"testCommands": []})

    assert do_one_task(repo) == 2

    assert "project.json sets no testCommands or typecheckCommands" in capsys.readouterr().err
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"


def test_a_fix_of_a_file_you_are_editing_waits_on_its_branch(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}])
    wip = CALC + "\n# my work in progress\n"
    (repo / "calc.py").write_text(wip)

    assert do_one_task(repo, "--allow-dirty") == 1

    assert (repo / "calc.py").read_text() == wip  # the user's version, not a mix
    assert git(repo, "log", "--format=%s", "-n", "2").split("\n")[1] != "T-1: Fix add"
    assert "a + b" in git(repo, "show", "goldenloop/T-1:calc.py")  # passed, and kept for you
    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked"
    assert blocked["closeReason"].startswith("your uncommitted change to calc.py is in the way")
    assert "your uncommitted change to calc.py is in the way" in capsys.readouterr().out


def test_a_dependency_given_as_a_bare_id_is_understood(git_repo):
    repo = make_project(
        git_repo,
        [{"match": "Task T-2", "reply": FIX_ADD}],
        tasks=[task("T-1", status="blocked"), task("T-2", deps=["T-1"]), task("T-3", deps=[])],
    )
    board_text = (repo / ".openagents" / "tasks.jsonl").read_text()

    assert do_one_task(repo, "--task", "T-2") == 3  # known, and not ready: T-1 is not closed

    assert (repo / ".openagents" / "tasks.jsonl").read_text() == board_text


def test_a_prompt_too_long_for_the_model_blocks_the_task_without_retrying(git_repo):
    repo = make_project(git_repo, [{"match": "Task T-1", "error": "context_window", "times": None}])

    assert do_one_task(repo) == 1

    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked" and "refused this task's prompt" in blocked["closeReason"]
    assert [e["event"] for e in run_events(repo)].count("attempt_started") == 1


def test_a_task_waiting_for_a_dependency_says_which(git_repo, capsys):
    repo = make_project(git_repo, [], tasks=[task("T-1"), task("T-2", deps=["T-1"])])

    assert do_one_task(repo, "--task", "T-2") == 3

    assert "waiting for T-1 to be closed" in capsys.readouterr().err
