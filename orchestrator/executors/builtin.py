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
from dataclasses import dataclass
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
from reflection.in_reply import reflection_part
from reflection.llm import ChatModel, ChatReply
from reflection.redact import redact

log = logging.getLogger("goldenloop.executors.builtin")

_MAX_OMITTED_NAMES = 100  # a huge repository must not flood the prompt with names


# Where reflexion.oneCall asks for the reflection: first in the reply, before the edit,
# in two labelled lines a small model keeps to (reflection/in_reply.py reads them).
REFLECT_FIRST = (
    "Begin your reply with these two lines:\n"
    "What went wrong: <the cause, naming the failing test and the code at fault>\n"
    "What to do differently: <the change that will make it pass>"
)
CODE_NOW = "That is the reflection; now write the edit it calls for."
CHATS_KEPT = 8  # subtasks whose chat is kept for their next attempt


@dataclass
class Chat:
    """One subtask's chat so far: the messages of its last call and the reply to them."""

    messages: list[dict[str, str]]
    reply: str
    edit_format: EditFormat

    @property
    def chars(self) -> int:
        return sum(len(m["content"]) for m in self.messages) + len(self.reply)


class BuiltinExecutor:
    """Edits the repository with one model call per attempt. A retry continues the chat of
    the attempt before it (its prompt, then its reply, then what came of it), so that the
    retry's prompt begins with its predecessor's, byte for byte: a prompt cache serves it."""

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
        self.chats: dict[str, Chat] = {}

    async def execute(self, request: ExecutionRequest) -> ExecutionResult:
        context = await gather_context(
            request.repo_dir, request.prompt, request.hint_paths, self.max_context_bytes, request.focus
        )
        in_play = context.in_play
        target = _main_target(in_play)
        asked = self.formats.choose(_largest_lines(request.repo_dir, in_play))
        messages = self._messages(request, context, asked, target)
        reply = await self.model.complete(messages, timeout=self.timeout_s, temperature=request.temperature)
        text, usage, code_asked = reply.text, _usage(reply), False
        if request.reflect_first and shape_of(reply.text) == "prose" and reflection_part(reply.text):
            # The reflection came and its edit did not: the code is asked for in the same chat,
            # as the two-call form asks for it after its reflection call.
            messages = [*messages, {"role": "assistant", "content": reply.text},
                        {"role": "user", "content": f"{CODE_NOW}\n\n{reply_shape(asked, target)}"}]
            reply = await self.model.complete(messages, timeout=self.timeout_s, temperature=request.temperature)
            text, usage, code_asked = f"{text}\n\n{reply.text}", _summed(usage, _usage(reply)), True
        self._keep(request.chat, Chat(messages, reply.text, asked))
        received = shape_of(reply.text)
        common: dict[str, Any] = {
            "reply": text, "usage": usage, "format_asked": asked, "format_received": received,
            "code_asked_for": code_asked,
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


    def _messages(self, request: ExecutionRequest, context: RepoContext, asked: EditFormat,
                  target: str | None) -> list[dict[str, str]]:
        """The chat goes on where the loop says it may and the chat still fits; else a new one."""
        chat = self.chats.get(request.chat) if request.chat else None
        ending = _ending(asked, target, request.reflect_first)
        if (chat is None or request.follow_up is None or chat.edit_format != asked
                or chat.chars > 4 * self.max_context_bytes):
            return build_messages(request.prompt, context, asked, target, latest=request.latest, ending=ending)
        return [*chat.messages, {"role": "assistant", "content": chat.reply},
                {"role": "user", "content": f"{redact(request.follow_up).strip()}\n\n{ending}"}]

    def _keep(self, key: str | None, chat: Chat) -> None:
        if key is None:
            return
        self.chats.pop(key, None)
        self.chats[key] = chat
        while len(self.chats) > CHATS_KEPT:
            self.chats.pop(next(iter(self.chats)))


def build_messages(
    prompt: str, context: RepoContext, edit_format: EditFormat = "whole", target: str | None = None,
    *, latest: str = "", ending: str | None = None,
) -> list[dict[str, str]]:
    """The system message (role and reply format) and the user message: the prompt's stable
    part, the files, then `latest` (the end of `prompt` that changes each attempt), so that
    everything before `latest` is the same from one attempt to the next."""
    split = bool(latest) and prompt.endswith(latest)
    stable = prompt[: len(prompt) - len(latest)] if split else prompt
    parts = ["# Subtask", "", redact(stable).strip(), "", "# Repository files", ""]
    if not context.files:
        parts += ["(no file contents included)", ""]
    for path, text in context.files:
        parts.append(file_section(path, text))
    if context.omitted:
        parts += [f"Files not shown (over the context budget): {_names(context.omitted)}", ""]
    if split:
        parts += [redact(latest).strip(), ""]
    parts.append(ending if ending is not None else reply_shape(edit_format, target))
    return [
        {"role": "system", "content": system_prompt(edit_format)},
        {"role": "user", "content": "\n".join(parts)},
    ]


def _ending(edit_format: EditFormat, target: str | None, reflect_first: bool) -> str:
    """The prompt's last words, where small models look: the reflection the reply begins
    with when one is asked for, then the reply's shape. Said the other way round, a 1.5B
    model wrote the two lines it read last and stopped, and the edit had to be asked for."""
    shape = reply_shape(edit_format, target)
    return f"{REFLECT_FIRST}\nThen, in the same reply, the edit. {shape}" if reflect_first else shape


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


def _summed(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Two calls' usage as one attempt's: counts and cost added, the last call's model and end."""
    added = {key: None if first.get(key) is None or second.get(key) is None else first[key] + second[key]
             for key in ("inputTokens", "outputTokens", "costUsd", "latencyS")}
    return {**second, **added}


def _usage(reply: ChatReply) -> dict[str, Any]:
    return {
        "inputTokens": reply.input_tokens,
        "outputTokens": reply.output_tokens,
        "costUsd": reply.cost_usd,
        "model": reply.model,
        "latencyS": reply.latency_s,
        "finishReason": reply.finish_reason,
    }
