"""`goldenloop memory ...` on a real project folder, in process."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from projects import FIX_ADD, do_one_task, make_project, outcome_record, tasks_on_disk

from orchestrator.cli import main

ATTEMPT = {"id": "A-1", "sessionId": "s", "taskId": "T-9", "subtaskId": "T-9.1", "attemptNumber": 1,
           "category": "root_cause", "analysis": "Off by one in the loop.", "suggestion": "Use range(n).",
           "actionItems": [], "confidence": 0.7, "createdAt": "2020-01-01T00:00:00Z"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    memory = tmp_path / ".openagents" / "memory"
    memory.mkdir(parents=True)
    lines = [orjson.dumps(outcome_record(n)) for n in range(3)] + [orjson.dumps(ATTEMPT)]
    (memory / "reflections.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (memory / "rules.md").write_text("# Rules\n\n- Run the linter before committing.\n")
    return tmp_path


def memory(project: Path, *args: str) -> int:
    action, *rest = args
    return main(["memory", action, "--dir", str(project), *rest])


def test_list_shows_the_newest_reflections_first_and_as_json(project: Path, capsys) -> None:
    assert memory(project, "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("[")[-1].rstrip("]") for line in lines] == ["R-2", "R-1", "R-0", "A-1"]
    assert memory(project, "list", "--json", "--limit", "1") == 0
    assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["R-2"]


def test_show_prints_the_markdown_page_and_an_unknown_id_is_exit_1(project: Path, capsys) -> None:
    assert memory(project, "show", "R-1") == 0
    page = capsys.readouterr().out
    assert page.startswith("# Reflection: 2026-10-02 - coder - parse dates in report 1")
    assert "## Tactical rule candidate" in page
    assert memory(project, "show", "A-1") == 0  # an attempt reflection too
    assert "Off by one" in capsys.readouterr().out
    assert memory(project, "show", "nope") == 1
    assert capsys.readouterr().err.strip() == "goldenloop memory: no reflection with id nope"


def test_search_answers_with_the_loops_ranking(project: Path, capsys) -> None:
    assert memory(project, "search", "timezone of ISO dates", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert {hit["id"] for hit in found} == {"R-0", "R-1", "R-2"}
    assert all(hit["why"]["text"] > 0 for hit in found)
    assert memory(project, "search", "kubernetes helm chart") == 0
    assert capsys.readouterr().out.strip() == "no lesson matches"


def test_rules_lists_rules_md(project: Path, capsys) -> None:
    assert memory(project, "rules", "--json") == 0
    assert json.loads(capsys.readouterr().out)["rules"] == ["Run the linter before committing."]


def test_archive_and_prune_move_records_and_export_keeps_everything(project: Path, capsys) -> None:
    assert memory(project, "archive", "--keep", "1") == 0
    assert "moved 2 task reflection(s)" in capsys.readouterr().out
    assert memory(project, "prune", "--older-than", "365") == 0  # the 2020 attempt reflection
    assert "moved 1 reflection(s)" in capsys.readouterr().out
    live = (project / ".openagents" / "memory" / "reflections.jsonl").read_bytes().splitlines()
    assert [orjson.loads(line)["id"] for line in live] == ["R-2"]
    pages = sorted(p.relative_to(project / ".openagents" / "memory" / "reflections").as_posix()
                   for p in (project / ".openagents" / "memory" / "reflections").rglob("*.md"))
    assert pages == ["coder/2026-10-03-parse-dates-in-report-2.md",
                     "coder/archive/2026/2026-10-01-parse-dates-in-report-0.md",
                     "coder/archive/2026/2026-10-02-parse-dates-in-report-1.md"]

    out = project / "all.jsonl"
    assert memory(project, "export", "--out", str(out)) == 0
    assert sorted(orjson.loads(line)["id"] for line in out.read_bytes().splitlines()) == ["R-0", "R-1", "R-2"]


def test_outside_a_project_is_one_sentence_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["memory", "list", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("goldenloop memory: no .openagents/ folder in") and "\n" not in err


def test_bad_requests_are_one_sentence_and_exit_2(project: Path, tmp_path: Path, capsys) -> None:
    assert memory(project, "export", "--out", str(tmp_path / "no" / "such" / "dir.jsonl")) == 2
    assert capsys.readouterr().err.startswith("goldenloop memory: cannot write ")
    assert memory(project, "export", "--markdown", "--out", str(tmp_path / "x")) == 2
    assert memory(project, "search", "  ") == 2
    assert "needs some words" in capsys.readouterr().err
    assert main(["memory", "list", "--dir", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip().endswith("nowhere is not a folder")


def test_an_archived_attempt_reflection_can_still_be_shown(project: Path, capsys) -> None:
    assert memory(project, "prune", "--older-than", "365") == 0
    capsys.readouterr()
    assert memory(project, "show", "A-1") == 0
    assert "suggestion: Use range(n)." in capsys.readouterr().out


def test_a_filter_that_matches_nothing_says_so(project: Path, capsys) -> None:
    assert memory(project, "list", "--kind", "success") == 0
    assert capsys.readouterr().out.strip() == "no reflection matches"


GARBAGE = b"\x00\xff\xfe not json\n[1, 2]\n\"a string\"\n"


def test_lines_that_are_no_record_are_named_once_by_byte_offset(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = project / ".openagents" / "memory" / "reflections.jsonl"
    path.write_bytes(GARBAGE + path.read_bytes())

    assert memory(project, "list") == 0

    captured = capsys.readouterr()
    assert "R-1" in captured.out
    warnings = [line for line in captured.err.splitlines() if "skipping" in line]
    assert warnings == [
        f"WARNING: {path}: skipping the line at byte 0 that is not valid JSON",
        f"WARNING: {path}: skipping the line at byte 13 that is not a JSON object",
        f"WARNING: {path}: skipping the line at byte 20 that is not a JSON object",
    ]


@pytest.mark.parametrize("action", [["list"], ["search", "timezone"], ["show", "R-1"]])
def test_a_folder_where_the_memory_file_belongs_is_one_sentence_and_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    path = project / ".openagents" / "memory" / "reflections.jsonl"
    path.unlink()
    path.mkdir()

    assert memory(project, *action) == 2

    err = capsys.readouterr().err
    assert err == (f"goldenloop memory: the memory file {path} cannot be used: it is not a regular file; fix it, "
                   "or move it out of the way and goldenloop starts a new one\n")


def test_do_one_task_names_a_folder_at_the_memory_file_before_any_attempt(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}])
    path = repo / ".openagents" / "memory" / "reflections.jsonl"
    path.mkdir(parents=True)

    assert do_one_task(repo) == 2

    captured = capsys.readouterr()
    assert f"do-one-task: the memory file {path} cannot be used: it is not a regular file" in captured.err
    assert "Traceback" not in captured.err + captured.out and "attempt 1" not in captured.out
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"


def test_list_covers_attempt_reflections_with_a_kind_column_and_filter(project: Path, capsys) -> None:
    assert memory(project, "list") == 0
    rows = {line.split("[")[-1].rstrip("]"): line.split()[1] for line in capsys.readouterr().out.splitlines()}
    assert rows == {"R-2": "failed", "R-1": "failed", "R-0": "failed", "A-1": "attempt"}
    assert memory(project, "list", "--kind", "attempt", "--json") == 0
    (attempt,) = json.loads(capsys.readouterr().out)
    assert attempt["id"] == "A-1" and attempt["subtaskId"] == "T-9.1"
    assert memory(project, "list", "--kind", "failed") == 0
    assert "A-1" not in capsys.readouterr().out
    assert memory(project, "prune", "--older-than", "365") == 0  # A-1 goes to the archive
    capsys.readouterr()
    assert memory(project, "list", "--archived", "--kind", "attempt") == 0
    assert capsys.readouterr().out.rstrip().endswith("[A-1]")


def test_search_finds_attempt_reflections_too_and_filters_by_kind(project: Path, capsys) -> None:
    assert memory(project, "search", "off by one in the loop", "--json") == 0
    assert [(hit["id"], hit["kind"]) for hit in json.loads(capsys.readouterr().out)] == [("A-1", "attempt")]
    assert memory(project, "search", "timezone of ISO dates", "--kind", "attempt") == 0
    assert capsys.readouterr().out.strip() == "no reflection matches"  # it searched attempt reflections


def test_show_takes_a_unique_start_of_an_id_and_prints_no_html_comment(project: Path, capsys) -> None:
    assert memory(project, "show", "A-") == 0
    assert "suggestion: Use range(n)." in capsys.readouterr().out
    assert memory(project, "show", "R-") == 2
    assert capsys.readouterr().err.strip() == ("goldenloop memory: 3 reflections have an id starting with R- "
                                               "(R-0, R-1, R-2); give more of the id")
    assert memory(project, "show", "R-1") == 0
    page = capsys.readouterr().out
    assert "<!--" not in page and "goldenloop-record" not in page
    assert page.rstrip().endswith("Always parse dates with their timezone.")


def test_agent_is_found_by_the_name_listed_or_by_its_pages_folder(project: Path, capsys) -> None:
    agents = {"R-7": "fix_agent", "R-8": "scripted/.openagents/script.json"}
    store = project / ".openagents" / "memory" / "reflections.jsonl"
    with store.open("ab") as lines:
        for n, agent in ((7, agents["R-7"]), (8, agents["R-8"])):
            lines.write(orjson.dumps(outcome_record(n, agent=agent)) + b"\n")
    assert memory(project, "export", "--markdown") == 0
    before = store.read_bytes()
    folders = {p.name for p in (store.parent / "reflections").iterdir() if p.is_dir()}
    assert folders == {"coder", "fix-agent", "scripted-openagents-script-json"}
    capsys.readouterr()
    for wanted, found in [("fix_agent", "R-7"), ("fix-agent", "R-7"), ("fix-agent/", "R-7"),
                          ("scripted/.openagents/script.json", "R-8"), ("scripted-openagents-script-json", "R-8")]:
        assert memory(project, "list", "--agent", wanted, "--json") == 0
        assert [(r["id"], r["agent"]) for r in json.loads(capsys.readouterr().out)] == [(found, agents[found])]
    assert store.read_bytes() == before  # the records keep the name as written


def test_a_persons_search_ranks_by_how_many_words_match_and_needs_only_one(project: Path, capsys) -> None:
    other = outcome_record(5, whatWentWrong="The timezone was lost.", whatToDoDifferently="Keep it.",
                           tacticalRule="", title="report 5")
    with (project / ".openagents" / "memory" / "reflections.jsonl").open("ab") as lines:
        lines.write(orjson.dumps(other) + b"\n")
    for words in ("timezone", "dropped timezone", "dropped timezone kubernetes", "dropped timezone kubernetes helm"):
        assert memory(project, "search", words, "--json") == 0
        found = json.loads(capsys.readouterr().out)
        assert {hit["id"] for hit in found} == {"R-0", "R-1", "R-2", "R-5"}, words
    assert found[-1]["id"] == "R-5"  # one word of four shared: last
    assert [hit["why"]["shared_words"] for hit in found] == [2, 2, 2, 1]


def test_the_loops_own_relevance_still_wants_two_shared_words() -> None:
    from reflection.lessons import word_weight

    assert word_weight(1, 3) == 0.0  # one shared word of a task's three is no relevance
    assert word_weight(1, 3, any_word=True) > 0.0


@pytest.mark.parametrize("given", ["", "  "])
def test_show_without_an_id_is_a_usage_error(project: Path, capsys, given: str) -> None:
    assert memory(project, "show", given) == 2
    err = capsys.readouterr().err.strip()
    assert err == "goldenloop memory: show needs an id or the start of one (memory list shows them)"


def test_list_keeps_its_columns_with_long_task_ids_and_agent_names(project: Path, capsys) -> None:
    long_one = {**ATTEMPT, "id": "A-2", "taskId": "BILLING-20417-refund-webhook-retries", "createdAt": "2020-01-02T00:00:00Z"}
    reflections = project / ".openagents" / "memory" / "reflections.jsonl"
    reflections.write_bytes(reflections.read_bytes() + orjson.dumps(long_one) + b"\n")

    assert memory(project, "list", "--kind", "attempt") == 0

    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert len({line.index("Off by one") for line in lines}) == 1  # the titles start in one column
    assert "BILLING-20417" in lines[0] and "ries  " in lines[0]  # clipped in the middle, both ends kept
