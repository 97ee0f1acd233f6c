"""The fleet's commands as a user meets them: one sentence and an exit code for what they got
wrong, never a traceback or a password; and a worker told to stop gives its task back."""

from __future__ import annotations

import signal

import pytest
from fleetkit import (
    SLOW_CHECK,
    alive,
    kill_group,
    make_remote,
    query,
    remote_tasks,
    reply,
    start_worker,
    subjects,
    task,
    wait_exit,
    wait_until,
    worker_log,
    write_script,
)

from orchestrator.cli import main

UNREACHABLE = "postgresql://bob:s3cret@127.0.0.1:1/fleet"  # nothing listens on port 1


def err_of(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return captured.err


def test_a_worker_without_a_queue_is_told_where_the_queue_comes_from(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GOLDENLOOP_QUEUE", raising=False)

    assert main(["worker", "--workdir", str(tmp_path)]) == 2

    assert err_of(capsys).strip() == "worker: no queue: pass --queue postgresql://... or set GOLDENLOOP_QUEUE"


@pytest.mark.parametrize("command", [["worker"], ["enqueue", "file:///nowhere.git"], ["fleet", "status"]])
def test_an_unreachable_database_is_one_sentence_without_its_password(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setenv("GOLDENLOOP_QUEUE", UNREACHABLE)  # from the environment, as the docs advise
    if command[0] == "worker":
        monkeypatch.setenv("PGPASSWORD", "other-secret")

    assert main([*command, "--workdir", str(tmp_path)] if command[0] != "fleet" else command) == 2

    err = err_of(capsys)
    assert err.startswith(command[0]) and "cannot connect to PostgreSQL at postgresql://bob:***@127.0.0.1:1/" in err
    assert len(err.strip().splitlines()) == 1
    assert "s3cret" not in err and "other-secret" not in err


@pytest.mark.postgres
def test_a_repository_that_cannot_be_cloned_is_named_and_nothing_is_queued(tmp_path, pg_url, capsys):
    good = make_remote(tmp_path, "good", [task("T-1", "Add one")], "scripted/none.json")
    missing = (tmp_path / "missing.git").as_uri()

    assert main(["enqueue", "--queue", pg_url, "--workdir", str(tmp_path / "wd"), good, missing]) == 2

    err = err_of(capsys)
    assert err.startswith(f"enqueue: cannot clone or fetch {missing}: git clone failed: ")
    assert len(err.strip().splitlines()) == 1
    assert query(pg_url, "SELECT count(*) FROM procrastinate_jobs") == [(0,)]
    assert query(pg_url, "SELECT count(*) FROM goldenloop_runs") == [(0,)]


@pytest.mark.postgres
def test_a_repository_url_with_a_password_is_refused_before_it_reaches_the_queue(tmp_path, pg_url, capsys):
    leaky = "https://ann:tok3n@example.invalid/a.git"
    assert main(["enqueue", "--queue", pg_url, "--workdir", str(tmp_path), leaky]) == 2

    err = err_of(capsys)
    assert "https://ann:***@example.invalid/a.git carries a password" in err and "tok3n" not in err


@pytest.mark.postgres
def test_a_backlog_with_nothing_ready_queues_nothing_and_says_so(tmp_path, pg_url, capsys, monkeypatch):
    monkeypatch.setenv("GOLDENLOOP_QUEUE", pg_url)
    done = dict(task("T-1", "Done already"), status="closed")
    remote = make_remote(tmp_path, "idle", [done, task("T-2", "Waits", deps=["T-3"]), task("T-3", "Blocked")
                                            | {"status": "blocked"}], "scripted/none.json")

    assert main(["enqueue", "--workdir", str(tmp_path / "wd"), remote]) == 3

    assert "queued 0" in capsys.readouterr().out
    assert main(["fleet", "status", "nosuchrun"]) == 1
    assert err_of(capsys).strip() == "fleet status: no run nosuchrun on this queue"


# The check writes down the names of the variables it was given.
SEEN_ENV = """pathlib.Path({path!r}).write_text("\\n".join(sorted(__import__("os").environ)))
"""


@pytest.mark.postgres
def test_sigterm_puts_the_task_in_flight_back_on_the_queue_and_exits_130(tmp_path, pg_url):
    marker, seen = tmp_path / "check.pid", tmp_path / "check.env"
    model = write_script(tmp_path / "script.json", [reply("S-1", "slow.py", "SLOW = True\n")])
    remote = make_remote(tmp_path, "one", [task("S-1", "Add slow")], model,
                         check_extra=SEEN_ENV.format(path=str(seen)) + SLOW_CHECK.format(marker=str(marker)))
    assert main(["enqueue", "--queue", pg_url, "--workdir", str(tmp_path / "wd"), remote]) == 0
    # The queue and a password from the environment, as the docs advise: kept from the checks.
    worker = start_worker(None, tmp_path / "machine", "w1", tmp_path / "logs", "--memory", "project",
                          env={"GOLDENLOOP_QUEUE": pg_url, "PGPASSWORD": "not-for-children"})
    try:
        check = int(wait_until(lambda: marker.exists() and marker.read_text(), "the task's check to start"))
        worker.send_signal(signal.SIGTERM)
        (code,) = wait_exit([worker])
    finally:
        worker.kill()
        if marker.exists() and marker.read_text():
            kill_group(int(marker.read_text()))

    log = worker_log(tmp_path / "logs", "w1")
    assert code == 130, log
    assert "stopping: the task in flight goes back to the queue" in log and "Traceback" not in log
    assert not alive(check)  # the check's whole process group was stopped
    names = seen.read_text().split()
    assert "PATH" in names and {"GOLDENLOOP_QUEUE", "PGPASSWORD"}.isdisjoint(names)
    assert "not-for-children" not in log
    assert query(pg_url, "SELECT task_id, status FROM goldenloop_outcomes") == [("S-1", "interrupted")]
    assert query(pg_url, "SELECT status::text, scheduled_at <= now() FROM procrastinate_jobs") == [("todo", True)]
    assert remote_tasks(remote)["S-1"]["status"] == "open"
    assert subjects(remote) == ["project under test", "initial"]  # nothing of the stopped attempt was pushed
    assert list((tmp_path / "machine" / "workers").iterdir()) == []  # a clean exit leaves no worktree
