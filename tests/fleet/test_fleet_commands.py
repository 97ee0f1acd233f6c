"""The fleet's commands as a user meets them: one sentence and an exit code for what they got
wrong, never a traceback or a password; a worker told to stop gives its task back, and a
run cancelled with --abort stops the task in flight the same way."""

from __future__ import annotations

import io
import logging
import signal

import pytest
from fleetkit import (
    CALL_COST,
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
from orchestrator.fleet.logs import LIBRARIES, quiet_queue_logs

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
def test_a_backlog_with_nothing_ready_queues_nothing_and_creates_no_run(tmp_path, pg_url, capsys, monkeypatch):
    monkeypatch.setenv("GOLDENLOOP_QUEUE", pg_url)
    done = dict(task("T-1", "Done already"), status="closed")
    remote = make_remote(tmp_path, "idle", [done, task("T-2", "Waits", deps=["T-3"]), task("T-3", "Blocked")
                                            | {"status": "blocked"}], "scripted/none.json")

    assert main(["enqueue", "--workdir", str(tmp_path / "wd"), remote]) == 3

    out = capsys.readouterr().out
    assert "queued 0" in out and "no ready task in any repository; no run was created" in out
    assert query(pg_url, "SELECT count(*) FROM goldenloop_runs") == [(0,)]  # no empty run hides the real night's
    assert main(["fleet", "status"]) == 1
    assert err_of(capsys).strip() == "fleet status: no run on this queue yet"


@pytest.mark.postgres
def test_a_run_id_that_names_no_run_is_refused_in_one_sentence_before_anything_is_queued(tmp_path, pg_url, capsys,
                                                                                        monkeypatch):
    monkeypatch.setenv("GOLDENLOOP_QUEUE", pg_url)
    remote = make_remote(tmp_path, "one", [task("T-1", "Add one")], "scripted/none.json")
    workdir = str(tmp_path / "wd")

    assert main(["enqueue", "--workdir", workdir, remote, "--run", "20990101T000000Z-abcdef"]) == 1
    assert err_of(capsys).strip() == "enqueue: no run 20990101T000000Z-abcdef on this queue"
    assert main(["overnight", "--queue", pg_url, "--workdir", workdir, remote, "--run", "20990101T000000Z-nope"]) == 1
    assert err_of(capsys).strip() == ("overnight: '20990101T000000Z-nope' is not a run id: goldenloop's look like "
                                      "20261124T220000Z-3fa2c1")
    assert query(pg_url, "SELECT count(*) FROM goldenloop_runs") == [(0,)]
    assert query(pg_url, "SELECT count(*) FROM procrastinate_jobs") == [(0,)]

    out = tmp_path / "reports" / "a" / "b"
    assert main(["fleet", "report", "../../etc", "--out", str(out)]) == 1
    assert err_of(capsys).strip() == "fleet report: '../../etc' is not a run id: goldenloop's look like " \
                                     "20261124T220000Z-3fa2c1"
    assert not (tmp_path / "reports").exists()  # nothing written, least of all two levels above --out
    assert main(["fleet", "status", "nosuchrun"]) == 1
    assert "'nosuchrun' is not a run id" in err_of(capsys)


def test_a_worker_says_a_database_outage_once_and_not_the_listener_noise_of_a_stop():
    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level,
                    logging.getLogger(name).propagate) for name in LIBRARIES}
    stream = io.StringIO()
    try:
        quiet_queue_logs(stream)
        pool = logging.getLogger("psycopg.pool")
        for _ in range(5):  # psycopg's pool, about every second while the database is away
            pool.warning("error connecting in %r: %s", "pool-1", "connection failed: the database is starting up")
        from procrastinate.exceptions import ConnectorException

        try:
            raise ConnectorException()
        except ConnectorException as exc:  # what Procrastinate logs at a stop after any restart
            logging.getLogger("procrastinate.utils").exception(f"listener error: {exc!r}", exc_info=exc)
        logging.getLogger("procrastinate.worker").error("Side task heartbeat failed")  # real trouble still shows
    finally:
        for name, (handlers, level, propagate) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers[:], logger.level, logger.propagate = handlers, level, propagate

    assert stream.getvalue().splitlines() == [
        "WARNING: error connecting in 'pool-1': connection failed: the database is starting up",
        "ERROR: Side task heartbeat failed",
    ]


