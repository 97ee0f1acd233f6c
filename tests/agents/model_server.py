"""A scripted model server on 127.0.0.1, for tests that drive real coding agents.

It answers every model call from a script of `Turn`s, in the three wire protocols agents use:

    POST /v1/chat/completions  OpenAI chat (Aider, mini-swe-agent, OpenHands, litellm)  base: server.openai_base_url
    POST /v1/responses         OpenAI Responses (Codex CLI)                              base: server.openai_base_url
    POST /v1/messages          Anthropic Messages (Claude Code), and .../count_tokens    base: server.anthropic_base_url

each streamed (`"stream": true`, SSE) or not, with or without the `/v1` prefix; `GET /v1/models`
lists `server.models`; any other path gets a 404 JSON and is recorded. The `model_server`
fixture (tests/agents/conftest.py) yields a started server with an empty script and stops it
after the test; elsewhere use `with ModelServer(turns) as server:`.

A turn is protocol-neutral. Each model request is answered by the first turn, in script order,
with uses left (`times`: default 1, None unlimited) whose filters accept it: `match`, a regex
searched (DOTALL) in the last user or tool message (chat: last `user`/`tool` message; Responses:
last user message or `*_call_output`; Anthropic: last `user` message, text and `tool_result`
blocks); `model`, a regex searched in the request's model; `api`: "chat", "responses" or
"messages". A request no turn accepts gets `server.fallback` if set, else a 400 (which clients
do not retry) naming it; `server.override`, if set, answers every request before the script.
Tool calls, one example per protocol:

    # chat (mini-swe-agent's tool mode): message.tool_calls, finish_reason "tool_calls"
    model_server.script([Turn(reply="Listing.", tool_calls=[ToolCall("bash", {"command": "ls"})]),
                         Turn(match="README.md", reply="Done.")])
    # responses (Codex): a function_call item; custom=True gives a custom_tool_call with free-form input
    model_server.script([Turn(tool_calls=[ToolCall("shell_command", {"command": "ls"})]),
                         Turn(tool_calls=[ToolCall("apply_patch", "*** Begin Patch...", custom=True)])])
    # messages (Claude Code): a tool_use block (input object), stop_reason "tool_use"
    model_server.script([Turn(match="fix", tool_calls=[ToolCall("Bash", {"command": "pytest -q"})])])

Text-only agents (Aider's edit formats, mini-swe-agent's bash blocks) just get `reply`. A
tool call's `id` defaults to `call_<n>_<i>` (`toolu_...` for Anthropic); string `arguments`
are sent as they are.

Usage: `usage=Usage(input, output, cache_read_tokens, cache_write_tokens)` (or a dict, or a
pair) is sent verbatim in each protocol's fields; default one token per 4 characters of the
prompt and of the reply. A chat stream carries it in a last chunk when the request asks
(`stream_options.include_usage`) or with `ModelServer(stream_usage="always")`; an Anthropic
stream has input in message_start and output in message_delta (message_start says 0).

Failures, per turn (`error=`) or globally (`server.override = Turn(error=...)`): "auth" 401,
"rate_limit" 429 (`retry_after` seconds as `retry-after`), "server" 500, "overloaded" (529
Anthropic, 503 OpenAI), "bad_request" 400, "context_window" 400, "not_found" 404, each in the
provider's error JSON (`message=` replaces its text); "hang" (no answer until the client gives
up, at most `hang_cap_s`), "stall" (a stream that sends its first two events, then nothing),
"disconnect" (connection closed unanswered), "down" (closed, and the server stops listening).
`Turn()` is an empty reply (empty text; Anthropic: `content: []`). `delay=` waits first.
`server.stop()` is the server going down; `ModelServer(api_key="k")` answers any request
without that key (Bearer or `x-api-key`) with a 401; `ModelServer(apis=("chat",))` is a server
that speaks only those protocols (the others' endpoints get the unknown-path 404).

Records: `server.requests` (`Recorded`: method, path, query, headers with secrets redacted,
parsed body, api, model, stream, text matched, turn index (-1 override, -2 fallback), status,
outcome), `model_requests(api)`, `prompts(api)`, `unused()` (turns with uses left),
`wait_for_requests(n, where=...)`; `server.errors`: the server's own exceptions.

By hand: `python tests/agents/model_server.py turns.json [--port N]` (a JSON list of turns).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import re
import select
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self, cast
from urllib.parse import urlsplit

import pytest

Api = Literal["chat", "responses", "messages"]
APIS: tuple[str, ...] = ("chat", "responses", "messages")
HTTP_ERRORS = ("auth", "rate_limit", "server", "overloaded", "bad_request", "context_window", "not_found")
TRANSPORT_FAILURES = ("hang", "stall", "disconnect", "down")
SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie", "x-goog-api-key"}
REDACTED = "<redacted>"


# ---------------------------------------------------------------------------
# The script


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @classmethod
    def of(cls, value: Usage | dict[str, int] | Sequence[int]) -> Usage:
        if isinstance(value, Usage):
            return value
        if isinstance(value, dict):
            return cls(**value)
        return cls(*value)


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a reply. `arguments`: an object, or a string sent as it is (so a
    test can send malformed JSON). `custom`: Responses only, a `custom_tool_call` whose
    `input` is the string (Codex's free-form apply_patch)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    custom: bool = False

    @classmethod
    def of(cls, value: ToolCall | dict[str, Any]) -> ToolCall:
        return value if isinstance(value, ToolCall) else cls(**value)

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)

    def arguments_object(self) -> dict[str, Any]:
        """For Anthropic's `input`, which must be an object."""
        if isinstance(self.arguments, dict):
            return self.arguments
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError:
            return {"input": self.arguments}
        return value if isinstance(value, dict) else {"input": value}


