"""The builtin executor: ask the model for edits, then apply them to the tree.

One model call per attempt. The system message says who the model is and how to write
its reply, in the edit format chosen for this model (see `format_choice`); the user
message carries the loop's prompt and the files that fit (see `context`), and ends
with one sentence naming the file and the shape to reply in, where small models look
last. The reply is read whatever shape it took, each edit is resolved to its file, and
all are applied or none. A reply that cannot be applied is an unsuccessful result whose
`error` is exact and whose `repair` lists the real files and the expected shape; model
trouble (ModelError) is left to the loop.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio

from orchestrator.edits import (
    EditError,
    EditFormat,
    RepoView,
    apply_edits,
    parse_reply,
    reply_shape,
    resolve_targets,
    shape_of,
    system_prompt,
)
from orchestrator.executors.base import ExecutionRequest, ExecutionResult
from orchestrator.executors.context import RepoContext, file_section, gather_context
from orchestrator.executors.format_choice import FormatChooser
from orchestrator.judging.test_paths import DEFAULT_TEST_GLOBS, is_test_path
from reflection.llm import ChatModel, ChatReply
from reflection.redact import redact

log = logging.getLogger("goldenloop.executors.builtin")

_MAX_OMITTED_NAMES = 100  # a huge repository must not flood the prompt with names


class BuiltinExecutor:
    """Edits the repository with one model call per attempt."""

    name = "builtin"

    def __init__(
        self,
        model: ChatModel,
        *,
        max_context_bytes: int = 60000,
        timeout_s: float = 120.0,
        formats: FormatChooser | None = None,
    ) -> None:
        self.model = model
        self.max_context_bytes = max_context_bytes
        self.timeout_s = timeout_s
        self.formats = formats or FormatChooser("auto", model.name)

    async def execute(self, request: ExecutionRequest) -> ExecutionResult:
        context = await gather_context(
            request.repo_dir, request.prompt, request.hint_paths, self.max_context_bytes, request.focus
        )
        in_play = context.in_play
        target = _main_target(in_play)
        asked = self.formats.choose(_largest_lines(request.repo_dir, in_play))
        messages = build_messages(request.prompt, context, asked, target)
        reply = await self.model.complete(messages, timeout=self.timeout_s, temperature=request.temperature)
        received = shape_of(reply.text)
        common: dict[str, Any] = {
            "reply": reply.text, "usage": _usage(reply), "format_asked": asked, "format_received": received,
        }
        try:
            edits = parse_reply(reply.text, truncated=reply.finish_reason == "length")
            view = _view(request, context, in_play)
            edits = await anyio.to_thread.run_sync(resolve_targets, edits, view)  # it may read files
            touched = await anyio.to_thread.run_sync(apply_edits, request.repo_dir, edits)
        except EditError as exc:
            self.formats.record(asked, applied=False)
            log.info("attempt %d: reply (%s, asked %s) not applied: %s", request.attempt, received, asked, exc)
            repair = _repair(context, self.formats.choose(_largest_lines(request.repo_dir, in_play)), target)
            return ExecutionResult(ok=False, error=str(exc), repair=repair, failure_kind="edit", **common)
        self.formats.record(asked, applied=True)
        log.info("attempt %d: %d edit(s) applied to %s", request.attempt, len(edits), touched)
        return ExecutionResult(ok=True, touched=touched, notes=view.corrections, **common)


def build_messages(
    prompt: str, context: RepoContext, edit_format: EditFormat = "whole", target: str | None = None
) -> list[dict[str, str]]:
    """The system message (role and reply format) and the user message (prompt and files)."""
    parts = ["# Subtask", "", redact(prompt).strip(), "", "# Repository files", ""]
    if not context.files:
        parts += ["(no file contents included)", ""]
    for path, text in context.files:
        parts.append(file_section(path, text))
    if context.omitted:
        parts += [f"Files not shown (over the context budget): {_names(context.omitted)}", ""]
    parts.append(reply_shape(edit_format, target))
    return [
        {"role": "system", "content": system_prompt(edit_format)},
        {"role": "user", "content": "\n".join(parts)},
    ]


def _view(request: ExecutionRequest, context: RepoContext, in_play: list[str]) -> RepoView:
    tests = {p for p in in_play if is_test_path(p, DEFAULT_TEST_GLOBS)}
    return RepoView(
        request.repo_dir, _editable(context.listed), dict(context.files), in_play, tests, request.prompt,
        is_test=lambda path: is_test_path(path, DEFAULT_TEST_GLOBS),
    )


def _editable(listed: list[str]) -> list[str]:
    """The files a reply may name: goldenloop's own state is not among them."""
    return [p for p in listed if not p.startswith(".openagents/")]


def _main_target(in_play: list[str]) -> str | None:
    """The file the reply is most likely for: the first one in play that is not a test."""
    code = [p for p in in_play if not is_test_path(p, DEFAULT_TEST_GLOBS)]
    return code[0] if code else (in_play[0] if in_play else None)


def _largest_lines(repo_dir: Path, paths: list[str]) -> int:
    largest = 0
    for rel in paths:
        try:
            with (repo_dir / rel).open("rb") as handle:
                largest = max(largest, sum(1 for _ in handle))
        except OSError:
            continue
    return largest


def _repair(context: RepoContext, next_format: EditFormat, target: str | None) -> str:
    """What the retry needs to get the reply right: the real files and the shape."""
    return f"The repository's files are: {_names(_editable(context.listed))}.\n{reply_shape(next_format, target)}"


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_OMITTED_NAMES])
    rest = len(names) - _MAX_OMITTED_NAMES
    return shown + (f" and {rest} more" if rest > 0 else "")


def _usage(reply: ChatReply) -> dict[str, Any]:
    return {
        "inputTokens": reply.input_tokens,
        "outputTokens": reply.output_tokens,
        "costUsd": reply.cost_usd,
        "model": reply.model,
        "latencyS": reply.latency_s,
        "finishReason": reply.finish_reason,
    }
