"""Which records a shared memory files a repository under: the same key in every clone of
it, whatever the clone's folder is called, and never the key of another repository."""

from __future__ import annotations

import json
from pathlib import Path

from projects import git, init_repo

from orchestrator.config import load_config
from orchestrator.loop.project_memory import project_key


def remote(root: Path, name: str) -> str:
    """A bare repository (the team's git server) with one commit; its file:// URL."""
    work = init_repo(root / f"{name}-work")
    bare = root / "server" / f"{name}.git"
    git(root, "clone", "-q", "--bare", str(work), str(bare))
    return f"file://{bare}"


def clone(url: str, folder: Path, config: dict | None = None) -> Path:
    folder.parent.mkdir(parents=True, exist_ok=True)
    git(folder.parent, "clone", "-q", url, str(folder))
    (folder / ".openagents").mkdir()
    (folder / ".openagents" / "project.json").write_text(json.dumps(config or {}))
    return folder


def key_of(project: Path) -> str:
    return project_key(load_config(project).config, project)


def test_two_clones_of_one_repository_share_a_key_whatever_their_folders_are_called(tmp_path: Path) -> None:
    text = remote(tmp_path, "text")
    mine = clone(text, tmp_path / "alice" / "text")
    worker = clone(text, tmp_path / "fleet" / "text-9fdab11fb4")  # a fleet worker's worktree folder
    assert key_of(mine) == key_of(worker) == f"{tmp_path}/server/text"


def test_another_repository_in_a_folder_of_the_same_name_gets_a_key_of_its_own(tmp_path: Path) -> None:
    text, budget = remote(tmp_path, "text"), remote(tmp_path, "budget")
    assert key_of(clone(text, tmp_path / "alice" / "text")) != key_of(clone(budget, tmp_path / "bob" / "text"))


def test_project_id_wins_and_a_repository_without_a_remote_is_known_by_its_folder(tmp_path: Path) -> None:
    text = remote(tmp_path, "text")
    assert key_of(clone(text, tmp_path / "a" / "text", {"projectId": "shop"})) == "shop"
    alone = init_repo(tmp_path / "alone")
    (alone / ".openagents").mkdir()
    assert key_of(alone) == "alone"