@dataclass
class Turn:
    reply: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    match: str | None = None
    model: str | None = None
    api: Api | None = None
    times: int | None = 1
    error: str | None = None
    message: str | None = None  # the error message, instead of the provider-like default
    retry_after: float | None = None
    delay: float = 0.0
    usage: Usage | dict[str, int] | tuple[int, ...] | None = None  # becomes a Usage
    finish: Literal["stop", "length"] = "stop"

    def __post_init__(self) -> None:
        self.tool_calls = [ToolCall.of(c) for c in self.tool_calls]
        if self.usage is not None:
            self.usage = Usage.of(self.usage)
        for pattern in (self.match, self.model):
            if pattern is not None:
                re.compile(pattern)
        if self.api is not None and self.api not in APIS:
            raise ValueError(f"api must be one of {APIS}, not {self.api!r}")
        if self.times is not None and self.times < 1:
            raise ValueError("times must be at least 1, or None for unlimited")
        if self.error is not None and self.error not in HTTP_ERRORS + TRANSPORT_FAILURES:
            raise ValueError(f"error must be one of {HTTP_ERRORS + TRANSPORT_FAILURES}, not {self.error!r}")
        if self.finish not in ("stop", "length"):
            raise ValueError("finish must be 'stop' or 'length'")

    @classmethod
    def of(cls, value: Turn | dict[str, Any]) -> Turn:
        return value if isinstance(value, Turn) else cls(**value)

    def accepts(self, api: str, model: str, text: str) -> bool:
        if self.api is not None and self.api != api:
            return False
        if self.model is not None and re.search(self.model, model) is None:
            return False
        return self.match is None or re.search(self.match, text, re.DOTALL) is not None


@dataclass
class Recorded:
    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]  # lower-case names; secrets are REDACTED
    body: Any  # the parsed JSON; the text when it is not JSON; None when empty
    api: str | None = None  # "chat", "responses", "messages"; None for any other endpoint
    model: str | None = None
    stream: bool = False
    text: str = ""  # the last user or tool message, as matched against `Turn.match`
    turn: int | None = None  # index in the script; -1 the override, -2 the fallback
    status: int | None = None  # None: no HTTP answer (hang, disconnect, down)
    outcome: str = "pending"  # reply, error, no turn, gave up, hang cap, dropped, stopped, info, not found
    key_ok: bool | None = None  # with ModelServer(api_key=...): whether the request carried it


# ---------------------------------------------------------------------------
# Reading requests


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if part.get("type") == "tool_result":
                    parts.append(_content_text(part.get("content")))
                elif isinstance(part.get("text"), str):
                    parts.append(part["text"])
        return "\n".join(parts)
    return "" if content is None else str(content)


