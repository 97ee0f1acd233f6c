"""The markdown view of outcome reflections: headings, round trip, names, regeneration."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reflection.outcome import AttemptStory, OutcomeReflection, TaskStory, decision_reflection, outcome_reflections
from reflection.outcome_markdown import from_markdown, to_markdown, write_markdown_view, write_page

DAY = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
SECRET = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


def failed(title: str = "API timeout handling in the fetcher", *, at: datetime = DAY, agent: str = "Researcher Agent",
           summary: str = "fetch() timed out after 30 s") -> OutcomeReflection:
    attempt = AttemptStory(1, False, summary, "timeout", "sig", ("src/fetch.py",), None)
    story = TaskStory("s1", "T-1", title, "", None, (), agent, "blocked", "max_retries", "gave up", 1, 0, (attempt,))
    (record,) = outcome_reflections(story)
    return record.model_copy(update={"created_at": at})


def success(title: str = "Fix the parser", at: datetime = DAY) -> OutcomeReflection:
    attempts = (
        AttemptStory(1, False, "test_parse failed", "test_failure", "sig", ("p.py",), None),
        AttemptStory(2, True, "guarded empty input", None, None, ("p.py",), None),
    )
    story = TaskStory("s1", "T-2", title, "", None, (), "coder", "closed", None, "done", 1, 1, attempts)
    (record,) = outcome_reflections(story)
    return record.model_copy(update={"created_at": at})


def test_a_failed_record_has_the_protocols_headings_and_round_trips() -> None:
    record = failed()
    text = to_markdown(record)

    assert text.startswith("# Reflection: 2026-03-01 - Researcher Agent - API timeout handling in the fetcher\n")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## What happened?",
        "## What went wrong?",
        "## Why did it go wrong?",
        "## What should I do differently?",
        "## Tactical rule candidate",
        "## Principle",
        "## Procedure",
    ]
    assert "\n1. " in text and "\n2. " in text
    assert text.rstrip().splitlines()[-1].startswith("<!-- goldenloop-record {")
    assert from_markdown(text) == record


def test_success_partial_and_decision_headings() -> None:
    done = to_markdown(success())
    assert done.startswith("# Procedure: 2026-03-01 - coder - Fix the parser\n")
    assert "## Strategy" in done and "## Why it worked" in done and "## Procedure\n\n1. " in done

    partial = failed().model_copy(update={"outcome": "partial", "why_it_went_wrong": None, "tactical_rule": None})
    headings = [line for line in to_markdown(partial).splitlines() if line.startswith("## ")]
    assert headings[:3] == ["## What happened?", "## What went wrong?", "## What should I do differently?"]

    choice = decision_reflection(session_id="s", task_id="T", agent="planner", title="Split it",
                                 decision="two subtasks", alternatives=["one", "three"], why="order matters")
    text = to_markdown(choice)
    assert text.startswith("# Decision: ")
    for heading in ("## What was the decision?", "## What alternatives existed?", "## Why was this option chosen?"):
        assert heading in text
    assert "- one\n- three" in text
    assert from_markdown(text) == choice


def test_text_that_would_close_the_comment_still_round_trips() -> None:
    record = failed().model_copy(update={"what_went_wrong": "a --> b <!-- c --", "note": "x-->y"})
    text = to_markdown(record)
    assert text.rstrip().splitlines()[-1].count("-->") == 1
    assert "<!-- c" not in text.split("<!-- goldenloop-record")[0]  # the body cannot open a comment
    assert from_markdown(text) == record
    assert from_markdown(text).model_extra == {"note": "x-->y"}


def test_a_secret_never_reaches_the_markdown(tmp_path: Path) -> None:
    record = failed(summary=f"auth failed with {SECRET} and password=Hunter2Secret!x")
    (path,) = write_markdown_view([record], tmp_path)
    text = path.read_text()
    assert SECRET not in text and "Hunter2Secret" not in text and "[REDACTED:" in text


def test_paths_follow_the_protocol_and_same_day_titles_are_numbered(tmp_path: Path) -> None:
    first, second = failed(), failed(at=DAY.replace(hour=11))
    other_day = failed(at=datetime(2026, 3, 2, tzinfo=UTC))

    paths = write_markdown_view([second, other_day, first], tmp_path)

    folder = tmp_path / "reflections" / "researcher-agent"
    assert sorted(p.relative_to(folder).as_posix() for p in paths) == [
        "2026-03-01-api-timeout-handling-in-the-2.md",
        "2026-03-01-api-timeout-handling-in-the.md",
        "2026-03-02-api-timeout-handling-in-the.md",
    ]
    assert from_markdown((folder / "2026-03-01-api-timeout-handling-in-the.md").read_text()) == first
    assert from_markdown((folder / "2026-03-01-api-timeout-handling-in-the-2.md").read_text()) == second


def test_regeneration_is_deterministic_and_leaves_a_hand_written_note_alone(tmp_path: Path) -> None:
    records = [failed(), failed(at=DAY.replace(hour=11)), success()]
    folder = tmp_path / "reflections" / "researcher-agent"
    folder.mkdir(parents=True)
    note = folder / "2026-03-01-my-own-notes.md"
    note.write_text("# My notes\n\nKeep an eye on the fetcher.\n")

    first = {p: p.read_bytes() for p in write_markdown_view(records, tmp_path)}
    second = {p: p.read_bytes() for p in write_markdown_view(list(reversed(records)), tmp_path)}

    assert first == second
    assert note.read_text() == "# My notes\n\nKeep an eye on the fetcher.\n"

    # The others' lines are gone from the JSONL (damaged by hand, say): their pages may be
    # the last readable copy, so they stay.
    write_markdown_view(records[:1], tmp_path)
    assert {p.name for p in (tmp_path / "reflections").rglob("*.md")} == {p.name for p in first} | {note.name}


def test_archived_records_go_under_the_year(tmp_path: Path) -> None:
    old = failed(at=datetime(2025, 6, 1, tzinfo=UTC))
    live = failed()

    paths = write_markdown_view([live], tmp_path, archived=[old, live])

    folder = tmp_path / "reflections" / "researcher-agent"
    assert set(paths) == {
        folder / "2026-03-01-api-timeout-handling-in-the.md",
        folder / "archive" / "2025" / "2025-06-01-api-timeout-handling-in-the.md",
    }


def test_from_markdown_refuses_a_page_without_a_record() -> None:
    with pytest.raises(ValueError):
        from_markdown("# just notes\n")


def test_a_page_written_when_a_task_ends_is_where_the_full_view_puts_it(tmp_path: Path) -> None:
    first, second = failed(at=DAY), failed(at=DAY.replace(hour=DAY.hour + 1))
    written = [write_page(first, tmp_path), write_page(second, tmp_path), write_page(second, tmp_path)]
    assert written[1] == written[2] != written[0]  # same day and title: -2; writing again: same page
    assert sorted(write_markdown_view([first, second], tmp_path)) == sorted(set(written))
    assert sorted(p.name for p in tmp_path.rglob("*.md")) == sorted(p.name for p in set(written))
