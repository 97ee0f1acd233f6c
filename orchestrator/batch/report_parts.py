"""What makes the morning report actionable: who ran, each task's diff, links to its files,
the next command for each task left blocked, and costs told as "not priced" with why.

The page lives in `.openagents/runs/`; its links are relative to that folder, so they
resolve wherever the repository is, and only files that exist are linked.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config import ProjectConfig
from orchestrator.git.repo import Repo, RepoError
from orchestrator.layout import Layout, safe_name
from orchestrator.loop.outcome import TaskOutcome

DIFF_BYTES = 60_000  # of one task's diff shown on the page; the files hold it whole
LINKED = ("*.transcript.txt", "*.patch")  # of history/<task>/: what each attempt left to read


@dataclass(frozen=True)
class RunHeader:
    """Who worked on which repository: the page's first line."""

    repository: Path
    agent: str
    model: str
    own_model: str

    @classmethod
    def of(cls, project_dir: Path, config: ProjectConfig) -> RunHeader:
        from orchestrator.loop.agent_name import agent_name

        executor = config.executor
        agent = "the builtin editor" if executor.kind == "builtin" else agent_name(config)
        model = config.default_model if executor.kind == "builtin" else executor.named_model or "its own default"
        own = config.reflection_model or "none (heuristic reflections)"
        return cls(project_dir, agent, model, own)


def task_diff(project_dir: Path, outcome: TaskOutcome) -> tuple[str, str] | None:
    """(what it is, the diff) of a closed task's commits, or of a blocked task's best attempt."""
    if outcome.commits:
        try:
            return "its commits", Repo(project_dir).commits_diff(outcome.commits, DIFF_BYTES)
        except RepoError:  # history rewritten since: the page is written all the same
            return None
    patch = Layout(project_dir).escalations / f"{safe_name(outcome.task_id)}.patch"
    if outcome.status == "blocked" and patch.is_file():
        return "its best attempt", patch.read_text(errors="replace")[:DIFF_BYTES]
    return None


def task_links(project_dir: Path, outcome: TaskOutcome) -> list[tuple[str, str]]:
    """(label, href relative to the runs folder) of the task's packet and attempt files."""
    layout = Layout(project_dir)
    name = safe_name(outcome.task_id)
    found: list[tuple[str, Path]] = []
    if outcome.status == "blocked":
        found += [(f"escalation packet ({path.suffix[1:]})", path)
                  for path in (layout.escalations / f"{name}.md", layout.escalations / f"{name}.patch")]
    history = layout.history / name
    for pattern in LINKED:
        found += [(path.name, path) for path in sorted(history.glob(pattern))]
    return [(label, _relative(path, layout.runs)) for label, path in found if path.is_file()]


def next_commands(project_dir: Path, outcome: TaskOutcome) -> list[str]:
    """What to type next for a task the run left blocked or put back; none for a closed one."""
    if outcome.status == "closed":
        return []
    where = shlex.quote(str(project_dir))
    task = shlex.quote(outcome.task_id)
    if outcome.status != "blocked":  # put back open: the next run takes it again
        return [f"do-one-task --task {task} --dir {where}"]
    return [f"goldenloop show {task} --dir {where}",
            f"goldenloop reopen {task} --dir {where} && do-one-task --task {task} --dir {where}"]


NOT_PRICED = "not priced"
NOT_PRICED_WHY = ("“not priced”: litellm knows no price for the model (a local one, say), or the agent "
                  "reports no cost; its tokens are counted all the same.")


def cost_words(text: str) -> str:
    """A meter's cost text, with "unknown" said as the page explains it."""
    return NOT_PRICED if text == "unknown" else text


def _relative(path: Path, folder: Path) -> str:
    return Path("..", path.relative_to(folder.parent)).as_posix()