def last_input_text(api: str, body: dict[str, Any]) -> str:
    """The text of the request's last user or tool message (what `Turn.match` searches)."""
    if api == "responses":
        items = body.get("input")
        if isinstance(items, str):
            return items
        for item in reversed(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                continue
            kind = item.get("type", "message")
            if kind == "message" and item.get("role") == "user":
                return _content_text(item.get("content"))
            if kind.endswith("_call_output"):
                return _content_text(item.get("output"))
        return ""
    roles = ("user", "tool", "function") if api == "chat" else ("user",)
    messages = body.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") in roles:
            return _content_text(message.get("content"))
    return ""


def _estimate(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _prompt_tokens(body: dict[str, Any]) -> int:
    parts = [body.get(key) for key in ("system", "instructions", "messages", "input") if body.get(key)]
    return _estimate(json.dumps(parts, ensure_ascii=False))


# ---------------------------------------------------------------------------
# Writing answers: each protocol's JSON


def _openai_error(kind: str, turn: Turn | None, model: str, prompt_tokens: int) -> tuple[int, dict[str, Any]]:
    retry = f" Please try again in {turn.retry_after:g}s." if turn and turn.retry_after is not None else ""
    table: dict[str, tuple[int, str, str | None, str]] = {
        "auth": (401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
        "rate_limit": (429, "requests", "rate_limit_exceeded", "Rate limit reached for requests." + retry),
        "server": (500, "server_error", None, "The server had an error while processing your request."),
        "overloaded": (503, "server_error", None, "The engine is currently overloaded, please try again later."),
        "bad_request": (400, "invalid_request_error", None, "Invalid request."),
        "context_window": (
            400,
            "invalid_request_error",
            "context_length_exceeded",
            (
                f"This model's maximum context length is 8192 tokens. However, your messages resulted in "
                f"{max(prompt_tokens, 8193)} tokens. Please reduce the length of the messages."
            ),
        ),
        "not_found": (404, "invalid_request_error", "model_not_found", f"The model `{model}` does not exist."),
    }
    status, kind_type, code, message = table[kind]
    message = turn.message if turn and turn.message else message
    return status, {"error": {"message": message, "type": kind_type, "param": None, "code": code}}


def _anthropic_error(kind: str, turn: Turn | None, model: str, prompt_tokens: int) -> tuple[int, dict[str, Any]]:
    table: dict[str, tuple[int, str, str]] = {
        "auth": (401, "authentication_error", "invalid x-api-key"),
        "rate_limit": (429, "rate_limit_error", "Number of requests has exceeded your rate limit."),
        "server": (500, "api_error", "Internal server error"),
        "overloaded": (529, "overloaded_error", "Overloaded"),
        "bad_request": (400, "invalid_request_error", "Invalid request."),
        "context_window": (
            400,
            "invalid_request_error",
            f"prompt is too long: {max(prompt_tokens, 200001)} tokens > 200000 maximum",
        ),
        "not_found": (404, "not_found_error", f"model: {model}"),
    }
    status, kind_type, message = table[kind]
    message = turn.message if turn and turn.message else message
    return status, {"type": "error", "error": {"type": kind_type, "message": message}}


def provider_error(api: str, kind: str, turn: Turn | None, model: str, prompt_tokens: int) -> tuple[int, dict]:
    maker = _anthropic_error if api == "messages" else _openai_error
    return maker(kind, turn, model, prompt_tokens)


@dataclass
class _Answer:
    """One reply, ready to render in any protocol."""

    rid: int
    model: str
    text: str
    calls: list[tuple[str, ToolCall]]  # (call id, call)
    usage: Usage
    finish: str
    created: int = field(default_factory=lambda: int(time.time()))


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chat_usage(u: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _chat_finish(a: _Answer) -> str:
    return "tool_calls" if a.calls else ("length" if a.finish == "length" else "stop")


def chat_body(a: _Answer) -> dict[str, Any]:
    content = a.text if a.text or not a.calls else None  # OpenAI's null beside tool calls
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if a.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json()}}
            for cid, c in a.calls
        ]
    return {
        "id": f"chatcmpl-{a.rid}",
        "object": "chat.completion",
        "created": a.created,
        "model": a.model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _chat_finish(a)}],
        "usage": _chat_usage(a.usage),
    }


