"""The PostgreSQL plumbing the memory and the fleet share: a connection that outlives a
server restart, schemas applied once and upgraded in steps, URLs that never show a password."""

from __future__ import annotations

import pytest

from reflection.postgres.connection import Database, PostgresUnavailable, apply_schema, password_in, safe_url

STEPS = ["CREATE TABLE a(x int PRIMARY KEY); CREATE TABLE b(y int)", "ALTER TABLE b ADD COLUMN z int"]


@pytest.mark.postgres
def test_work_goes_on_after_the_server_restarts_and_the_schema_is_applied_once(pg_url, pg_server) -> None:
    with Database(pg_url, setup=lambda conn: apply_schema(conn, "demo", STEPS)) as db:
        db.run(lambda conn: conn.execute("INSERT INTO a VALUES (1)"))
        pg_server.restart()  # immediate: as a crash would
        db.run(lambda conn: conn.execute("INSERT INTO a VALUES (2) ON CONFLICT DO NOTHING"))
        assert db.run(lambda conn: conn.execute("SELECT count(*) FROM a").fetchone()[0]) == 2
        assert db.run(lambda conn: conn.execute("SELECT version FROM goldenloop_schema").fetchone()[0]) == 2


@pytest.mark.postgres
def test_a_database_set_up_by_a_newer_goldenloop_is_refused_in_one_sentence(pg_url) -> None:
    with Database(pg_url, setup=lambda conn: apply_schema(conn, "demo", STEPS)) as db:
        db.run(lambda conn: conn.execute("SELECT 1"))
    with Database(pg_url, setup=lambda conn: apply_schema(conn, "demo", STEPS[:1])) as older:
        with pytest.raises(PostgresUnavailable, match="newer than this goldenloop knows"):
            older.run(lambda conn: conn.execute("SELECT 1"))


def test_a_server_that_is_not_there_is_one_sentence_without_the_password() -> None:
    with Database("postgresql://bob:s3cret@/nowhere?host=/nonexistent-socket-dir", retry_for=0.2) as db:
        with pytest.raises(PostgresUnavailable) as caught:
            db.run(lambda conn: conn.execute("SELECT 1"))
    assert "s3cret" not in str(caught.value) and "\n" not in str(caught.value)


def test_urls_are_shown_without_their_password() -> None:
    assert safe_url("postgresql://bob:s3cret@db:5432/x?sslmode=require") == "postgresql://bob:***@db:5432/x?sslmode=require"
    assert safe_url("postgresql://db/x?password=s3&host=/tmp/y") == "postgresql://db/x?password=***&host=/tmp/y"
    assert password_in("postgresql://bob:s3cret@db/x")
    assert not password_in("postgresql://postgres:@/postgres?host=/tmp/x")  # pgserver's: an empty one


@pytest.mark.postgres
def test_a_worker_checks_a_databases_schema_once_and_a_command_on_every_connection(
    pg_url, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reflection.postgres import connection

    def connections(migrations: list[str]) -> None:
        with Database(pg_url, setup=lambda conn: apply_schema(conn, "demo", migrations)) as db:
            db.run(lambda conn: conn.execute("SELECT 1"))

    connections(STEPS)
    monkeypatch.setattr(connection, "_LEARNT", None)
    connection.once_per_process()  # what `goldenloop worker` does
    with pytest.raises(PostgresUnavailable):  # the first connection of this "worker" is checked
        connections(STEPS[:1])
    with Database(pg_url) as db:
        db.run(lambda conn: conn.execute("UPDATE goldenloop_schema SET version = 1 WHERE component = 'demo'"))
    connections(STEPS[:1])  # now it fits: checked once ...
    with Database(pg_url) as db:
        db.run(lambda conn: conn.execute("UPDATE goldenloop_schema SET version = 2 WHERE component = 'demo'"))
    connections(STEPS[:1])  # ... and not again for the worker's next job
    monkeypatch.setattr(connection, "_LEARNT", None)  # a command: every connection checks
    with pytest.raises(PostgresUnavailable, match="newer than this goldenloop knows"):
        connections(STEPS[:1])
