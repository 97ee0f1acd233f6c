"""One PostgreSQL database shared by a team's repositories: each store sees only its own
project's records, lessons travel between projects (labelled with theirs), and the calls
that run on every attempt stay index scans however many rows the team has written."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import psycopg
import pytest
from memory_fixtures import attempt, outcome

from orchestrator.cli import main
from orchestrator.loop.remember import lessons_block
from orchestrator.render import HumanLines
from reflection.lessons import LessonQuery
from reflection.postgres.connection import apply_schema
from reflection.postgres.lessons import (
    KEY_CANDIDATES_SQL,
    PostgresLessonIndex,
    nearest_vectors_query,
    vector_literal,
    weighted_text_query,
)
from reflection.postgres.schema import (
    VECTOR_COMPONENT,
    VECTOR_MIGRATIONS,
    vector_index_statements,
)
from reflection.postgres.store import (
    LIVE_PAGE_SQL,
    NO_END,
    RECENT_SQL,
    PostgresReflectionStore,
)

pytestmark = pytest.mark.postgres

APP, SHOP = "team/app", "team/shop"


@pytest.fixture
def stores(pg_url: str) -> Iterator[tuple[PostgresReflectionStore, PostgresReflectionStore]]:
    app, shop = PostgresReflectionStore(pg_url, project=APP), PostgresReflectionStore(pg_url, project=SHOP)
    yield app, shop
    app.close()
    shop.close()


def test_a_store_never_sees_or_moves_another_projects_records(stores) -> None:
    app, shop = stores
    old = datetime.now(UTC) - timedelta(days=400)
    app.append(attempt("sub-1", 1, created_at=old))
    app.append(attempt("sub-1", 2))
    theirs = outcome("T-1")
    app.append_outcome(theirs)
    assert shop.empty() is False  # the team's memory is not empty: a new project learns from it at once

    assert shop.recent("sub-1") == [] and shop.count() == 0 and list(shop.iterate()) == []
    assert shop.outcomes() == [] and shop.find(theirs.id) is None
    assert shop.prune(datetime.now(UTC)) == 0 and shop.archive([theirs.id]) == 0
    assert [r.attempt_number for r in app.recent("sub-1")] == [2, 1] and app.outcomes() == [theirs]

    mine = attempt("sub-1", 7)
    shop.append(mine)
    same_id = theirs.model_copy(update={"title": "the shop's own record"})  # an id two projects both use
    shop.append_outcome(same_id)
    assert shop.recent("sub-1") == [mine] and [r.title for r in shop.outcomes()] == ["the shop's own record"]
    assert app.find(theirs.id)["title"] == theirs.title


def test_lessons_of_another_project_are_ranked_and_named_in_the_prompt(stores, pg_url: str) -> None:
    app, shop = stores
    app.append_outcome(outcome("T-3", "Quote CSV fields that contain commas.", files=["src/export.py"]))
    shop.append_outcome(outcome("T-4", "Quote CSV fields before writing them.", files=["lib/csv.py"]))
    with PostgresLessonIndex(pg_url, project=SHOP) as index:
        ranked = index.rank(LessonQuery("write CSV fields with commas", exclude_task_id="T-9"), limit=3)
    assert {(r.lesson.project, r.lesson.task_id) for r in ranked} == {(APP, "T-3"), ("", "T-4")}
    block = lessons_block(ranked)
    assert f"task {APP}/T-3" in block and "task T-4)" in block
    assert "this project and others" in block


def test_memory_search_and_show_name_another_projects_lesson(stores, pg_url: str, tmp_path, monkeypatch,
                                                             capsys) -> None:
    app, _ = stores
    theirs = outcome("T-3", "Quote CSV fields that contain commas.", files=["src/export.py"])
    app.append_outcome(theirs)
    shop = tmp_path / "shop"
    (shop / ".openagents").mkdir(parents=True)
    (shop / ".openagents" / "project.json").write_text(orjson.dumps({"projectId": SHOP}).decode())
    monkeypatch.setenv("GOLDENLOOP_MEMORY_STORE", pg_url)

    assert main(["memory", "search", "CSV commas", "--dir", str(shop)]) == 0
    assert f"{APP}/T-3" in capsys.readouterr().out
    assert main(["memory", "show", theirs.id, "--dir", str(shop)]) == 0  # the id search listed
    shown = capsys.readouterr().out
    assert f"a lesson of project {APP}, task T-3" in shown and "Quote CSV fields" in shown
    assert main(["memory", "show", "no-such-id", "--dir", str(shop)]) == 1


def test_the_console_names_the_project_of_a_lesson_it_showed() -> None:
    out = io.StringIO()
    HumanLines(out)({"event": "lessons_injected", "lessons": [
        {"kind": "failed", "fromTask": "T-3", "fromProject": APP}, {"kind": "success", "fromTask": "T-4"}]})
    assert out.getvalue() == f"  lessons from earlier tasks in the first prompt: failed of {APP}/T-3, success of T-4\n"


# -- indexes, not scans --------------------------------------------------------------------


def plan_of(conn: psycopg.Connection, sql: str, params: tuple[Any, ...]) -> list[tuple[str, str | None]]:
    """(node type, index name) of every node of the plan the server chose."""
    (plan,), = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", params).fetchall()
    found: list[tuple[str, str | None]] = []

    def walk(node: dict[str, Any]) -> None:
        found.append((node["Node Type"], node.get("Index Name")))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return found


def uses_index(plan: list[tuple[str, str | None]], index: str | None = None) -> bool:
    """The plan reads through `index` (any index when None), and scans no table whole."""
    used = [name for _, name in plan if name is not None]
    return bool(used) and (index is None or index in used) and not any(node == "Seq Scan" for node, _ in plan)


@pytest.fixture(scope="module")
def big_memory(pg_server) -> Iterator[psycopg.Connection]:
    """A team's database with 40,000 attempt reflections of two projects, 10,000 lessons
    (a few hundred characters each, as real ones are) and 3,000 of them with a vector."""
    url = pg_server.new_database("indexes")
    PostgresReflectionStore(url, project=APP).close()  # the tables
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO goldenloop_reflections (project, id, kind, subtask_id, task_id, created_at, body)"
            " SELECT CASE WHEN mod(g, 2) = 0 THEN %s ELSE %s END, 'a' || g, 'attempt', 'sub-' || mod(g, 4000), 't',"
            " now() - g * interval '1 minute', '{}'::jsonb FROM generate_series(1, 40000) AS g", (APP, SHOP))
        conn.execute(
            "INSERT INTO goldenloop_reflections (project, id, kind, task_id, body)"
            " SELECT %s, 'o' || g, 'outcome', 'T-' || g, '{}'::jsonb FROM generate_series(1, 10000) AS g", (APP,))
        conn.execute(
            "INSERT INTO goldenloop_lessons (record_seq, project, lesson_id, task_id, lesson, search)"
            " SELECT seq, project, id, task_id, '[]', 'parser word' || mod(seq, 5000) || repeat(' common filler text', 25)"
            " FROM goldenloop_reflections WHERE kind = 'outcome'")
        conn.execute("INSERT INTO goldenloop_lesson_keys (key, record_seq) SELECT 'f:src/mod' || mod(record_seq, 3000)"
                     " || '.py', record_seq FROM goldenloop_lessons")
        apply_schema(conn, VECTOR_COMPONENT, VECTOR_MIGRATIONS)
        conn.execute(
            "INSERT INTO goldenloop_lesson_vectors (record_seq, dims, embedding) SELECT record_seq, 8,"
            " ARRAY[sin(record_seq), cos(record_seq), sin(2 * record_seq), cos(3 * record_seq), 1, 0.5,"
            " sin(record_seq / 7.0), cos(record_seq / 5.0)]::vector FROM goldenloop_lessons LIMIT 3000")
        for statement in vector_index_statements(8):
            conn.execute(statement)
        conn.execute("ANALYZE")
        yield conn


def test_recent_and_the_pages_of_iterate_are_index_scans(big_memory: psycopg.Connection) -> None:
    assert uses_index(plan_of(big_memory, RECENT_SQL, (APP, "sub-42", NO_END, 3)), "goldenloop_reflections_recent")
    page = plan_of(big_memory, LIVE_PAGE_SQL, (APP, "attempt", 20000, NO_END, 1000))
    assert uses_index(page)  # the live-records index, or the primary key in append order


def test_ranking_by_words_and_by_keys_are_index_scans(big_memory: psycopg.Connection) -> None:
    words = plan_of(big_memory, *weighted_text_query({"word42": 2.0, "word4242": 3.0}, (APP, "T-1")))
    assert uses_index(words, "goldenloop_lessons_text")
    keys = plan_of(big_memory, KEY_CANDIDATES_SQL, (["f:src/mod7.py", "b:mod7.py"], APP, "T-1", 50))
    assert uses_index(keys, "goldenloop_lesson_keys_pkey")


def test_ranking_by_meaning_is_an_hnsw_index_scan(big_memory: psycopg.Connection) -> None:
    plan = plan_of(big_memory, *nearest_vectors_query(8, vector_literal([0.1] * 8), (APP, "T-1")))
    assert uses_index(plan, "goldenloop_lesson_vectors_hnsw_8")


def test_a_record_with_a_nul_character_is_kept_with_it_replaced(stores) -> None:
    app, _ = stores
    record = attempt().model_copy(update={"analysis": "the tool printed \x00 in its output"})
    app.append(record)
    assert app.recent("sub-1")[0].analysis == "the tool printed \ufffd in its output"
    assert orjson.loads(orjson.dumps(app.find(record.id)))["id"] == record.id