def chat_events(a: _Answer, size: int, usage_chunk: bool) -> list[tuple[str | None, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str | None, Any]:
        body: dict[str, Any] = {
            "id": f"chatcmpl-{a.rid}",
            "object": "chat.completion.chunk",
            "created": a.created,
            "model": a.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if usage_chunk:
            body["usage"] = None
        return None, body

    events: list[tuple[str | None, Any]] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(a.text, size)]
    for index, (cid, call) in enumerate(a.calls):
        opening = {"index": index, "id": cid, "type": "function", "function": {"name": call.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [opening]}))
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(call.arguments_json(), size)
        ]
    events.append(chunk({}, _chat_finish(a)))
    if usage_chunk:
        last = dict(chunk({})[1], choices=[], usage=_chat_usage(a.usage))
        events.append((None, last))
    events.append((None, "[DONE]"))
    return events


def _responses_items(a: _Answer, done: bool) -> list[dict[str, Any]]:
    status = "completed" if done else "in_progress"
    items: list[dict[str, Any]] = []
    if a.text or not a.calls:
        content = [{"type": "output_text", "text": a.text if done else "", "annotations": [], "logprobs": []}]
        items.append(
            {
                "id": f"msg_{a.rid}",
                "type": "message",
                "status": ("incomplete" if a.finish == "length" else status) if done else status,
                "role": "assistant",
                "content": content if done else [],
            }
        )
    for index, (cid, call) in enumerate(a.calls):
        item: dict[str, Any] = {"id": f"fc_{a.rid}_{index}", "call_id": cid, "name": call.name, "status": status}
        if call.custom:
            item.update(type="custom_tool_call", input=call.arguments_json() if done else "")
        else:
            item.update(type="function_call", arguments=call.arguments_json() if done else "")
        items.append(item)
    return items


def responses_body(a: _Answer, request: dict[str, Any], done: bool = True) -> dict[str, Any]:
    u = a.usage
    incomplete = done and a.finish == "length"
    return {
        "id": f"resp_{a.rid}",
        "object": "response",
        "created_at": a.created,
        "status": ("incomplete" if incomplete else "completed") if done else "in_progress",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": a.model,
        "output": _responses_items(a, True) if done else [],
        "parallel_tool_calls": bool(request.get("parallel_tool_calls", True)),
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": bool(request.get("store", False)),
        "temperature": request.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": [],
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None
        if not done
        else {
            "input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u.input_tokens + u.output_tokens,
        },
        "user": None,
        "metadata": {},
    }


def responses_events(a: _Answer, request: dict[str, Any], size: int) -> list[tuple[str | None, Any]]:
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **data}))

    emit("response.created", response=responses_body(a, request, done=False))
    emit("response.in_progress", response=responses_body(a, request, done=False))
    for index, (opening, final) in enumerate(zip(_responses_items(a, False), _responses_items(a, True))):
        emit("response.output_item.added", output_index=index, item=opening)
        where = {"item_id": final["id"], "output_index": index}
        if final["type"] == "message":
            part = final["content"][0]
            emit("response.content_part.added", **where, content_index=0, part=dict(part, text=""))
            for piece in _pieces(part["text"], size):
                emit("response.output_text.delta", **where, content_index=0, delta=piece, logprobs=[])
            emit("response.output_text.done", **where, content_index=0, text=part["text"], logprobs=[])
            emit("response.content_part.done", **where, content_index=0, part=part)
        elif final["type"] == "function_call":
            for piece in _pieces(final["arguments"], size):
                emit("response.function_call_arguments.delta", **where, delta=piece)
            emit("response.function_call_arguments.done", **where, name=final["name"], arguments=final["arguments"])
        else:
            for piece in _pieces(final["input"], size):
                emit("response.custom_tool_call_input.delta", **where, delta=piece)
            emit("response.custom_tool_call_input.done", **where, input=final["input"])
        emit("response.output_item.done", output_index=index, item=final)
    final_body = responses_body(a, request)
    emit("response.incomplete" if final_body["status"] == "incomplete" else "response.completed", response=final_body)
    return events


