"""What every executor takes and gives back, and the protocol the loop calls.

An executor turns one subtask prompt into changes in the working tree. It never commits:
the loop finds the changes through git, verifies them and commits or restores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field


class ExecutionRequest(BaseModel):
    """One attempt at one subtask."""

    repo_dir: Path
    # The full subtask prompt built by the loop: task, subtask, and on retries the last
    # attempt's diff, its failure digest and the reflections.
    prompt: str
    attempt: int  # 1 for the first try
    # Files the loop thinks are relevant (e.g. changed by the last attempt), repo-relative.
    hint_paths: list[str] = Field(default_factory=list)
    # The task's own words (title, description, criteria, the step): the files and code it
    # names there say where the change goes, before anything the prompt adds. "": the prompt.
    focus: str = ""
    # Sampling temperature for a model-backed executor; None: the model's default. The
    # loop raises it to ask again when a retry returned an earlier attempt's code.
    temperature: float | None = None
    # For an executor that keeps its chat with the model (the builtin one), the prompt in
    # parts, most stable first, so that a prompt cache serves what a retry repeats: `prompt`
    # ends with `latest` (what changed since the last attempt), and `follow_up` says the same
    # as the next message of the chat `chat` (None: a new chat from `prompt`).
    latest: str = ""
    follow_up: str | None = None
    chat: str | None = None
    # Ask the reply to begin with a reflection on the last failure (reflexion.oneCall):
    # the loop reads it from `reply` and stores it as that failure's reflection.
    reflect_first: bool = False


class ExecutionResult(BaseModel):
    """What an attempt did to the tree, or why it could not change it."""

    ok: bool
    # Why the attempt produced or applied no changes, written so that the next prompt
    # can quote it (e.g. "edit 2 for src/calc.py: SEARCH text not found; ...").
    error: str | None = None
    touched: list[str] = Field(default_factory=list)  # repo-relative paths written
    reply: str | None = None  # the raw reply or agent output, for the run log
    usage: dict[str, Any] | None = None  # camelCase Usage body plus model and latencyS
    # What the next attempt should do differently when this one could not be applied:
    # the repository's real files and the expected shape of the reply.
    repair: str | None = None
    format_asked: str | None = None  # the edit format the model was asked for
    format_received: str | None = None  # the shape its reply had (see edits.reply.shape_of)
    # What failed when ok is False: a model's reply that could not be applied as an edit
    # (a lesson about the reply format), an external agent's run, or an agent that cannot
    # run here at all (not installed: no retry can help).
    failure_kind: Literal["edit", "agent", "environment", "limit"] = "agent"
    resume_at: float | None = None  # "limit": when the agent's usage limit resets (epoch seconds), if said
    timed_out: bool = False  # the agent's run was stopped at its time limit
    # What the agent printed and wrote of its run (bounded, redacted): kept beside the
    # attempt in history/, for the user to see why.
    transcript: str | None = None
    # What was corrected to apply the reply (an edit moved to the one file holding its
    # SEARCH text): logged, and told to the next attempt.
    notes: list[str] = Field(default_factory=list)
    # The reply held the reflection asked for and no edit, so the edit was asked for in the
    # same chat: `reply` holds both replies, `usage` both calls.
    code_asked_for: bool = False

    def failure_summary(self) -> str:
        """One line for the attempt record and the run log."""
        what = {"edit": "the reply could not be applied", "agent": "the agent run failed",
                "environment": "the agent cannot run here", "limit": "the agent hit a usage limit"}[self.failure_kind]
        return f"{what}: {self.error}"


@runtime_checkable
class Executor(Protocol):
    """Something that edits a repository to carry out a subtask."""

    name: str

    async def execute(self, request: ExecutionRequest) -> ExecutionResult:
        """Make the attempt; a bad reply is a result with ok=False, not an exception."""
        ...
