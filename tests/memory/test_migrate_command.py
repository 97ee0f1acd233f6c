"""`goldenloop memory migrate`: a project's JSONL memory into a team's PostgreSQL and back
into a fresh clone's files, idempotent both ways, a password never printed."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import orjson
import pytest
from projects import outcome_record

from orchestrator.cli import main
from reflection.postgres.lessons import PostgresLessonIndex
from reflection.postgres.store import PostgresReflectionStore
from reflection.store import JsonlReflectionStore

pytestmark = pytest.mark.postgres

ATTEMPTS = [{"id": f"A-{n}", "sessionId": "s", "taskId": "T-9", "subtaskId": "T-9.1", "attemptNumber": n,
             "category": "root_cause", "analysis": "Off by one in the loop.", "suggestion": "Use range(n).",
             "actionItems": [], "confidence": 0.7, "createdAt": f"2026-10-0{n}T00:00:00Z", "reviewer": "ana"}
            for n in (1, 2)]


USES = [{"lessonId": "R-1", "taskId": "T-5", "attempt": 1, "passed": True, "at": "2026-10-05T09:00:00Z"},
        {"lessonId": "R-2", "taskId": "T-5", "attempt": 1, "passed": False, "at": "2026-10-05T09:00:00.250000Z"}]


def project(folder: Path, project_id: str = "calc") -> Path:
    memory = folder / ".openagents" / "memory"
    memory.mkdir(parents=True)
    (folder / ".openagents" / "project.json").write_text(json.dumps({"projectId": project_id}))
    return folder


def with_password(url: str) -> str:
    """The same database, with a password in the URL (the test server trusts local users)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.replace("postgres:@", "postgres:s3cret-pw@")))


def migrate(folder: Path, *args: str) -> int:
    return main(["memory", "migrate", "--dir", str(folder), "--json", *args])


def bodies(folder: Path) -> list[tuple[dict, bool]]:
    store = JsonlReflectionStore(folder / ".openagents" / "memory" / "reflections.jsonl")
    return sorted(((body, archived) for body, archived in store.raw_records() if body), key=lambda p: p[0]["id"])


def uses_of(folder: Path) -> list[dict]:
    path = folder / ".openagents" / "memory" / "lesson-uses.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_a_jsonl_memory_goes_to_postgresql_and_back_into_a_fresh_clone(tmp_path: Path, pg_url: str, capsys) -> None:
    one = project(tmp_path / "one")
    memory = one / ".openagents" / "memory"
    lines = [*map(orjson.dumps, [ATTEMPTS[0], outcome_record(1), ATTEMPTS[1], outcome_record(2)]), b"{not json", b'{"kind":"note"}']
    (memory / "reflections.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (memory / "archive").mkdir()
    (memory / "archive" / "reflections-2026.jsonl").write_bytes(orjson.dumps(outcome_record(0)) + b"\n")
    (memory / "lesson-uses.jsonl").write_bytes(b"".join(orjson.dumps(use) + b"\n" for use in USES) + b"torn\n")
    url = with_password(pg_url)

    assert migrate(one, "--to", url) == 0
    out = capsys.readouterr().out
    report = json.loads(out)
    assert "s3cret-pw" not in out and "***" in report["to"]
    assert (report["copied"], report["alreadyThere"], report["skipped"]) == (5, 0, 2)
    assert (report["usesCopied"], report["usesSkipped"]) == (2, 1)

    with PostgresReflectionStore(pg_url, project="calc") as store:
        assert [r.id for r in store.outcomes()] == ["R-1", "R-2"]
        assert [r.id for r in store.archived_outcomes()] == ["R-0"]  # archived stays archived
        assert [r.id for r in store.iterate()] == ["A-1", "A-2"] and store.find("A-1") == ATTEMPTS[0]
    with PostgresLessonIndex(pg_url, project="calc") as index:
        assert index.usefulness("R-1") == (1, 1) and index.usefulness("R-2") == (1, 0)
        assert {r.lesson.id for r in index.search("timezone ISO dates")} == {"R-1", "R-2"}  # R-0 is archived

    assert migrate(one, "--to", url) == 0  # again: nothing new
    again = json.loads(capsys.readouterr().out)
    assert (again["copied"], again["alreadyThere"], again["usesCopied"], again["usesAlreadyThere"]) == (0, 5, 0, 2)

    two = project(tmp_path / "two")  # another clone of the same project, on another machine
    assert migrate(two, "--from", url, "--to", "jsonl") == 0
    back = json.loads(capsys.readouterr().out)
    assert (back["copied"], back["usesCopied"]) == (5, 2)
    assert bodies(two) == bodies(one)  # every key, unknown ones too, and what was archived
    assert uses_of(two) == USES
    assert migrate(two, "--from", url, "--to", "jsonl") == 0
    assert json.loads(capsys.readouterr().out)["copied"] == 0
    assert len(uses_of(two)) == 2


def test_one_sentence_and_exit_2_for_what_cannot_be_copied(tmp_path: Path, pg_url: str, capsys) -> None:
    one = project(tmp_path / "one")
    url = with_password(pg_url)

    assert migrate(one, "--from", url, "--to", pg_url) == 2
    err = capsys.readouterr().err
    assert "nothing to copy" in err and "s3cret-pw" not in err and len(err.strip().splitlines()) == 1

    assert migrate(one, "--to", "jsonl") == 2  # the default source is the JSONL files too
    assert "nothing to copy" in capsys.readouterr().err

    assert migrate(one, "--to", "mysql://db/x") == 2
    assert "postgresql://" in capsys.readouterr().err

    assert migrate(one, "--to", "postgresql://nobody:pw@/none?host=/nonexistent-socket-dir") == 2
    err = capsys.readouterr().err
    assert "cannot connect" in err and ":pw@" not in err and "Traceback" not in err

    assert migrate(one, "--to", "env:GOLDENLOOP_TEST_UNSET_VARIABLE") == 2
    assert "GOLDENLOOP_TEST_UNSET_VARIABLE" in capsys.readouterr().err
