import threading, time
import pytest
from reflection.postgres.connection import Database, apply_schema, safe_url, password_in, PostgresUnavailable

pytestmark = pytest.mark.postgres

def test_schema_and_restart(pg_url, pg_server):
    db = Database(pg_url, setup=lambda c: apply_schema(c, "t", ["CREATE TABLE a(x int primary key); CREATE TABLE b(y int)", "ALTER TABLE b ADD COLUMN z int"]))
    db.run(lambda c: c.execute("INSERT INTO a VALUES (1)"))
    pg_server.restart()
    db.run(lambda c: c.execute("INSERT INTO a VALUES (2) ON CONFLICT DO NOTHING"))
    assert db.run(lambda c: c.execute("select count(*) from a").fetchone()[0]) == 2
    assert db.run(lambda c: c.execute("select version from goldenloop_schema").fetchone()[0]) == 2

def test_urls():
    assert safe_url("postgresql://bob:secret@db:5432/x?sslmode=require") == "postgresql://bob:***@db:5432/x?sslmode=require"
    assert password_in("postgresql://bob:secret@db/x") and not password_in("postgresql://postgres:@/postgres?host=/tmp/x")
    assert "s3" not in safe_url("postgresql://db/x?password=s3&host=/tmp/y")
