"""What the loop remembers with (seed 001): the reflection store, the lesson index, the
rules, and the name a task's reflections are filed under. One per session."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.config import MemoryConfig, ProjectConfig
from reflection.rules import rules_prompt
from reflection.store import JsonlReflectionStore

if TYPE_CHECKING:  # sqlite is imported only by a run that ranks lessons
    from reflection.lesson_index import LessonIndex


@dataclass
class ProjectMemory:
    """What the loop remembers with; one per session."""

    memory_dir: Path
    store: JsonlReflectionStore
    agent: str
    settings: MemoryConfig
    index: LessonIndex | None  # None: lessons of other tasks are not shown (crossTaskLessons off)

    def rules(self) -> str:
        """memory/rules.md as a prompt block, read each time: a rule may join during a run."""
        return rules_prompt(self.memory_dir)

    def close(self) -> None:
        self.store.close()
        if self.index is not None:
            self.index.close()


def agent_name(config: ProjectConfig) -> str:
    """Who a task's reflections are filed under: memory.agentName, else the model of the
    builtin executor, the program a command executor runs, or the agent preset's name."""
    if config.memory.agent_name:
        return config.memory.agent_name
    if config.executor.kind not in ("builtin", "command"):  # an agent preset: the agent did the work
        return config.executor.kind
    command = config.executor.command
    if config.executor.kind == "command" and command:
        words = command.split()
        return Path(words[0]).name if words else "command"
    return config.default_model