# The check writes down the names of the variables it was given.
SEEN_ENV = """pathlib.Path({path!r}).write_text("\\n".join(sorted(__import__("os").environ)))
"""


@pytest.mark.postgres
def test_sigterm_puts_the_task_in_flight_back_and_a_cancel_with_abort_stops_it_too(tmp_path, pg_url, capsys):
    marker, seen, logs = tmp_path / "check.pid", tmp_path / "check.env", tmp_path / "logs"
    model = write_script(tmp_path / "script.json", [reply("S-1", "slow.py", "SLOW = True\n")])
    remote = make_remote(tmp_path, "one", [task("S-1", "Add slow")], model,
                         check_extra=SEEN_ENV.format(path=str(seen)) + SLOW_CHECK.format(marker=str(marker)))
    assert main(["enqueue", "--queue", pg_url, "--workdir", str(tmp_path / "wd"), remote]) == 0
    run_id = capsys.readouterr().out.split()[1]  # "run <id>"
    # The queue and a password from the environment, as the docs advise: kept from the checks.
    worker = start_worker(None, tmp_path / "machine", "w1", logs, "--memory", "project",
                          env={"GOLDENLOOP_QUEUE": pg_url, "PGPASSWORD": "not-for-children"})
    try:
        check = int(wait_until(lambda: marker.exists() and marker.read_text(), "the task's check to start"))
        worker.send_signal(signal.SIGTERM)
        (code,) = wait_exit([worker])
    finally:
        worker.kill()
        if marker.exists() and marker.read_text():
            kill_group(int(marker.read_text()))

    log = worker_log(logs, "w1")
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

    # Another worker takes the task again; this time the run is cancelled under it, --abort.
    marker.unlink()
    second = start_worker(pg_url, tmp_path / "machine", "w2", logs, "--memory", "project", until_empty=False)
    try:
        check = int(wait_until(lambda: marker.exists() and marker.read_text(), "the check to start again", [second]))
        assert main(["fleet", "status", "--queue", pg_url]) == 0
        assert "  workers: 1 alive; w2 runs one S-1\n" in capsys.readouterr().out
        assert main(["fleet", "cancel", "--queue", pg_url, "--abort"]) == 0
        said = capsys.readouterr().out
        wait_until(lambda: query(pg_url, "SELECT status::text FROM procrastinate_jobs") == [("aborted",)],
                   "the job to be aborted", [second])
        second.send_signal(signal.SIGTERM)  # idle now: it has no task to put back
        (code,) = wait_exit([second])
    finally:
        second.kill()
        if marker.exists() and marker.read_text():
            kill_group(int(marker.read_text()))

    log = worker_log(logs, "w2")
    assert said.startswith(f"run {run_id} cancelled: no task is queued into it any more; 0 waiting job(s) cancelled")
    assert "1 running job(s) asked to stop, their tasks put back to open: one S-1" in said
    assert code == 130 and "one S-1: aborted through the queue; the task was put back to open" in log
    assert "stopping: no task was in flight" in log and "goes back to the queue" not in log, log
    assert not alive(check)
    assert query(pg_url, "SELECT status, reason FROM goldenloop_outcomes ORDER BY id")[1] == (
        "interrupted", "the job was aborted (goldenloop fleet cancel --abort); the task was put back to open")
    # Both runs cut short made their model call: it is on their rows and in the run's spending, budget or not.
    assert query(pg_url, "SELECT attempts, calls FROM goldenloop_outcomes ORDER BY id") == [(1, 1), (1, 1)]
    (spent,), = query(pg_url, "SELECT spent_cost FROM goldenloop_runs")
    assert spent == pytest.approx(2 * CALL_COST)
    assert remote_tasks(remote)["S-1"]["status"] == "open" and subjects(remote) == ["project under test", "initial"]
    assert main(["enqueue", "--queue", pg_url, "--workdir", str(tmp_path / "wd"), remote, "--run", run_id]) == 1
    assert err_of(capsys).strip() == f"enqueue: run {run_id} was cancelled: leave out --run to start a new one"
