"""The morning report: a self-contained page per run, next to the run's summary."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from projects import FIX_ADD, do_one_task, goldenloop, make_project, task

from orchestrator.cli import overnight_main

REFUSAL = "I cannot see how to do this, so I changed nothing."


def report_of(repo: Path) -> str:
    (page,) = (repo / ".openagents" / "runs").glob("*.html")
    return page.read_text()


def test_an_overnight_run_leaves_a_page_with_each_task_its_timeline_and_what_went_wrong(git_repo: Path) -> None:
    tasks = [task("T-1", "Fix add"),
             task("T-2", "Document the token sk-proj-4fGh8JkLmN2pQrStUvWxYz01AbCdEf", priority=2)]
    replies = [{"match": "Task T-1:", "reply": FIX_ADD}, {"match": "Task T-2:", "reply": REFUSAL, "times": None}]
    repo = make_project(git_repo, replies, tasks=tasks, config={"reflexion": {"useLLM": False, "maxRetries": 1}})

    assert overnight_main([str(repo), "--max-tasks", "2"]) == 1  # T-2 ends blocked

    page = report_of(repo)
    assert page.startswith("<!doctype html>") and "<script" not in page and "http" not in page  # self-contained
    assert "1 of 2 task(s) closed" in page
    assert re.search(r"<td>T-1</td><td>Fix add</td><td><span[^>]*>closed</span></td>"
                     r"<td>pass-to-pass 1 · fail-to-pass 2</td><td>1</td>", page)  # the verdict that closed it
    assert re.search(r"<td>T-2</td>.*?>blocked</span></td><td>[^<]*</td><td>2</td>", page)
    assert page.count("<rect ") == 2  # one bar per task on the timeline
    assert "<details open><summary>T-2" in page and "<details><summary>T-1" in page  # what needs a human, unfolded
    assert "sk-proj-4fGh8" not in page  # redacted, like everything a run writes
    assert not re.search(r'=[^"\s>]*/>', page)  # no unquoted value swallowing a "/>": browsers misread that


def test_do_one_task_writes_the_page_too(git_repo: Path) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": FIX_ADD}], config={"reflexion": {"useLLM": False}})
    assert do_one_task(repo) == 0
    assert "committed" in report_of(repo) and "Fix add" in report_of(repo)


def test_do_one_task_says_where_its_report_and_summary_are(git_repo: Path, capsys) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": FIX_ADD}], config={"reflexion": {"useLLM": False}})
    assert do_one_task(repo) == 0
    runs = repo / ".openagents" / "runs"
    (page,) = runs.glob("*.html")
    (summary,) = runs.glob("*-summary.json")
    assert f"report:  {page}" in capsys.readouterr().out
    assert '"outcome": "closed"' in summary.read_text()


def test_report_writes_the_latest_page_again_and_opens_it(git_repo: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": FIX_ADD}], config={"reflexion": {"useLLM": False}})
    assert goldenloop(repo, "report") == 1
    assert capsys.readouterr().err == f"goldenloop report: no run has ended in {repo} yet\n"
    assert do_one_task(repo) == 0
    (page,) = (repo / ".openagents" / "runs").glob("*.html")
    page.unlink()
    opened = tmp_path / "opened"
    monkeypatch.setenv("BROWSER", f"{sys.executable} -c 'import sys; open(\"{opened}\", \"w\").write(sys.argv[1])' %s")
    capsys.readouterr()

    assert goldenloop(repo, "report", "--open") == 0

    assert capsys.readouterr().out == f"{page}\n" and "Fix add" in page.read_text()
    assert opened.read_text() == page.as_uri()
    assert goldenloop(repo, "report", "20991231T000000Z-nope") == 1


def test_the_overnight_board_clock_ticks_between_events(monkeypatch) -> None:
    from orchestrator.batch import display

    now = [1000.0]
    monkeypatch.setattr(display.time, "monotonic", lambda: now[0])
    board = display.LiveDisplay()
    shown = []
    for later in (0.0, 83.0):  # no event between the two refreshes
        now[0] = 1000.0 + later
        shown.append(board_text(board))
    assert " 0:00 " in shown[0] and " 1:23 " in shown[1]


def board_text(board: object) -> str:
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(board.live.renderable)
    return console.export_text()


def test_the_overnight_board_says_what_a_prompt_cache_served_and_when_none_was_reported() -> None:
    from orchestrator.batch import display

    silent, caching = display.LiveDisplay(), display.LiveDisplay()
    assert "0 tokens · " in board_text(silent)  # no call yet: nothing to say of a cache
    for board, cached in ((silent, None), (caching, 0), (caching, 900)):
        board({"event": "model_call", "taskId": "T-1", "inputTokens": 1000, "outputTokens": 100,
               "costUsd": 0.001, "cachedTokens": cached})

    assert "1100 tokens (cache not reported) · " in board_text(silent)
    assert "2200 tokens (900 cached) · " in board_text(caching)
