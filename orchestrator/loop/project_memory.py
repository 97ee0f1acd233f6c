"""What the loop remembers with (seed 001): the reflection store, the lesson ranking, the
rules, and the name a task's reflections are filed under. One per session.

The store is the project's JSONL files unless `memory.store` (or the fleet worker's
`--memory`) names a PostgreSQL database shared by a team; there every record carries the
project's key, so that one database serves many repositories.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from orchestrator.config import MemoryConfig, ProjectConfig, memory_store_url
from orchestrator.layout import Layout
from orchestrator.loop.agent_name import agent_name
from reflection.backends import open_lesson_index, open_store
from reflection.rules import rules_prompt
from reflection.store import ReflectionStore

if TYPE_CHECKING:
    from reflection.lesson_index import Embedder
    from reflection.lessons import LessonRanker


@dataclass
class ProjectMemory:
    """What the loop remembers with; one per session."""

    memory_dir: Path  # the local view: rules.md, the markdown pages
    store: ReflectionStore
    agent: str
    settings: MemoryConfig
    index: LessonRanker | None  # None: lessons of other tasks are not shown (crossTaskLessons off)
    # The success procedure each task of this session was offered as a playbook, by task id.
    playbooks: dict[str, str] = field(default_factory=dict)

    def rules(self) -> str:
        """memory/rules.md as a prompt block, read each time: a rule may join during a run."""
        return rules_prompt(self.memory_dir)

    def close(self) -> None:
        self.store.close()
        if self.index is not None:
            self.index.close()


def open_project_memory(config: ProjectConfig, project_dir: Path, memory_dir: Path, *, store_url: str | None,
                        embedder: Embedder | None = None) -> ProjectMemory:
    """The store and ranking `store_url` names (None: the JSONL files in `memory_dir`)."""
    key = project_key(config, project_dir) if store_url else ""
    store = open_store(store_url, memory_dir, project=key)
    try:
        index = (open_lesson_index(store_url, memory_dir, project=key, embedder=embedder)
                 if config.memory.cross_task_lessons else None)
    except BaseException:
        store.close()
        raise
    return ProjectMemory(memory_dir, store, agent_name(config), config.memory, index)


def configured_store(config: ProjectConfig, project_dir: Path) -> ReflectionStore:
    """The store project.json (or GOLDENLOOP_MEMORY_STORE) names, for the commands that read
    memory outside a run. ConfigError or PostgresUnavailable, each one sentence."""
    url = memory_store_url(config.memory.store)
    memory_dir = Layout(project_dir).reflections.parent
    return open_store(url, memory_dir, project=project_key(config, project_dir) if url else "")


def project_key(config: ProjectConfig, project_dir: Path) -> str:
    """The name a shared store files this project's records under, the same on every
    machine and in every clone: projectId, else the address of its `origin` remote
    without credentials or `.git`, else the folder's name."""
    if config.project_id:
        return config.project_id
    origin = _origin_url(project_dir)
    return normal_remote(origin) if origin else Path(project_dir).resolve().name


def normal_remote(url: str) -> str:
    """`git@host:team/app.git`, `https://user:token@host/team/app` -> `host/team/app`."""
    scp = re.fullmatch(r"[\w.-]+@([\w.-]+):(.+)", url)  # git's scp-like syntax
    if scp:
        host, path = scp.groups()
    else:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    path = path.strip("/").removesuffix(".git")
    return f"{host}/{path}" if host else f"/{path}"


def _origin_url(project_dir: Path) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(project_dir), "config", "--get", "remote.origin.url"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None
