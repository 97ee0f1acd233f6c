"""`goldenloop init | add | list | status | show | reopen | retry | import`, in real repositories, called
in-process through `orchestrator.cli.main` as a user types them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from projects import REFLECTION, WRONG_ADD, do_one_task, make_project, task, tasks_on_disk

from orchestrator.cli import main


def goldenloop(repo: Path, *argv: str) -> int:
    command, rest = argv[0], list(argv[1:])
    return main([command, "--dir", str(repo), *rest])


def json_out(capsys: pytest.CaptureFixture[str]) -> object:
    return json.loads(capsys.readouterr().out)


# -- init -------------------------------------------------------------------------------


def _init(repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    assert goldenloop(repo, "init") == 0
    out = capsys.readouterr().out
    return json.loads((repo / ".openagents" / "project.json").read_text()), out


def test_init_detects_a_python_project_and_writes_the_backlog_and_gitignore(git_repo, capsys):
    (git_repo / "tests").mkdir()
    (git_repo / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    (git_repo / "pyproject.toml").write_text("[tool.mypy]\nstrict = true\n")

    config, out = _init(git_repo, capsys)

    assert config["testCommands"] == ["python3 -m pytest -q"]
    assert config["typecheckCommands"] == ["python3 -m mypy ."]
    assert (git_repo / ".openagents" / "tasks.jsonl").read_text() == ""
    assert "runs/" in (git_repo / ".openagents" / ".gitignore").read_text()
    assert "python3 -m pytest -q" in out and "goldenloop add" in out


def test_init_detects_node_with_pnpm_go_and_rust(tmp_path, capsys):
    node, go, rust = (tmp_path / name for name in ("node", "go", "rust"))
    for folder in (node, go, rust):
        folder.mkdir()
    (node / "package.json").write_text(json.dumps({"scripts": {"test": "vitest run"}}))
    (node / "pnpm-lock.yaml").write_text("lockfileVersion: 9\n")
    (node / "tsconfig.json").write_text("{}")
    (node / "tests").mkdir()  # JavaScript tests: no reason for pytest
    (node / "tests" / "add.test.js").write_text("test('add', () => {})\n")
    (go / "go.mod").write_text("module example.com/x\n")
    (rust / "Cargo.toml").write_text("[package]\nname = 'x'\n")

    assert _init(node, capsys)[0] == {"testCommands": ["pnpm test"], "typecheckCommands": ["npx tsc --noEmit"]}
    assert _init(go, capsys)[0]["testCommands"] == ["go test ./..."]
    assert _init(rust, capsys)[0]["testCommands"] == ["cargo test"]


def test_init_refuses_to_overwrite_unless_forced(git_repo, capsys):
    _init(git_repo, capsys)
    assert goldenloop(git_repo, "add", "keep me") == 0

    assert goldenloop(git_repo, "init") == 1
    assert "already exists" in capsys.readouterr().err
    assert goldenloop(git_repo, "init", "--force") == 0
    assert "keep me" in (git_repo / ".openagents" / "tasks.jsonl").read_text()  # the backlog stays


# -- add, list ------------------------------------------------------------------------------


def test_add_assigns_the_next_free_id_and_validates_deps(git_repo, capsys):
    _init(git_repo, capsys)
    archive = git_repo / ".openagents" / "archive"
    archive.mkdir()
    (archive / "tasks-2026.jsonl").write_text(json.dumps(task("T-7", status="closed")) + "\n")

    assert goldenloop(git_repo, "add", "Write the parser", "--priority", "1", "--type", "feature") == 0
    assert capsys.readouterr().out.strip() == "T-8"  # the archived T-7 still counts
    assert goldenloop(git_repo, "add", "Use it", "--deps", "T-8,T-7", "--label", "cli", "--json") == 0
    added = json_out(capsys)
    assert added["id"] == "T-9" and [d["id"] for d in added["deps"]] == ["T-8", "T-7"] and added["labels"] == ["cli"]

    assert goldenloop(git_repo, "add", "Orphan", "--deps", "T-99") == 1
    assert capsys.readouterr().err.strip() == "goldenloop add: no task with id T-99 to depend on"
    with pytest.raises(SystemExit) as usage:
        goldenloop(git_repo, "add", "Too urgent", "--priority", "9")
    assert usage.value.code == 2
    assert set(tasks_on_disk(git_repo)) == {"T-8", "T-9"}


def test_list_shows_ready_blocked_with_reasons_and_closed(git_repo, capsys):
    tasks = [task("T-1", "Fix add"), task("T-2", "Use add", deps=["T-1"]),
             task("T-3", "Hard one", status="blocked", closeReason="escalated: see .openagents/escalations/T-3.md"),
             task("T-4", "Done one", status="closed", closedAt="2026-11-02T09:00:00Z", closeReason="all green")]
    repo = make_project(git_repo, [], tasks=tasks)

    assert goldenloop(repo, "list") == 0
    out = capsys.readouterr().out
    ready, blocked = out.split("blocked")[0], out.split("blocked")[1]
    assert "T-1" in ready and "T-2" not in ready
    assert "T-2" in blocked and "waits on T-1 (open)" in blocked
    assert "escalations/T-3.md" in blocked and "closed (1):" in out and "all green" in out

    assert goldenloop(repo, "status", "--json") == 0
    data = json_out(capsys)
    assert [t["id"] for t in data["ready"]] == ["T-1"]
    assert {t["id"]: t["reason"] for t in data["blocked"]}["T-2"] == "waits on T-1 (open)"
    assert data["closed"]["count"] == 1


# -- show, reopen ---------------------------------------------------------------------------


def _escalated(git_repo: Path) -> Path:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD, "times": None},
               {"match": "Failure digest", "reply": REFLECTION, "times": None}]
    repo = make_project(git_repo, replies, config={"reflexion": {"maxRetries": 1}})
    assert do_one_task(repo) == 1
    return repo


def test_show_after_a_real_run_lists_attempts_reflections_and_the_escalation(git_repo, capsys):
    repo = _escalated(git_repo)
    capsys.readouterr()

    assert goldenloop(repo, "show", "T-1") == 0
    out = capsys.readouterr().out
    assert "status blocked" in out and "T-1.1" in out
    assert "attempt 1: failed" in out and "attempt 2:" in out
    assert "add used abs()" in out  # the reflection written after attempt 1
    assert "escalations/T-1.md" in out and "The loop gave up after 2 attempt(s)" in out

    assert goldenloop(repo, "show", "T-1", "--json") == 0
    data = json_out(capsys)
    attempts = data["subtasks"][0]["attempts"]
    assert [a["number"] for a in attempts] == [1, 2] and "score" in attempts[0]
    assert data["reflections"][0]["taskId"] == "T-1"
    assert data["escalation"]["path"].endswith("T-1.md")

    assert goldenloop(repo, "show", "T-42") == 1
    assert capsys.readouterr().err.strip() == "goldenloop show: no task with id T-42"


def test_reopen_forget_puts_the_task_back_and_removes_its_plan(git_repo, capsys):
    repo = _escalated(git_repo)
    plan = repo / ".openagents" / "subtasks" / "T-1.json"
    assert plan.exists()
    capsys.readouterr()

    assert goldenloop(repo, "reopen", "T-1", "--forget") == 0
    assert "was blocked, now open; its subtask state is deleted" in capsys.readouterr().out
    assert not plan.exists()
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert "closeReason" not in tasks_on_disk(repo)["T-1"] or tasks_on_disk(repo)["T-1"]["closeReason"] is None
    assert goldenloop(repo, "retry", "T-1") == 0
    assert "already open" in capsys.readouterr().out



def test_do_one_task_on_a_blocked_task_says_why_and_how_to_reopen_it(git_repo, capsys):
    repo = _escalated(git_repo)
    capsys.readouterr()

    assert do_one_task(repo, "--task", "T-1") == 3
    err = capsys.readouterr().err
    assert err.startswith("do-one-task: task T-1 is blocked: 1 test(s) this task is about still fail, so it is "
                          "not done: test_calc.py::test_add_negative; `goldenloop reopen T-1` tries again")
    assert err.endswith("subtask T-1.1 stopped (max_retries) after 2 attempt(s) "
                        "(see .openagents/escalations/T-1.md)\n")
    assert err.count("\n") == 1
    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"


def test_do_one_task_on_a_closed_task_says_how_to_reopen_it(git_repo, capsys):
    repo = make_project(git_repo, [], tasks=[task(status="closed", closeReason="all green")])

    assert do_one_task(repo, "--task", "T-1") == 3
    assert capsys.readouterr().err == "do-one-task: task T-1 is closed already; goldenloop reopen T-1 lets it run again\n"


def test_reopen_while_a_run_holds_the_lock_exits_4(git_repo, capsys):
    from orchestrator.lock import AgentLock

    repo = make_project(git_repo, [], tasks=[task(status="blocked", closeReason="stuck")])
    with AgentLock(repo):
        assert goldenloop(repo, "reopen", "T-1") == 4
    err = capsys.readouterr().err
    assert err.startswith("goldenloop reopen: another goldenloop run holds") and err.count("\n") == 1
    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"


# -- import ---------------------------------------------------------------------------------

CHECKLIST = """# Sprint

