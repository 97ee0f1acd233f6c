"""The history's files: no link is followed, only regular files are used, and one project
whose files stall never holds up another."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import anyio
import pytest
from apikit import HISTORY, REFLECT, Serve, history_file, reflect_body

from orchestrator.git.repo import Repo

pytestmark = pytest.mark.anyio

MEMORY = Path(".openagents") / "memory"


def _tree(folder: Path) -> dict[str, bytes | None]:
    return {str(p): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("link", [
    ".openagents",  # to another folder inside the root: still not followed
    ".openagents/memory",
    ".openagents/memory/reflect-history.jsonl",
    ".openagents/memory/reflect-history.jsonl.lock",
])
async def test_a_link_on_the_way_to_the_history_is_refused(asgi: Serve, root: Path, project: Path,
                                                          link: str) -> None:
    outside = root.parent / "outside"
    (outside / "memory").mkdir(parents=True)
    (outside / "memory" / "reflect-history.jsonl").write_bytes(b'{"reflectionId": "r-1", "sessionId": "s"}\n')
    inside = root / "shared"
    (inside / "memory").mkdir(parents=True)
    targets = {".openagents": inside, ".openagents/memory": outside / "memory",
               ".openagents/memory/reflect-history.jsonl": outside / "memory" / "reflect-history.jsonl",
               ".openagents/memory/reflect-history.jsonl.lock": outside / "lock"}  # dangling: O_CREAT would make it
    (project / link).parent.mkdir(parents=True, exist_ok=True)
    (project / link).symlink_to(targets[link])
    before = _tree(outside), _tree(inside)
    async with asgi() as client:
        answers = [await client.post(REFLECT, json=reflect_body(project)),
                   await client.get(HISTORY, params={"projectPath": str(project)}),
                   await client.delete(HISTORY, params={"projectPath": str(project)})]
    assert [a.status_code for a in answers] == [403] * 3
    assert answers[0].json()["error"] == (f"the project's {link} is a symbolic link; "
                                          "this server follows no link inside .openagents/memory")
    assert (_tree(outside), _tree(inside)) == before


async def test_a_linked_archive_folder_is_refused_and_the_history_stays(asgi: Serve, root: Path,
                                                                       project: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    async with asgi() as client:
        assert (await client.post(REFLECT, json=reflect_body(project))).status_code == 200
        (project / MEMORY / "archive").symlink_to(outside)
        cleared = await client.delete(HISTORY, params={"projectPath": str(project)})
    assert cleared.status_code == 403 and "memory/archive is a symbolic link" in cleared.json()["error"]
    assert list(outside.iterdir()) == [] and len(history_file(project).read_bytes().splitlines()) == 1


async def test_a_linked_project_folder_inside_the_root_still_works(asgi: Serve, root: Path, project: Path) -> None:
    (root / "alias").symlink_to(project, target_is_directory=True)
    async with asgi() as client:
        answer = await client.post(REFLECT, json=reflect_body(root / "alias"))
    assert answer.status_code == 200 and history_file(project).exists()


async def test_a_project_path_through_a_symlink_loop_names_no_folder(asgi: Serve, root: Path) -> None:
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    async with asgi() as client:
        answer = await client.post(REFLECT, json=reflect_body(root / "a" / "proj"))
    assert answer.status_code == 404 and answer.json()["error"] == "projectPath names no folder on this machine"


async def test_a_folder_where_the_history_file_belongs_is_refused(asgi: Serve, project: Path) -> None:
    history_file(project).mkdir(parents=True)
    async with asgi() as client:
        listed = await client.get(HISTORY, params={"projectPath": str(project)})
    assert listed.status_code == 403
    assert listed.json()["error"] == ("the project's .openagents/memory/reflect-history.jsonl is a folder, "
                                      "not a regular file; this server uses only regular files there")


async def test_a_fifo_for_a_history_file_is_refused_and_stalls_nobody(serve: Serve, root: Path,
                                                                     project: Path) -> None:
    other = root / "other"
    other.mkdir()
    history_file(project).parent.mkdir(parents=True)
    os.mkfifo(history_file(project))
    statuses: list[int] = []

    async def post(n: int) -> None:
        statuses.append((await client.post(REFLECT, json=reflect_body(project, f"s-{n}"))).status_code)

    async with serve() as client:
        with anyio.fail_after(30):  # a stall would last forever; 30 s only ends the test
            async with anyio.create_task_group() as group:
                for n in range(45):
                    group.start_soon(post, n)
            answer = await client.post(REFLECT, json=reflect_body(other))
            listed = await client.get(HISTORY, params={"projectPath": str(project)})
    assert statuses == [403] * 45 and answer.status_code == 200
    assert listed.status_code == 403 and "reflect-history.jsonl is a FIFO, not a regular file" in listed.json()["error"]


async def test_a_project_whose_lock_is_held_leaves_threads_for_the_others(serve: Serve, root: Path,
                                                                         project: Path) -> None:
    """Another process holds one project's lock: its requests wait, in the event loop, not in
    every worker thread, so another project's requests are answered meanwhile."""
    other = root / "other"
    other.mkdir()
    lock = history_file(project).with_name("reflect-history.jsonl.lock")
    lock.parent.mkdir(parents=True)
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    stalled: list[int] = []

    async def post(n: int) -> None:
        stalled.append((await client.post(REFLECT, json=reflect_body(project, f"s-{n}"))).status_code)

    try:
        async with serve() as client:
            async with anyio.create_task_group() as group:
                for n in range(45):
                    group.start_soon(post, n)
                with anyio.fail_after(30):  # bounds a failure only
                    others = [(await client.get(HISTORY, params={"projectPath": str(other)})).status_code
                              for _ in range(5)]
                    others.append((await client.post(REFLECT, json=reflect_body(other))).status_code)
                assert stalled == []  # the lock is still held: nothing of that project was answered
                os.close(holder)
                holder = -1
    finally:
        if holder >= 0:
            os.close(holder)
    assert others == [200] * 6 and stalled == [200] * 45


def _git_project(project: Path) -> None:
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(project), "-c", "user.name=u", "-c", "user.email=u@x",
                    "commit", "-qm", "base"], check=True)


@pytest.mark.parametrize("inside", [".git", ".git/refs", "src"])
async def test_a_project_path_inside_a_repository_is_refused_and_nothing_is_written(
        asgi: Serve, project: Path, inside: str) -> None:
    """Memory files inside `.git` or a working tree's subfolder would be the repository's
    own mess, and the next `do-one-task` there would refuse the repository as dirty."""
    _git_project(project)
    before = _tree(project)
    async with asgi() as client:
        posted = await client.post(REFLECT, json=reflect_body(project / inside))
        listed = await client.get(HISTORY, params={"projectPath": str(project / inside)})
    assert posted.status_code == listed.status_code == 403
    assert "top folder" in posted.json()["error"]
    assert _tree(project) == before


async def test_the_top_folder_of_a_repository_is_a_project_and_stays_clean(asgi: Serve, project: Path) -> None:
    _git_project(project)
    async with asgi() as client:
        posted = await client.post(REFLECT, json=reflect_body(project))
    assert posted.status_code == 200 and history_file(project).exists()
    assert Repo(project).dirty_paths() == []  # what `do-one-task` checks before it starts