def _anthropic_stop(a: _Answer) -> str:
    return "tool_use" if a.calls else ("max_tokens" if a.finish == "length" else "end_turn")


def _anthropic_blocks(a: _Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": a.text}] if a.text else []
    blocks += [{"type": "tool_use", "id": cid, "name": c.name, "input": c.arguments_object()} for cid, c in a.calls]
    return blocks


def _anthropic_usage(u: Usage, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": u.input_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
        "output_tokens": output_tokens,
    }


def messages_body(a: _Answer) -> dict[str, Any]:
    return {
        "id": f"msg_{a.rid}",
        "type": "message",
        "role": "assistant",
        "model": a.model,
        "content": _anthropic_blocks(a),
        "stop_reason": _anthropic_stop(a),
        "stop_sequence": None,
        "usage": _anthropic_usage(a.usage, a.usage.output_tokens),
    }


def messages_events(a: _Answer, size: int) -> list[tuple[str | None, Any]]:
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, **data}))

    # message_start counts no output token, so a client that adds it to message_delta's
    # cumulative count still reports the scripted number.
    opening = dict(messages_body(a), content=[], stop_reason=None, usage=_anthropic_usage(a.usage, 0))
    emit("message_start", message=opening)
    emit("ping")
    for index, block in enumerate(_anthropic_blocks(a)):
        if block["type"] == "text":
            emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
            for piece in _pieces(block["text"], size):
                emit("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        else:
            emit("content_block_start", index=index, content_block=dict(block, input={}))
            for piece in _pieces(json.dumps(block["input"]), size):
                emit("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
        emit("content_block_stop", index=index)
    emit(
        "message_delta",
        delta={"stop_reason": _anthropic_stop(a), "stop_sequence": None},
        usage={"output_tokens": a.usage.output_tokens},
    )
    emit("message_stop")
    return events


def _merged_models(names: Iterable[str]) -> dict[str, Any]:
    """One list both OpenAI's and Anthropic's model-list clients read."""
    data = [
        {
            "id": name,
            "object": "model",
            "created": 1700000000,
            "owned_by": "model-server",
            "type": "model",
            "display_name": name,
            "created_at": "2024-01-01T00:00:00Z",
        }
        for name in names
    ]
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return {"object": "list", "data": data, "has_more": False, "first_id": first, "last_id": last}


# ---------------------------------------------------------------------------
# The HTTP side


class _Dropped(Exception):
    """The connection is closed without an answer."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # a client that connects and sends nothing cannot keep the server from stopping
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

    # -- the request

    def _handle(self) -> None:
        owner = self.server.owner
        self.close_connection = True  # one request per connection: nothing idles when stopping
        record: Recorded | None = None
        try:
            raw = self._read_body()
            body = _parse(raw)
            split = urlsplit(self.path)
            headers = {k.lower(): (REDACTED if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()}
            record = Recorded(self.command, split.path, split.query, headers, body)
            owner._record(record)
            route = split.path.rstrip("/")
            route = route[3:] if route.startswith("/v1/") else route
            endpoints: dict[tuple[str, str], Callable[[Recorded], None]] = {
                ("POST", "/chat/completions"): self._model_call,
                ("POST", "/responses"): self._model_call,
                ("POST", "/messages"): self._model_call,
                ("POST", "/messages/count_tokens"): self._count_tokens,
                ("GET", "/models"): self._models,
            }
            apis = {"/chat/completions": "chat", "/responses": "responses", "/messages": "messages"}
            record.api = apis.get(route) if self.command == "POST" else None
            handler = endpoints.get((self.command, route))
            if record.api is not None and record.api not in owner.apis:
                record.api, handler = None, None  # a server that does not speak this protocol
            if handler is None and self.command == "GET" and route.startswith("/models/"):
                handler = self._one_model
            if handler is None:
                message = f"model_server: no endpoint {self.command} {split.path}"
                error = {"type": "error", "error": {"type": "not_found_error", "message": message}}
                self._json(record, 404, error, outcome="not found")
                return
            handler(record)
        except _Dropped:
            self._drop()
        except (BrokenPipeError, ConnectionResetError):
            if record is not None:  # the client hung up before the answer was written
                record.outcome = "gave up"
        except Exception as exc:  # noqa: BLE001 - a bug here must show in the test, not as a hung client
            owner.errors.append(exc)
            try:
                bug = {"error": {"message": f"model_server bug: {exc!r}", "type": "server_error"}}
                self._json(record, 500, bug, outcome=f"server error: {exc!r}")
            except OSError:
                pass
        finally:
            owner._notify()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline(65537).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(65537)
            raw = b"".join(parts)
        else:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        return raw

    def _key_ok(self, record: Recorded) -> bool:
        expected = self.server.owner.api_key
        if expected is None:
            return True
        presented = {self.headers.get("x-api-key"), self.headers.get("api-key")}
        authorization = self.headers.get("Authorization") or ""
        if authorization.lower().startswith("bearer "):
            presented.add(authorization[7:].strip())
        record.key_ok = expected in presented
        return record.key_ok

    # -- endpoints

    def _model_call(self, record: Recorded) -> None:
        owner = self.server.owner
        api = cast(str, record.api)
        body = record.body if isinstance(record.body, dict) else None
        model = str(body.get("model") or "") if body else ""
        record.model = model or None
        prompt_tokens = _prompt_tokens(body) if body else 0
        if body is None:
            self._error(record, api, "bad_request", Turn(message="model_server: the body is not a JSON object"), model)
            return
        record.stream = bool(body.get("stream"))
        record.text = last_input_text(api, body)
        if not self._key_ok(record):
            self._error(record, api, "auth", None, model, prompt_tokens)
            return
        turn, index = owner._take(api, model, record.text)
        record.turn = index
        if turn is None:
            message = (
                f"model_server: no scripted turn left for this {api} request; its last message: {record.text[:200]!r}"
            )
            self._error(record, api, "bad_request", Turn(message=message), model, prompt_tokens, outcome="no turn")
            return
        if turn.delay and owner._stopping.wait(turn.delay):
            record.outcome = "stopped"
            raise _Dropped
        if turn.error in HTTP_ERRORS:
            self._error(record, api, turn.error, turn, model, prompt_tokens)
            return
        if turn.error == "hang" or (turn.error == "stall" and not record.stream):
            self._hang(record)
            return
        if turn.error == "disconnect":
            record.outcome = "dropped"
            raise _Dropped
        if turn.error == "down":
            record.outcome = "dropped"
            owner._go_down()  # first: once the client sees the drop, nothing listens any more
            raise _Dropped
        answer = owner._answer(turn, model or "scripted", prompt_tokens, api)
        size = owner.chunk_chars
        if not record.stream:
            rendered = {
                "chat": lambda: chat_body(answer),
                "responses": lambda: responses_body(answer, body),
                "messages": lambda: messages_body(answer),
            }[api]()
            self._json(record, 200, rendered, outcome="reply")
        else:
            include = (body.get("stream_options") or {}).get("include_usage")
            events = {
                "chat": lambda: chat_events(answer, size, bool(include) or owner.stream_usage == "always"),
                "responses": lambda: responses_events(answer, body, size),
                "messages": lambda: messages_events(answer, size),
            }[api]()
            self._stream(record, events, stall=turn.error == "stall")

    def _count_tokens(self, record: Recorded) -> None:
        body = record.body if isinstance(record.body, dict) else {}
        record.model = str(body.get("model") or "") or None
        if not self._key_ok(record):
            self._error(record, "messages", "auth", None, record.model or "", 0)
            return
        self._json(record, 200, {"input_tokens": _prompt_tokens(body)}, outcome="info")

    def _models(self, record: Recorded) -> None:
        owner = self.server.owner
        if not self._key_ok(record):
            self._error(record, "chat", "auth", None, "", 0)
            return
        listing = owner.models_response if owner.models_response is not None else _merged_models(owner.models)
        self._json(record, 200, listing, outcome="info")

    def _one_model(self, record: Recorded) -> None:
        name = record.path.rstrip("/").split("/models/", 1)[1]
        self._json(record, 200, _merged_models([name])["data"][0], outcome="info")

    # -- answers

    def _headers(self, status: int, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        rid = f"req_{self.server.owner._next_id()}"
        self.send_header("x-request-id", rid)
        self.send_header("request-id", rid)
        self.send_header("Connection", "close")
        for name, value in (extra or {}).items():
            self.send_header(name, value)

    def _json(
        self,
        record: Recorded | None,
        status: int,
        body: Any,
        extra: dict[str, str] | None = None,
        outcome: str | None = None,
    ) -> None:
        if record is not None:  # before the client can see the answer
            record.status, record.outcome = status, outcome or ("error" if status >= 400 else "reply")
        data = json.dumps(body, ensure_ascii=False).encode()
        self._headers(status, "application/json", extra)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(
        self,
        record: Recorded,
        api: str,
        kind: str,
        turn: Turn | None,
        model: str,
        prompt_tokens: int = 0,
        outcome: str = "error",
    ) -> None:
        status, body = provider_error(api, kind, turn, model, prompt_tokens)
        extra: dict[str, str] = {}
        if turn is not None and turn.retry_after is not None:
            extra = {"retry-after": f"{turn.retry_after:g}", "retry-after-ms": str(round(turn.retry_after * 1000))}
        if api == "messages":
            extra["x-should-retry"] = "true" if status in (429, 500, 529) else "false"
        self._json(record, status, body, extra, outcome)

    def _stream(self, record: Recorded, events: list[tuple[str | None, Any]], stall: bool) -> None:
        self._headers(200, "text/event-stream; charset=utf-8", {"Cache-Control": "no-cache"})
        self.send_header("Transfer-Encoding", "chunked")
        record.status, record.outcome = 200, "reply"
        self.end_headers()
        for name, data in events[:2] if stall else events:
            payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
            text = (f"event: {name}\n" if name else "") + f"data: {payload}\n\n"
            chunk = text.encode()
            self.wfile.write(f"{len(chunk):X}\r\n".encode() + chunk + b"\r\n")
        if stall:
            self._hang(record)
            return
        self.wfile.write(b"0\r\n\r\n")

    def _hang(self, record: Recorded) -> None:
        """Answer nothing until the client hangs up, the server stops or the cap is reached."""
        owner = self.server.owner
        deadline = time.monotonic() + owner.hang_cap_s
        record.outcome = "hanging"
        owner._notify()
        while True:
            if owner._stopping.is_set():
                record.outcome = "stopped"
                raise _Dropped
            if time.monotonic() >= deadline:
                record.outcome = "hang cap"
                raise _Dropped
            if self._client_gone(0.05):
                record.outcome = "gave up"
                raise _Dropped

    def _client_gone(self, wait: float) -> bool:
        readable, _, _ = select.select([self.connection], [], [], wait)
        if not readable:
            return False
        try:
            if self.connection.recv(1, socket.MSG_PEEK) == b"":
                return True
        except OSError:
            return True
        time.sleep(wait)  # the client sent more bytes: still there, and no busy loop
        return False

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins every handler thread
    block_on_close = True
    allow_reuse_address = False

    def __init__(self, owner: ModelServer, port: int = 0) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", port), _Handler)  # loopback only, never another address


# ---------------------------------------------------------------------------
# The server


class ModelServer:
    """The scripted server. `start()`/`stop()`, or use it as a context manager."""

    def __init__(
        self,
        turns: Iterable[Turn | dict[str, Any]] = (),
        *,
        api_key: str | None = None,
        hang_cap_s: float = 30.0,
        chunk_chars: int = 16,
        stream_usage: Literal["requested", "always"] = "requested",
        models: Sequence[str] = ("scripted",),
        apis: Sequence[str] = APIS,
        port: int = 0,
    ) -> None:
        self._port_wanted = port
        self.api_key = api_key
        self.hang_cap_s = hang_cap_s
        self.chunk_chars = chunk_chars
        self.stream_usage = stream_usage
        self.models = list(models)
        self.apis = tuple(apis)  # the protocols served; another model endpoint is a 404 like any unknown path
        self.models_response: Any = None  # a body for GET /models instead of the list of `models`
        self.override: Turn | None = None
        self.fallback: Turn | None = None
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._turns: list[Turn] = []
        self._uses: list[int] = []
        self._requests: list[Recorded] = []
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None
        self.script(turns)

    # -- life

    def start(self) -> Self:
        if self._httpd is not None:
            raise RuntimeError("the model server is already started")
        self._stopping.clear()
        self._httpd = _HttpServer(self, self._port_wanted)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening, end every hanging answer, and join every thread. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()  # closes the socket and joins the handler threads
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def running(self) -> bool:
        return self._httpd is not None and not self._stopping.is_set() and self._httpd.socket.fileno() != -1

    def _go_down(self) -> None:
        """A "down" turn: stop listening now; `stop()` joins the threads later."""
        httpd = self._httpd
        if httpd is not None:
            self._stopping.set()  # like a crash: hanging and delayed answers are dropped too
            httpd.shutdown()
            httpd.socket.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the model server is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    # -- the script

    def script(self, turns: Iterable[Turn | dict[str, Any]]) -> None:
        """Replace the script; every turn starts unused."""
        parsed = [Turn.of(t) for t in turns]
        with self._lock:
            self._turns, self._uses = parsed, [0] * len(parsed)

    def add(self, *turns: Turn | dict[str, Any]) -> None:
        parsed = [Turn.of(t) for t in turns]
        with self._lock:
            self._turns += parsed
            self._uses += [0] * len(parsed)

    def unused(self) -> list[tuple[int, Turn]]:
        """The turns with uses left (unlimited ones excluded)."""
        with self._lock:
            return [(i, t) for i, (t, used) in enumerate(zip(self._turns, self._uses)) if t.times and used < t.times]

    def _take(self, api: str, model: str, text: str) -> tuple[Turn | None, int | None]:
        with self._lock:
            if self.override is not None:
                return self.override, -1
            for index, turn in enumerate(self._turns):
                if turn.times is not None and self._uses[index] >= turn.times:
                    continue
                if turn.accepts(api, model, text):
                    self._uses[index] += 1
                    return turn, index
            if self.fallback is not None:
                return self.fallback, -2
        return None, None

    def _answer(self, turn: Turn, model: str, prompt_tokens: int, api: str) -> _Answer:
        rid = self._next_id()
        prefix = "toolu" if api == "messages" else "call"
        calls = [(c.id or f"{prefix}_{rid}_{i}", c) for i, c in enumerate(turn.tool_calls)]
        if turn.usage is not None:
            usage = Usage.of(turn.usage)
        else:
            produced = turn.reply + "".join(c.name + c.arguments_json() for _, c in calls)
            usage = Usage(prompt_tokens, _estimate(produced))
        return _Answer(rid, model, turn.reply, calls, usage, turn.finish)

    def _next_id(self) -> int:
        return next(self._ids)  # itertools.count is atomic under the GIL

    # -- records

    def _record(self, record: Recorded) -> None:
        with self._lock:
            self._requests.append(record)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    def model_requests(self, api: str | None = None) -> list[Recorded]:
        """The requests to the three model endpoints (of one protocol, when given)."""
        return [r for r in self.requests if r.api is not None and (api is None or r.api == api)]

    def prompts(self, api: str | None = None) -> list[str]:
        """The last user or tool message of each model request, in order."""
        return [r.text for r in self.model_requests(api)]

    def wait_for_requests(
        self, count: int = 1, timeout: float = 10.0, where: Callable[[Recorded], bool] | None = None
    ) -> list[Recorded]:
        """Wait until `count` recorded requests (those `where` accepts) are handled or hanging."""

        def ready() -> list[Recorded]:
            found = [r for r in self._requests if r.outcome != "pending" and (where is None or where(r))]
            return found if len(found) >= count else []

        with self._changed:
            if not self._changed.wait_for(ready, timeout):
                raise TimeoutError(f"{count} request(s) did not come within {timeout} s: {self._requests}")
            return ready()


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A started ModelServer with an empty script; stopped (threads joined) after the test."""
    server = ModelServer().start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a scripted model on 127.0.0.1.")
    parser.add_argument("script", help="a JSON list of turns")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as handle:
        server = ModelServer(json.load(handle), port=args.port).start()
    print(f"OpenAI: {server.openai_base_url}  Anthropic: {server.anthropic_base_url}", flush=True)
    shown = 0
    try:
        while True:
            time.sleep(0.2)
            done = server.requests[shown:]
            for r in done:
                print(f"{r.method} {r.path} -> {r.status} {r.outcome} turn={r.turn} {r.text[:80]!r}", file=sys.stderr)
            shown += len(done)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
