"""The scripted model server, driven by real clients: the `openai` package for chat
completions and Responses, raw httpx for Anthropic's Messages SSE."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from model_server import REDACTED, ModelServer, ToolCall, Turn, Usage

ANTHROPIC_HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


def openai_client(server: ModelServer, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0, **options)


def anthropic_post(server: ModelServer, body: dict[str, Any], path: str = "/v1/messages") -> httpx.Response:
    return httpx.post(server.anthropic_base_url + path, json=body, headers=ANTHROPIC_HEADERS, timeout=10)


def anthropic_events(server: ModelServer, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed Messages call, as (event name, data)."""
    events = []
    with httpx.stream(
        "POST",
        server.anthropic_base_url + "/v1/messages?beta=true",
        json=dict(body, stream=True),
        headers=ANTHROPIC_HEADERS,
        timeout=10,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        name = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                assert data["type"] == name
                events.append((name, data))
    return events


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": text}]


# ---------------------------------------------------------------------------
# OpenAI chat completions


def test_chat_reply_is_recorded_with_what_the_client_sent(model_server: ModelServer) -> None:
    model_server.script([Turn(match="fix the bug", reply="Fixed it.", usage=Usage(1200, 30, cache_read_tokens=200))])

    reply = openai_client(model_server).chat.completions.create(
        model="gpt-test", messages=user("Please fix the bug in parse()"), max_tokens=512
    )

    assert reply.choices[0].message.content == "Fixed it."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "gpt-test"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (1200, 30, 1230)
    assert reply.usage.prompt_tokens_details.cached_tokens == 200
    [request] = model_server.requests
    assert (request.method, request.path, request.api, request.turn, request.status) == (
        "POST",
        "/v1/chat/completions",
        "chat",
        0,
        200,
    )
    assert (request.model, request.stream, request.outcome) == ("gpt-test", False, "reply")
    assert request.body["max_tokens"] == 512
    assert request.text == "Please fix the bug in parse()"
    assert request.headers["authorization"] == REDACTED
    assert "sk-test" not in json.dumps(request.headers)
    assert model_server.errors == []


def test_chat_stream_with_a_tool_call_and_a_usage_chunk(model_server: ModelServer) -> None:
    call = ToolCall("bash", {"command": "ls -la && cat README.md"})
    model_server.script([Turn(reply="Let me look at the repository first.", tool_calls=[call], usage=(90, 25))])

    with openai_client(model_server).chat.completions.stream(
        model="gpt-test", messages=user("list files"), stream_options={"include_usage": True}
    ) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        final = stream.get_final_completion()

    assert len(deltas) > 1  # really streamed in pieces
    message = final.choices[0].message
    assert message.content == "Let me look at the repository first."
    [tool_call] = message.tool_calls or []
    assert tool_call.function.name == "bash"
    assert json.loads(tool_call.function.arguments) == {"command": "ls -la && cat README.md"}
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.usage is not None and (final.usage.prompt_tokens, final.usage.completion_tokens) == (90, 25)
    assert model_server.requests[0].stream is True


def test_chat_stream_sends_usage_only_when_asked(model_server: ModelServer) -> None:
    model_server.script([Turn(reply="one", times=None)])
    client = openai_client(model_server)

    chunks = list(client.chat.completions.create(model="m", messages=user("hi"), stream=True))

    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one"
    assert all(c.usage is None for c in chunks)
    always = ModelServer([Turn(reply="two")], stream_usage="always")
    with always:
        chunks = list(openai_client(always).chat.completions.create(model="m", messages=user("hi"), stream=True))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


def test_turns_answer_in_order_and_by_match_on_the_last_user_or_tool_message(model_server: ModelServer) -> None:
    call = ToolCall("bash", {"command": "pytest -q"}, id="call_pytest")
    model_server.script(
        [
            Turn(match="2 passed", reply="All green."),
            Turn(reply="Running the tests.", tool_calls=[call]),
        ]
    )
    client = openai_client(model_server)

    first = client.chat.completions.create(model="m", messages=user("make the tests pass"))
    assert first.choices[0].message.tool_calls[0].id == "call_pytest"  # type: ignore[index]
    history = user("make the tests pass") + [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": "call_pytest", "content": "2 passed in 0.01s"},
    ]
    second = client.chat.completions.create(model="m", messages=history)

    assert second.choices[0].message.content == "All green."
    assert [r.turn for r in model_server.requests] == [1, 0]
    assert model_server.prompts() == ["make the tests pass", "2 passed in 0.01s"]
    assert model_server.unused() == []


def test_model_and_api_filters_and_unlimited_turns(model_server: ModelServer) -> None:
    model_server.script(
        [
            Turn(model="haiku", reply="side question", times=None),
            Turn(api="responses", reply="responses only"),
            Turn(reply="main"),
        ]
    )
    client = openai_client(model_server)

    assert client.chat.completions.create(model="claude-haiku", messages=user("a")).choices[0].message.content == (
        "side question"
    )
    assert client.chat.completions.create(model="claude-haiku", messages=user("b")).choices[0].message.content == (
        "side question"
    )
    assert client.chat.completions.create(model="big", messages=user("c")).choices[0].message.content == "main"
    assert [i for i, _ in model_server.unused()] == [1]


def test_a_request_no_turn_matches_is_a_clear_400_or_the_fallback(model_server: ModelServer) -> None:
    client = openai_client(model_server)

    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="m", messages=user("anything"))
    assert "no scripted turn left" in str(caught.value) and "anything" in str(caught.value)
    assert model_server.requests[-1].outcome == "no turn"

    model_server.fallback = Turn(reply="fallback")
    assert client.chat.completions.create(model="m", messages=user("x")).choices[0].message.content == "fallback"
    assert model_server.requests[-1].turn == -2