- [ ] Parse the config
  Read project.json and report bad keys
  in one sentence.
- [x] Already done
- [ ] Fix add
* [ ] Add a --json flag

Some closing words.
"""


def test_import_a_markdown_checklist_skips_done_items_and_duplicates(git_repo, capsys):
    repo = make_project(git_repo, [])  # T-1 "Fix add" is open
    (repo / "TODO.md").write_text(CHECKLIST)

    assert goldenloop(repo, "import", str(repo / "TODO.md"), "--dry-run") == 0
    assert "would add 2 task(s)" in capsys.readouterr().out
    assert set(tasks_on_disk(repo)) == {"T-1"}

    assert goldenloop(repo, "import", str(repo / "TODO.md")) == 0
    out = capsys.readouterr().out
    assert "added 2 task(s)" in out and "skipped 'Fix add': task T-1 already has this title" in out
    assert "skipped 1 checked item(s)" in out
    tasks = tasks_on_disk(repo)
    assert tasks["T-2"]["title"] == "Parse the config"
    assert tasks["T-2"]["description"] == "Read project.json and report bad keys\nin one sentence."
    assert tasks["T-3"]["title"] == "Add a --json flag" and tasks["T-3"]["description"] == ""


def test_import_a_json_array_and_refuse_a_bad_one(git_repo, capsys):
    repo = make_project(git_repo, [])
    good = repo / "tasks.json"
    good.write_text(json.dumps([{"title": "A", "priority": 0, "labels": ["x"], "deps": ["T-1"]},
                                {"title": "B", "description": "b text"}]))
    bad = repo / "bad.json"
    bad.write_text(json.dumps([{"title": "C", "priority": 7}]))

    assert goldenloop(repo, "import", str(good), "--json") == 0
    assert [t["id"] for t in json_out(capsys)["added"]] == ["T-2", "T-3"]
    tasks = tasks_on_disk(repo)
    assert tasks["T-2"]["priority"] == 0 and tasks["T-2"]["deps"] == [{"id": "T-1", "type": "blocks"}]
    assert tasks["T-3"]["description"] == "b text"

    assert goldenloop(repo, "import", str(bad)) == 1
    assert "item 1 of bad.json: priority must be" in capsys.readouterr().err
    assert goldenloop(repo, "import", str(repo / "missing.md")) == 1
    assert set(tasks_on_disk(repo)) == {"T-1", "T-2", "T-3"}



def _without_backlog(repo: Path) -> Path:
    """A project whose project.json was written by hand: no tasks.jsonl yet."""
    (repo / ".openagents").mkdir()
    (repo / ".openagents" / "project.json").write_text(json.dumps({"testCommands": ["true"]}))
    return repo / ".openagents" / "tasks.jsonl"


def test_a_project_without_tasks_jsonl_has_an_empty_backlog_that_add_starts(git_repo, capsys):
    backlog = _without_backlog(git_repo)

    assert goldenloop(git_repo, "list") == 0
    assert "ready (0):" in capsys.readouterr().out
    assert goldenloop(git_repo, "show", "T-1") == 1
    assert capsys.readouterr().err.strip() == "goldenloop show: no task with id T-1"
    assert not backlog.exists()  # reading starts nothing

    assert goldenloop(git_repo, "add", "Write the parser") == 0
    assert capsys.readouterr().out.strip() == "T-1"
    assert [t["title"] for t in tasks_on_disk(git_repo).values()] == ["Write the parser"]


def test_import_into_a_project_without_tasks_jsonl_starts_it(git_repo, capsys):
    backlog = _without_backlog(git_repo)
    (git_repo / "TODO.md").write_text(CHECKLIST)

    assert goldenloop(git_repo, "import", str(git_repo / "TODO.md"), "--dry-run") == 0
    assert "would add 3 task(s)" in capsys.readouterr().out and not backlog.exists()
    assert goldenloop(git_repo, "import", str(git_repo / "TODO.md")) == 0
    assert set(tasks_on_disk(git_repo)) == {"T-1", "T-2", "T-3"}


def test_without_project_json_add_still_points_at_init(git_repo, capsys):
    assert goldenloop(git_repo, "add", "Write the parser") == 2
    err = capsys.readouterr().err
    assert "goldenloop init" in err and err.count("\n") == 1


def test_outside_a_project_every_command_says_so_in_one_sentence(tmp_path, capsys):
    assert main(["list", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "goldenloop init" in err and err.count("\n") == 1


def test_help_imports_no_litellm():
    """What keeps --help instant is what it imports (its time is measured by bench/startup_bench.py,
    never asserted: a busy machine is no bug)."""
    code = ("import sys\nfrom orchestrator import cli\n"
            "for name in ('init', 'add', 'list', 'status', 'show', 'reopen', 'retry', 'import'):\n"
            "    try:\n        cli.main([name, '--help'])\n    except SystemExit:\n        pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'litellm', 'pydantic', 'orjson'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_add_after_a_last_line_without_its_newline_keeps_both_lines(git_repo, capsys):
    repo = make_project(git_repo, [])
    backlog = repo / ".openagents" / "tasks.jsonl"
    backlog.write_bytes(backlog.read_bytes().rstrip(b"\n"))

    assert goldenloop(repo, "add", "Next") == 0
    assert set(tasks_on_disk(repo)) == {"T-1", "T-2"}


def test_show_tells_each_attempts_tokens_and_cost_and_the_tasks_total(git_repo, capsys) -> None:
    from projects import WRONG_ADD, do_one_task, goldenloop, make_project

    fix_abs = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Task T-1", "reply": fix_abs}]
    repo = make_project(git_repo, replies, config={"reflexion": {"useLLM": False}},
                        pricing={"inputCostPerToken": 0.000001, "outputCostPerToken": 0.000002})
    assert do_one_task(repo) == 0
    capsys.readouterr()

    assert goldenloop(repo, "show", "T-1") == 0

    out = capsys.readouterr().out
    # The scripted model here says nothing of a prompt cache: priced in full, and said so.
    assert len(re.findall(r"\n      tokens \d+ in \(cache not reported\), \d+ out, cost \$0\.\d{4}", out)) == 2
    assert re.search(r"\n  spent: \d+ tokens in \(cache not reported\), \d+ out, cost \$0\.\d{4} "
                     r"over 2 attempt\(s\)", out)


def test_show_tells_what_a_prompt_cache_served_each_attempt_and_the_task(git_repo, capsys) -> None:
    from projects import WRONG_ADD, do_one_task, goldenloop, make_project

    fix_abs = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Task T-1", "reply": fix_abs}]
    repo = make_project(git_repo, replies, config={"reflexion": {"useLLM": False}},
                        script_extra={"promptCache": True})
    assert do_one_task(repo) == 0
    capsys.readouterr()

    assert goldenloop(repo, "show", "T-1") == 0

    out = capsys.readouterr().out
    # The retry continues the first attempt's chat, so the cache serves its start.
    first, retry = (int(n) for n in re.findall(r"\n      tokens \d+ in \((\d+) cached\), \d+ out", out))
    assert first == 0 and retry > 0
    assert re.search(rf"\n  spent: \d+ tokens in \({retry} cached\), \d+ out, .* over 2 attempt\(s\)", out)

    assert goldenloop(repo, "history", "T-1") == 0
    journey = capsys.readouterr().out
    assert [int(n) for n in re.findall(r"Tokens \d+ in \((\d+) cached\) / \d+ out", journey)] == [first, retry]
