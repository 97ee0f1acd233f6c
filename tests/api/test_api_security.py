"""The API's guards over real HTTP: the token, the roots, the body limit, redaction."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import orjson
import pytest
from apikit import HISTORY, REFLECT, Serve, conversation, history_file, reflect_body

pytestmark = pytest.mark.anyio

OPENAI_KEY = "sk-proj-4fGh8JkLmN2pQrStUvWxYz01AbCdEf"
PASSWORD = "password=Hunter2-correct-horse"


async def test_a_token_is_needed_everywhere_but_health(serve: Serve, project: Path) -> None:
    async with serve(token="s3cret-token-value") as client:
        missing = await client.post(REFLECT, json=reflect_body(project))
        wrong = await client.get(HISTORY, params={"projectPath": str(project)},
                                 headers={"Authorization": "Bearer not-the-token"})
        other_scheme = await client.get("/openapi.json", headers={"Authorization": "Basic s3cret-token-value"})
        unknown_route = await client.get("/api/anything")
        health = await client.get("/api/health")
        right = await client.post(REFLECT, json=reflect_body(project),
                                  headers={"Authorization": "Bearer s3cret-token-value"})
    for refused in (missing, wrong, other_scheme, unknown_route):
        assert refused.status_code == 401 and refused.json()["success"] is False
        assert refused.headers["www-authenticate"] == "Bearer"
    assert health.status_code == 200 and right.status_code == 200
    assert "Bearer" in other_scheme.json()["error"] and "not a Basic one" in other_scheme.json()["error"]
    assert wrong.json()["error"] == "the bearer token is wrong"
    assert len(history_file(project).read_bytes().splitlines()) == 1


async def test_a_path_that_climbs_out_of_the_root_is_refused(serve: Serve, root: Path) -> None:
    elsewhere = root.parent / "elsewhere"
    elsewhere.mkdir()
    climbing = f"{root}/../elsewhere"
    async with serve() as client:
        answers = [
            await client.post(REFLECT, json=reflect_body(Path(climbing))),
            await client.get(HISTORY, params={"projectPath": climbing}),
            await client.delete(HISTORY, params={"projectPath": climbing}),
            await client.get(HISTORY, params={"projectPath": str(root.parent)}),
        ]
    assert [a.status_code for a in answers] == [403] * 4
    assert "outside the folders this server may use" in answers[0].json()["error"]
    assert list(elsewhere.iterdir()) == []


async def test_a_symlink_inside_the_root_leading_out_is_refused(serve: Serve, root: Path, project: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    (project / ".openagents").symlink_to(outside, target_is_directory=True)  # a project whose memory leads out
    async with serve() as client:
        through_link = await client.post(REFLECT, json=reflect_body(root / "link"))
        through_memory = await client.post(REFLECT, json=reflect_body(project))
        listed = await client.get(HISTORY, params={"projectPath": str(root / "link")})
    assert through_link.status_code == 403 and listed.status_code == 403
    assert through_memory.status_code == 403 and ".openagents/memory" in through_memory.json()["error"]
    assert list(outside.iterdir()) == []


async def test_a_body_over_the_limit_is_refused_with_413(serve: Serve, project: Path) -> None:
    big = reflect_body(project, conversation=[{"role": "user", "content": "x" * 4096}])

    async def chunks():  # no Content-Length: the limit holds while the stream is read
        for _ in range(8):
            yield b"x" * 1024

    async with serve(max_body=2048) as client:
        declared = await client.post(REFLECT, json=big)
        streamed = await client.post(REFLECT, content=chunks(), headers={"content-type": "application/json"})
    for response in (declared, streamed):
        assert response.status_code == 413
        assert response.json()["error"] == "the request body is larger than this server's limit of 2048 bytes"
    assert not history_file(project).exists()


async def test_a_lying_content_length_is_refused_before_the_body_is_sent(serve: Serve) -> None:
    """The header claims 1 GB and only a few bytes follow: the answer comes without waiting for the rest."""
    async with serve(max_body=2048) as client:
        port = client.base_url.port
        assert port is not None
        with anyio.fail_after(5):
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                await stream.send(b"POST /api/skills/reflect HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{\"a\":")
                answer = b""
                while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                    answer += await stream.receive()
    assert answer.startswith(b"HTTP/1.1 413")
    assert orjson.loads(answer.split(b"\r\n\r\n", 1)[1])["success"] is False


async def test_secrets_in_a_conversation_never_reach_the_stored_line(serve: Serve, project: Path) -> None:
    talk = conversation(secret=f"Used {OPENAI_KEY} and {PASSWORD} to log in.")
    body = reflect_body(project, conversation=talk, taskDescription=f"deploy with {OPENAI_KEY}")
    async with serve() as client:
        result = (await client.post(REFLECT, json=body)).json()["result"]
        listed = (await client.get(HISTORY, params={"projectPath": str(project)})).text
    stored = history_file(project).read_text()
    for secret in (OPENAI_KEY, "Hunter2-correct-horse"):
        assert secret not in stored and secret not in listed and secret not in orjson.dumps(result).decode()
    assert not any(secret in p.read_text() for p in project.rglob("*") if p.is_file()
                   for secret in (OPENAI_KEY, "Hunter2"))


async def test_nothing_outside_the_root_changes_after_the_whole_suite_of_refusals(serve: Serve, tmp_path: Path,
                                                                                 root: Path) -> None:
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    async with serve() as client:
        for path in (str(tmp_path), f"{root}/..", "/", "/etc", f"{root}/proj/../../x"):
            response = await client.post(REFLECT, json=reflect_body(Path(path)))
            assert response.status_code == 403, path
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert not os.path.exists("/.openagents")


async def test_a_web_page_of_another_site_can_neither_write_nor_read(asgi: Serve, project: Path) -> None:
    """A browser sends a cross-site text/plain or form POST without asking; a page under a
    name rebound to 127.0.0.1 reaches the server with its own Host."""
    query = {"projectPath": str(project)}
    async with asgi() as client:
        refused = [
            await client.post(REFLECT, content=orjson.dumps(reflect_body(project)),
                              headers={"content-type": "text/plain"}),
            await client.post(REFLECT, content=b"projectPath=x",
                              headers={"content-type": "application/x-www-form-urlencoded"}),
            await client.post(REFLECT, json=reflect_body(project), headers={"origin": "https://evil.example"}),
            await client.delete(HISTORY, params=query, headers={"origin": "null"}),
            await client.get(HISTORY, params=query, headers={"host": "rebound.example:8765"}),
        ]
        allowed = [
            await client.post(REFLECT, json=reflect_body(project, "s-1")),  # a script: no Origin
            await client.post(REFLECT, json=reflect_body(project, "s-2"), headers={"origin": "http://localhost:5173"}),
            await client.post(REFLECT, content=orjson.dumps(reflect_body(project, "s-3")),
                              headers={"content-type": "application/json; charset=utf-8",
                                       "origin": "http://[::1]:3000"}),
        ]
    assert [a.status_code for a in refused] == [415, 415, 403, 403, 403]
    assert refused[0].json()["error"] == "the body must be sent as Content-Type: application/json, not text/plain"
    assert refused[2].json()["error"] == ("this server answers no web page of another site "
                                          "(Origin: https://evil.example)")
    assert refused[4].json()["error"].endswith("only requests addressed to localhost, 127.0.0.1 or [::1], "
                                               "not rebound.example:8765")
    assert [a.status_code for a in allowed] == [200] * 3
    assert len(history_file(project).read_bytes().splitlines()) == 3


async def test_with_a_token_any_host_name_may_be_used(asgi: Serve, project: Path) -> None:
    async with asgi(token="s3cret-token-value") as client:
        listed = await client.get(HISTORY, params={"projectPath": str(project)},
                                  headers={"host": "api.example.com", "authorization": "Bearer s3cret-token-value"})
    assert listed.status_code == 200