def test_empty_replies(model_server: ModelServer) -> None:
    model_server.script([Turn(times=None)])
    client = openai_client(model_server)

    chat = client.chat.completions.create(model="m", messages=user("hi"))
    assert chat.choices[0].message.content == "" and not chat.choices[0].message.tool_calls
    assert client.responses.create(model="m", input="hi").output_text == ""
    body = anthropic_post(model_server, {"model": "c", "max_tokens": 10, "messages": user("hi")[1:]}).json()
    assert (body["content"], body["stop_reason"]) == ([], "end_turn")
    streamed = anthropic_events(model_server, {"model": "c", "max_tokens": 10, "messages": user("hi")[1:]})
    assert [name for name, _ in streamed] == ["message_start", "ping", "message_delta", "message_stop"]


# ---------------------------------------------------------------------------
# OpenAI Responses


def test_responses_plain_call(model_server: ModelServer) -> None:
    model_server.script([Turn(match="^Add a CLI flag$", reply="Done: added --verbose.", usage=Usage(300, 12))])
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox rules"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Add a CLI flag"}]},
    ]

    client = openai_client(model_server)
    response = client.responses.create(
        model="gpt-codex", instructions="You are Codex.", input=items, max_output_tokens=2048
    )

    assert response.output_text == "Done: added --verbose."
    assert response.status == "completed"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (300, 12, 312)
    [request] = model_server.requests
    assert (request.path, request.api, request.model) == ("/v1/responses", "responses", "gpt-codex")
    assert request.body["instructions"] == "You are Codex."
    assert request.body["max_output_tokens"] == 2048


def test_responses_stream_with_function_and_custom_tool_calls(model_server: ModelServer) -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
    model_server.script(
        [
            Turn(
                reply="Checking.",
                tool_calls=[
                    ToolCall("shell_command", {"command": "git status"}),
                    ToolCall("apply_patch", patch, custom=True),
                ],
                usage=Usage(500, 40, cache_read_tokens=100),
            )
        ]
    )

    with openai_client(model_server).responses.stream(model="gpt-codex", input="look around") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()

    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert "response.output_text.delta" in kinds and "response.function_call_arguments.delta" in kinds
    assert "response.custom_tool_call_input.delta" in kinds
    assert kinds.count("response.output_item.done") == 3
    assert kinds[-1] == "response.completed"
    message, shell, custom = final.output
    assert message.type == "message" and final.output_text == "Checking."
    assert shell.type == "function_call" and shell.name == "shell_command"
    assert json.loads(shell.arguments) == {"command": "git status"}
    assert custom.type == "custom_tool_call" and custom.input == patch
    assert shell.call_id != custom.call_id
    assert final.usage is not None and final.usage.input_tokens_details.cached_tokens == 100
    assert (final.usage.input_tokens, final.usage.output_tokens) == (500, 40)


def test_responses_match_a_function_call_output(model_server: ModelServer) -> None:
    model_server.script([Turn(match="On branch main", reply="Clean tree.")])
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "status?"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "On branch main\nnothing to commit"},
    ]

    response = openai_client(model_server).responses.create(model="m", input=items)  # type: ignore[arg-type]

    assert response.output_text == "Clean tree."


# ---------------------------------------------------------------------------
# Anthropic Messages


