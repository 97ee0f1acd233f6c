"""Every path goldenloop keeps under a project's `.openagents/`, named once (docs/ARCHITECTURE.md, "Files").

Other modules ask `Layout(project_dir)` for a path instead of joining folder names
themselves, so moving a file is one change here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reflection.location import REFLECTIONS_PATH, TASK_REFLECTIONS_PATH

FOLDER = ".openagents"
PREFIX = FOLDER + "/"  # a repository-relative path under it starts with this


def safe_name(name: str) -> str:
    """A task or run id as a file name: nothing that could leave the folder."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def find_project(start: Path) -> Path:
    """The folder holding `.openagents/`, `start` or above it; ValueError (a sentence) if none."""
    if not start.is_dir():
        raise ValueError(f"{start} is not a folder")
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / FOLDER).is_dir():
            return folder
    raise ValueError(f"no {FOLDER}/ folder in {start} or above it: run this inside a goldenloop project")


@dataclass(frozen=True)
class Layout:
    project_dir: Path

    @property
    def root(self) -> Path:
        return self.project_dir / FOLDER

    @property
    def config(self) -> Path:
        return self.root / "project.json"

    @property
    def tasks(self) -> Path:
        return self.root / "tasks.jsonl"

    @property
    def task_archive(self) -> Path:
        return self.root / "archive"

    @property
    def reflections(self) -> Path:
        return self.project_dir / REFLECTIONS_PATH

    @property
    def task_reflections(self) -> Path:
        return self.project_dir / TASK_REFLECTIONS_PATH

    @property
    def edit_formats(self) -> Path:
        return self.root / "memory" / "edit-formats.json"

    @property
    def retry_choices(self) -> Path:
        return self.root / "memory" / "retry-choices.json"

    @property
    def lock(self) -> Path:
        return self.root / "agent.lock"

    @property
    def gitignore(self) -> Path:
        return self.root / ".gitignore"

    @property
    def progress(self) -> Path:
        return self.root / "progress.md"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def history(self) -> Path:
        return self.root / "history"  # every attempt's patch and evaluation, per task

    @property
    def escalations(self) -> Path:
        return self.root / "escalations"

    @property
    def journals(self) -> Path:
        return self.root / "journal"

    @property
    def bookkeeping_marker(self) -> Path:
        return self.journals / "bookkeeping.json"  # a bookkeeping commit in progress

    def journal(self, task_id: str) -> Path:
        return self.journals / f"{safe_name(task_id)}.json"

    def plan(self, task_id: str) -> Path:
        return self.root / "subtasks" / f"{safe_name(task_id)}.json"

    def run_log(self, run_id: str) -> Path:
        return self.runs / f"{run_id}.jsonl"

    def run_summary(self, run_id: str) -> Path:
        return self.runs / f"{run_id}-summary.json"
