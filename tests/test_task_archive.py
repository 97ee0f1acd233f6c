"""A long backlog's closed tasks move to the archive: nothing lost, still found."""

from __future__ import annotations

from pathlib import Path

import orjson
from projects import FIX_ADD, do_one_task, git, make_project, task, tasks_on_disk

from orchestrator.task_archive import archive_closed_tasks
from orchestrator.tasks import TaskBoard


def closed(n: int, **extra) -> dict:
    return task(f"OLD-{n}", f"old task {n}", status="closed", closedAt=f"2026-10-{1 + n % 28:02d}T00:00:{n % 60:02d}Z",
                closeReason="done", **extra)


def backlog(tmp_path: Path, lines: list[bytes]) -> tuple[Path, Path]:
    path = tmp_path / ".openagents" / "tasks.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(lines))
    return path, tmp_path / ".openagents" / "archive"


def test_the_oldest_closed_tasks_move_line_for_line_and_nothing_is_lost(tmp_path: Path) -> None:
    lines = [orjson.dumps(closed(n)) + b"\n" for n in range(30)]
    lines.insert(7, b'{"id": "T-open", "status": "open", "title": "still to do"}\n')  # spacing kept
    lines.insert(9, b"not json at all\n")
    path, folder = backlog(tmp_path, lines)

    assert archive_closed_tasks(path, folder, over=20) == 26  # the newest 20 // 5 = 4 closed stay

    live = path.read_bytes().splitlines(keepends=True)
    [archive] = folder.glob("tasks-*.jsonl")
    moved = archive.read_bytes().splitlines(keepends=True)
    assert sorted(live + moved) == sorted(lines)  # every line, byte for byte, in one of the files
    assert b'{"id": "T-open", "status": "open", "title": "still to do"}\n' in live
    assert b"not json at all\n" in live
    kept = {orjson.loads(line)["closedAt"] for line in live if b"closed" in line}
    gone = {orjson.loads(line)["closedAt"] for line in moved}
    assert min(kept) >= max(gone)  # the most recently closed stayed
    assert archive_closed_tasks(path, folder, over=20) == 0  # nothing more to move


def test_below_the_threshold_or_switched_off_nothing_moves(tmp_path: Path) -> None:
    lines = [orjson.dumps(closed(n)) + b"\n" for n in range(30)]
    path, folder = backlog(tmp_path, lines)
    assert archive_closed_tasks(path, folder, over=30) == 0
    assert archive_closed_tasks(path, folder, over=0) == 0
    assert path.read_bytes() == b"".join(lines) and not folder.exists()


def test_a_move_killed_halfway_leaves_every_task_readable(tmp_path: Path) -> None:
    lines = [orjson.dumps(closed(n)) + b"\n" for n in range(30)]
    path, folder = backlog(tmp_path, lines)
    folder.mkdir()
    torn = folder / "tasks-2026.jsonl"
    torn.write_bytes(lines[0] + lines[1][:25])  # a kill during the append: a torn last line

    archive_closed_tasks(path, folder, over=20)

    board = TaskBoard(path, archive=folder)
    for n in range(30):
        assert board.get(f"OLD-{n}").status == "closed"  # in tasks.jsonl or in the archive
    for line in torn.read_bytes().splitlines()[2:]:
        assert orjson.loads(line)["id"].startswith("OLD-")  # the next append began a new line


def test_a_run_archives_and_still_honours_dependencies_on_archived_tasks(git_repo: Path, capsys) -> None:
    old = [closed(n) for n in range(12)]
    waiting = task("T-2", "after the old ones", deps=[{"id": "OLD-0", "type": "blocks"}])
    repo = make_project(git_repo, [{"reply": FIX_ADD}], tasks=[*old, waiting],
                        config={"archiveClosedOver": 10})

    assert do_one_task(repo, "--task", "OLD-11") == 3  # the newest closed stay in tasks.jsonl
    assert "moved 10 closed task(s)" in capsys.readouterr().out
    assert do_one_task(repo) == 0  # T-2 ran: OLD-0 counts as closed from the archive

    on_disk = tasks_on_disk(repo)
    assert on_disk["T-2"]["status"] == "closed"
    assert "OLD-0" not in on_disk and len([t for t in on_disk if t.startswith("OLD-")]) == 2
    archived = (repo / ".openagents" / "archive").glob("tasks-*.jsonl")
    assert {orjson.loads(line)["id"] for f in archived for line in f.read_bytes().splitlines()} == {
        f"OLD-{n}" for n in range(12)} - set(on_disk)
    assert "archive/tasks-" in git(repo, "show", "--name-only", "--format=", "HEAD")  # committed
    assert git(repo, "status", "--porcelain") == ""
    assert do_one_task(repo, "--task", "OLD-0") == 3  # archived: still known, closed, not ready
    assert "task OLD-0 is archived (closed long ago); add it anew" in capsys.readouterr().err