def test_messages_plain_call_and_count_tokens(model_server: ModelServer) -> None:
    model_server.script(
        [Turn(reply="Hello from Claude.", usage=Usage(40, 6, cache_read_tokens=3, cache_write_tokens=2))]
    )
    body = {"model": "claude-sonnet", "max_tokens": 1024, "system": "Be brief.", "messages": user("hi")[1:]}

    response = anthropic_post(model_server, body)
    counted = anthropic_post(model_server, body, "/v1/messages/count_tokens?beta=true")

    assert response.status_code == 200
    assert response.json() == {
        "id": response.json()["id"],
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet",
        "content": [{"type": "text", "text": "Hello from Claude."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 40,
            "cache_creation_input_tokens": 2,
            "cache_read_input_tokens": 3,
            "output_tokens": 6,
        },
    }
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    message, count = model_server.requests
    assert (message.api, message.headers["x-api-key"], message.headers["anthropic-version"]) == (
        "messages",
        REDACTED,
        "2023-06-01",
    )
    assert (count.path, count.query, count.api, count.outcome) == (
        "/v1/messages/count_tokens",
        "beta=true",
        None,
        "info",
    )
    assert model_server.model_requests() == [message]


def test_messages_stream_with_a_tool_use_block(model_server: ModelServer) -> None:
    arguments = {"command": "python -m pytest -q", "description": "Run the tests"}
    model_server.script([Turn(match="tests", reply="I'll run them.", tool_calls=[ToolCall("Bash", arguments)])])

    events = anthropic_events(
        model_server,
        {
            "model": "claude-sonnet",
            "max_tokens": 64,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                        {"type": "text", "text": "run the tests"},
                    ],
                }
            ],
        },
    )

    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["output_tokens"] == 0
    blocks: dict[int, dict[str, Any]] = {}
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"], text="", json="")
        elif name == "content_block_delta":
            delta = data["delta"]
            block = blocks[data["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                assert delta["type"] == "input_json_delta"
                block["json"] += delta["partial_json"]
    assert blocks[0]["type"] == "text" and blocks[0]["text"] == "I'll run them."
    assert blocks[1]["type"] == "tool_use" and blocks[1]["name"] == "Bash" and blocks[1]["id"].startswith("toolu_")
    assert json.loads(blocks[1]["json"]) == arguments
    assert names.count("content_block_stop") == 2
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0
    assert model_server.requests[0].query == "beta=true"


def test_messages_match_a_tool_result(model_server: ModelServer) -> None:
    model_server.script([Turn(match="exit code 0", reply="Tests pass.")])
    messages = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "exit code 0"}]}
            ],
        },
    ]

    body = anthropic_post(model_server, {"model": "c", "max_tokens": 8, "messages": messages}).json()

    assert body["content"] == [{"type": "text", "text": "Tests pass."}]


# ---------------------------------------------------------------------------
# Failures


def test_401_in_each_provider_shape(model_server: ModelServer) -> None:
    model_server.override = Turn(error="auth")  # every model call, whatever the script

    with pytest.raises(openai.AuthenticationError) as chat:
        openai_client(model_server).chat.completions.create(model="m", messages=user("hi"))
    with pytest.raises(openai.AuthenticationError):
        openai_client(model_server).responses.create(model="m", input="hi", stream=True)
    anthropic = anthropic_post(model_server, {"model": "c", "max_tokens": 8, "messages": user("hi")[1:]})

    assert chat.value.code == "invalid_api_key"
    assert anthropic.status_code == 401
    assert anthropic.json()["type"] == "error" and anthropic.json()["error"]["type"] == "authentication_error"
    assert [r.status for r in model_server.requests] == [401, 401, 401]


def test_a_server_api_key_refuses_a_request_without_it() -> None:
    with ModelServer([Turn(reply="ok", times=None)], api_key="sk-right") as server:
        with pytest.raises(openai.AuthenticationError):
            openai_client(server).chat.completions.create(model="m", messages=user("hi"))
        right = openai.OpenAI(base_url=server.openai_base_url, api_key="sk-right", max_retries=0)
        assert right.chat.completions.create(model="m", messages=user("hi")).choices[0].message.content == "ok"
        assert [r.key_ok for r in server.requests] == [False, True]


def test_429_500_and_overloaded(model_server: ModelServer) -> None:
    model_server.script(
        [
            Turn(error="rate_limit", retry_after=2),
            Turn(error="server"),
            Turn(api="messages", error="overloaded"),
            Turn(api="messages", error="context_window"),
        ]
    )
    client = openai_client(model_server)

    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="m", messages=user("hi"))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=user("hi"))
    overloaded = anthropic_post(model_server, {"model": "c", "max_tokens": 8, "messages": user("hi")[1:]})
    too_long = anthropic_post(model_server, {"model": "c", "max_tokens": 8, "messages": user("hi")[1:]})

    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.code == "rate_limit_exceeded"
    assert (overloaded.status_code, overloaded.json()["error"]["type"]) == (529, "overloaded_error")
    assert too_long.status_code == 400 and "prompt is too long" in too_long.json()["error"]["message"]


def test_a_hang_lasts_until_the_client_gives_up(model_server: ModelServer) -> None:
    model_server.script([Turn(error="hang")])

    with pytest.raises(openai.APITimeoutError):
        openai_client(model_server, timeout=0.3).chat.completions.create(model="m", messages=user("hi"))

    [request] = model_server.wait_for_requests(where=lambda r: r.outcome == "gave up")
    assert request.status is None


def test_a_hang_is_capped_by_the_server() -> None:
    with ModelServer([Turn(error="hang")], hang_cap_s=0.2) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(server.openai_base_url + "/chat/completions", json={"model": "m", "messages": []}, timeout=10)
        assert server.requests[0].outcome == "hang cap"


def test_a_stalled_stream_opens_then_goes_quiet(model_server: ModelServer) -> None:
    model_server.script([Turn(reply="never finished", error="stall")])
    body = json.dumps({"model": "m", "input": "x", "stream": True}).encode()
    request = (
        f"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body

    with socket.create_connection(("127.0.0.1", model_server.port or 0), timeout=10) as conn:
        conn.sendall(request)
        received = b""
        while received.count(b"event: ") < 2:  # the stream opens: however long the machine takes
            received += conn.recv(65536)
        conn.settimeout(0.3)
        with pytest.raises(TimeoutError):  # then nothing more comes
            received += conn.recv(65536)

    assert received.startswith(b"HTTP/1.1 200")
    assert b"event: response.created" in received and b"event: response.in_progress" in received
    assert b"response.output_item" not in received
    model_server.wait_for_requests(where=lambda r: r.outcome == "gave up")


def test_disconnect_and_down(model_server: ModelServer) -> None:
    model_server.script([Turn(error="disconnect"), Turn(reply="still here"), Turn(error="down")])
    client = openai_client(model_server)

    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=user("hi"))
    assert client.chat.completions.create(model="m", messages=user("hi")).choices[0].message.content == "still here"
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=user("hi"))
    with pytest.raises(openai.APIConnectionError):  # nothing listens any more
        client.chat.completions.create(model="m", messages=user("hi"))

    assert not model_server.running
    assert [r.outcome for r in model_server.requests] == ["dropped", "reply", "dropped"]


# ---------------------------------------------------------------------------
# Other endpoints, and the server's life


def test_models_and_unknown_paths(model_server: ModelServer) -> None:
    models = openai_client(model_server).models.list()
    unknown = httpx.get(model_server.base_url + "/api/oauth/profile", timeout=10)

    assert [m.id for m in models] == ["scripted"]
    assert unknown.status_code == 404 and "no endpoint GET /api/oauth/profile" in unknown.json()["error"]["message"]
    assert [(r.path, r.outcome) for r in model_server.requests] == [
        ("/v1/models", "info"),
        ("/api/oauth/profile", "not found"),
    ]


def test_a_server_of_one_protocol_has_no_endpoint_for_the_others() -> None:
    with ModelServer([Turn(reply="chat only", times=None)], apis=("chat",)) as server:
        chat = openai_client(server).chat.completions.create(model="m", messages=user("hi"))
        with pytest.raises(openai.NotFoundError, match="no endpoint POST /v1/responses"):
            openai_client(server).responses.create(model="m", input="hi")

    assert chat.choices[0].message.content == "chat only"
    assert [(r.path, r.api, r.status) for r in server.requests] == [
        ("/v1/chat/completions", "chat", 200),
        ("/v1/responses", None, 404),
    ]


@pytest.fixture
def threads_before() -> Iterator[set[threading.Thread]]:
    yield set(threading.enumerate())


def test_stop_ends_hanging_answers_and_leaves_no_thread_or_port(threads_before: set[threading.Thread]) -> None:
    server = ModelServer([Turn(error="hang", times=None)], hang_cap_s=60).start()
    port = server.port
    assert port is not None
    failures: list[BaseException] = []

    def call() -> None:
        try:
            httpx.post(server.openai_base_url + "/chat/completions", json={"model": "m", "messages": []}, timeout=60)
        except httpx.HTTPError as exc:
            failures.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    server.wait_for_requests(where=lambda r: r.outcome == "hanging")
    server.stop()
    caller.join(10)

    assert not caller.is_alive() and len(failures) == 1
    assert server.requests[0].outcome == "stopped"
    assert set(threading.enumerate()) <= threads_before
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    server.stop()  # a second stop does nothing


def test_listens_on_loopback_only(model_server: ModelServer) -> None:
    assert model_server.base_url.startswith("http://127.0.0.1:")
    assert model_server._httpd is not None and model_server._httpd.server_address[0] == "127.0.0.1"


def test_script_turns_from_dicts_are_checked() -> None:
    server = ModelServer([{"reply": "x", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}])
    assert server.unused()[0][1].tool_calls == [ToolCall("bash", {"command": "ls"})]
    with pytest.raises(TypeError):
        ModelServer([{"replly": "typo"}])
    with pytest.raises(ValueError):
        Turn(error="explode")
