"""The Reflect endpoints over real HTTP: shapes, the memory file, history, limits, errors."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import anyio
import orjson
import pytest
from apikit import HISTORY, REFLECT, Serve, conversation, history_file, reflect_body

from orchestrator.api import routes
from orchestrator.api.memory_feed import MemoryFeed, Remembered
from orchestrator.api.schemas import ClearResponse, ErrorResponse, HealthResponse, HistoryResponse, ReflectResponse
from orchestrator.api.settings import ApiSettings, ReflectConfig
from reflection.reflect_skill import Reflected, ReflectRequest, reflect_and_read

pytestmark = pytest.mark.anyio

CRITERIA = ["task_completion", "code_quality", "error_handling", "test_coverage"]


async def test_a_reflection_is_answered_in_the_seed_shape_and_stored(serve: Serve, project: Path) -> None:
    async with serve() as client:
        response = await client.post(REFLECT, json=reflect_body(project))
    assert response.status_code == 200
    body = response.json()
    ReflectResponse.model_validate(body)
    result = body["result"]
    assert body["success"] is True
    assert re.fullmatch(r"reflect-\d{13}-[0-9a-f]{6}", result["reflectionId"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", result["timestamp"])
    assert result["sessionId"] == "session-1" and result["source"] == "heuristic"
    assert [c["name"] for c in result["criterionScores"]] == CRITERIA
    # A criterion the heuristic cannot judge (no code to read here) is null and says why.
    assert all((c["score"] is None or 0 <= c["score"] <= 1) and c["reasoning"].endswith(".")
               for c in result["criterionScores"])
    assert result["satisfactory"] == (result["successScore"] >= 0.8)
    assert "Modified 2 files" in result["insights"] and "Used 3 different tools" in result["insights"]
    assert any(i.startswith("Encountered 2 error patterns") for i in result["insights"])
    assert result["suggestedActions"] == [f"Address: {i}" for i in result["improvements"]]
    assert isinstance(result["duration"], int)
    assert [orjson.loads(line) for line in history_file(project).read_bytes().splitlines()] == [result]


async def test_an_unresolved_error_scores_low_and_says_what_to_fix(serve: Serve, project: Path) -> None:
    talk = [{"role": "user", "content": "add a cache"},
            {"role": "tool", "name": "Bash", "content": "Traceback (most recent call last):\nKeyError: 'x'"},
            {"role": "assistant", "content": "I could not fix the KeyError yet."}]
    async with serve() as client:
        result = (await client.post(REFLECT, json=reflect_body(project, conversation=talk))).json()["result"]
    scores = {c["name"]: c["score"] for c in result["criterionScores"]}
    assert scores["task_completion"] <= 0.3 and scores["test_coverage"] <= 0.2
    assert result["satisfactory"] is False
    assert "An error was left unresolved at the end" in result["insights"]
    assert "Address: Add more comprehensive error handling" in result["suggestedActions"]


async def test_max_insights_caps_every_list(serve: Serve, project: Path) -> None:
    async with serve() as client:
        result = (await client.post(REFLECT, json=reflect_body(project, maxInsights=1))).json()["result"]
    for key in ("insights", "improvements", "strengths", "suggestedActions"):
        assert len(result[key]) <= 1


async def test_history_lists_newest_first_and_honours_limit(serve: Serve, project: Path) -> None:
    async with serve() as client:
        ids = [(await client.post(REFLECT, json=reflect_body(project, f"s-{n}"))).json()["result"]["reflectionId"]
               for n in range(3)]
        listed = (await client.get(HISTORY, params={"projectPath": str(project)})).json()
        limited = (await client.get(HISTORY, params={"projectPath": str(project), "limit": 2})).json()
    HistoryResponse.model_validate(listed)
    assert listed["count"] == 3 and [r["reflectionId"] for r in listed["history"]] == ids[::-1]
    assert limited["count"] == 2 and [r["reflectionId"] for r in limited["history"]] == ids[:0:-1]


async def test_fifty_concurrent_reflections_leave_fifty_records(serve: Serve, project: Path) -> None:
    statuses: list[int] = []

    async def post(n: int) -> None:
        statuses.append((await client.post(REFLECT, json=reflect_body(project, f"s-{n}"))).status_code)

    async with serve() as client:
        async with anyio.create_task_group() as group:
            for n in range(50):
                group.start_soon(post, n)
        listed = (await client.get(HISTORY, params={"projectPath": str(project)})).json()
    assert statuses == [200] * 50
    lines = history_file(project).read_bytes().splitlines()
    assert len(lines) == 50 and listed["count"] == 50
    assert sorted(orjson.loads(line)["sessionId"] for line in lines) == sorted(f"s-{n}" for n in range(50))


async def test_reflections_answered_together_are_each_on_disk_first_and_the_limit_holds_among_them(
        serve: Serve, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Requests that wait for the same turn are written and fsynced together; each answer
    # must still come after its own line's fsync, and a session's limit counts every
    # line before it, in the same batch or not.
    synced: dict[int, int] = {}  # per file (inode): the largest size an fsync began at
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        seen = os.fstat(fd)
        real_fsync(fd)
        synced[seen.st_ino] = max(synced.get(seen.st_ino, 0), seen.st_size)

    monkeypatch.setattr(os, "fsync", fsync)
    codes: Counter[tuple[str, int]] = Counter()
    lessons: list[str] = []
    late: list[str] = []

    async def post(session: str) -> None:
        response = await client.post(REFLECT, json=reflect_body(project, session))
        codes[session, response.status_code] += 1
        if response.status_code != 200:
            return
        answer = response.json()
        if answer["memory"]["lessonId"]:
            lessons.append(answer["memory"]["lessonId"])
        data = history_file(project).read_bytes()
        end = data.index(b"\n", data.index(answer["result"]["reflectionId"].encode())) + 1
        if synced.get(history_file(project).stat().st_ino, 0) < end:
            late.append(session)

    async with serve(reflect=ReflectConfig(max_reflections=2)) as client, anyio.create_task_group() as group:
        for n in range(32):
            group.start_soon(post, f"s-{n % 8}")
    assert late == []
    assert codes == {(f"s-{k}", code): 2 for k in range(8) for code in (200, 409)}
    lines = history_file(project).read_bytes().splitlines()
    assert Counter(orjson.loads(line)["sessionId"] for line in lines) == {f"s-{k}": 2 for k in range(8)}
    kept = (project / ".openagents" / "memory" / "reflections.jsonl").read_bytes().splitlines()
    assert lessons and sorted(orjson.loads(line)["id"] for line in kept) == sorted(lessons)


async def _reflected(project: Path, session: str) -> Reflected:
    config = ReflectConfig()
    asked = ReflectRequest.model_validate(reflect_body(project, session))
    return await reflect_and_read(asked, criteria=config.criteria, threshold=config.threshold)


def _waiting_room(project: Path) -> routes.Project:
    """A project of a server's state, called without a server: its turn can be held."""
    return routes.ApiState(ApiSettings(roots=(project.parent.resolve(),)), "test").project(project.resolve())


async def test_a_reflection_whose_request_ends_while_it_waits_for_its_turn_is_never_written(project: Path) -> None:
    waiting_in = _waiting_room(project)
    answered: list[str] = []

    async def post(session: str) -> None:
        await routes.record(waiting_in, await _reflected(project, session), True)
        answered.append(session)

    async def post_until(session: str, scope: anyio.CancelScope) -> None:
        with scope:
            await post(session)

    client_left = anyio.CancelScope()
    async with anyio.create_task_group() as group, waiting_in.turn:  # a turn in progress: the three wait
        group.start_soon(post, "s-1")
        group.start_soon(post_until, "s-2", client_left)
        group.start_soon(post, "s-3")
        await anyio.wait_all_tasks_blocked()
        client_left.cancel()
        await anyio.wait_all_tasks_blocked()
    assert sorted(answered) == ["s-1", "s-3"]
    assert sorted(orjson.loads(line)["sessionId"] for line in history_file(project).read_bytes().splitlines()) == [
        "s-1", "s-3"]
    kept = (project / ".openagents" / "memory" / "reflections.jsonl").read_bytes()
    assert b"s-1" in kept and b"s-2" not in kept


async def test_a_fault_in_one_reflections_lesson_fails_its_answer_alone(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = MemoryFeed.remember

    def remember(feed: MemoryFeed, reflected: Reflected, written: object = None) -> object:
        if reflected.result.session_id == "s-2":
            raise RuntimeError("a fault in one lesson")
        return real(feed, reflected, written)  # type: ignore[arg-type]

    monkeypatch.setattr(MemoryFeed, "remember", remember)
    waiting_in = _waiting_room(project)
    answers: dict[str, object] = {}

    async def post(session: str) -> None:
        try:
            answers[session] = await routes.record(waiting_in, await _reflected(project, session), True)
        except RuntimeError as exc:
            answers[session] = exc

    async with anyio.create_task_group() as group, waiting_in.turn:  # the three go as one batch
        for session in ("s-1", "s-2", "s-3"):
            group.start_soon(post, session)
        await anyio.wait_all_tasks_blocked()
    assert str(answers.pop("s-2")) == "a fault in one lesson"
    kept = (project / ".openagents" / "memory" / "reflections.jsonl").read_bytes()
    assert all(isinstance(a, Remembered) and a.lesson_id and a.lesson_id.encode() in kept for a in answers.values())


async def test_delete_archives_the_history_and_deletes_nothing(serve: Serve, project: Path) -> None:
    async with serve() as client:
        for n in range(2):
            await client.post(REFLECT, json=reflect_body(project, f"s-{n}"))
        cleared = (await client.delete(HISTORY, params={"projectPath": str(project)})).json()
        after = (await client.get(HISTORY, params={"projectPath": str(project)})).json()
        again = (await client.delete(HISTORY, params={"projectPath": str(project)})).json()
    ClearResponse.model_validate(cleared)
    assert cleared["archived"] == 2 and after == {"success": True, "history": [], "count": 0}
    archive = Path(cleared["archivePath"])
    assert archive.parent == project / ".openagents" / "memory" / "archive"
    assert re.fullmatch(r"reflect-history-\d{8}T\d{6}\.\d{6}Z\.jsonl", archive.name)
    assert sorted(orjson.loads(line)["sessionId"] for line in archive.read_bytes().splitlines()) == ["s-0", "s-1"]
    assert again == {"success": True, "archived": 0, "archivePath": None}


async def test_a_session_past_max_reflections_is_refused_with_409(serve: Serve, project: Path) -> None:
    async with serve(reflect=ReflectConfig(max_reflections=2)) as client:
        codes = [(await client.post(REFLECT, json=reflect_body(project))).status_code for _ in range(2)]
        refused = await client.post(REFLECT, json=reflect_body(project))
        other = await client.post(REFLECT, json=reflect_body(project, "another-session"))
        await client.delete(HISTORY, params={"projectPath": str(project)})
        after_clear = await client.post(REFLECT, json=reflect_body(project))
    assert codes == [200, 200] and other.status_code == 200 and after_clear.status_code == 200
    assert refused.status_code == 409
    assert refused.json() == {"success": False, "error": refused.json()["error"]}
    assert "REFLECT_MAX_REFLECTIONS" in refused.json()["error"] and "session-1" in refused.json()["error"]


def _body(**fields: object) -> bytes:
    return orjson.dumps({"projectPath": "/x", "sessionId": "s", "conversation": conversation(), **fields})


@pytest.mark.parametrize(("body", "status", "words"), [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "must be a JSON object"),
    (_body(projectPath="relative/x"), 400, "must be an absolute path"),
    (orjson.dumps({"projectPath": "/x", "sessionId": "s"}), 422, "conversation is required"),
    (_body(conversation=[{"role": "robot", "content": "hi"}]), 422, "conversation[0].role is invalid"),
    (_body(maxInsights=21), 422, "maxInsights is invalid"),
    (_body(maxInsight=3), 422, "the field maxInsight is not one this endpoint reads"),
    # The OpenAPI document says integer: JSON's true, 5.0 and "5" are not one.
    (_body(maxInsights=True), 422, "the field maxInsights is invalid: input should be a valid integer"),
    (_body(maxInsights="5"), 422, "the field maxInsights is invalid: input should be a valid integer"),
    (_body(maxInsights=5.0), 422, "the field maxInsights is invalid: input should be a valid integer"),
])
async def test_a_bad_body_is_refused_naming_the_problem(asgi: Serve, body: bytes, status: int, words: str) -> None:
    async with asgi() as client:
        response = await client.post(REFLECT, content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert response.json()["success"] is False and words in response.json()["error"]


async def test_routes_methods_and_missing_projects_answer_json(serve: Serve, root: Path) -> None:
    async with serve() as client:
        unknown = await client.get("/api/nothing")
        wrong_method = await client.put(HISTORY)
        missing = await client.get(HISTORY, params={"projectPath": str(root / "gone")})
        no_param = await client.get(HISTORY)
        bad_limit = await client.get(HISTORY, params={"projectPath": str(root / "proj"), "limit": "0"})
    assert unknown.status_code == 404 and "no route /api/nothing" in unknown.json()["error"]
    assert wrong_method.status_code == 405 and "DELETE" in wrong_method.headers["allow"]
    assert missing.status_code == 404 and missing.json()["error"] == "projectPath names no folder on this machine"
    assert no_param.status_code == 400 and bad_limit.status_code == 400
    for response in (unknown, wrong_method, missing, no_param, bad_limit):
        ErrorResponse.model_validate(response.json())
    assert not (root / "gone").exists()


async def test_a_disabled_skill_refuses_posts_only(serve: Serve, project: Path) -> None:
    async with serve(reflect=ReflectConfig(enabled=False)) as client:
        post = await client.post(REFLECT, json=reflect_body(project))
        listed = await client.get(HISTORY, params={"projectPath": str(project)})
        health = await client.get("/api/health")
    assert post.status_code == 503 and "REFLECT_SKILL_ENABLED=false" in post.json()["error"]
    assert listed.status_code == 200 and not history_file(project).exists()
    assert HealthResponse.model_validate(health.json()).skill_enabled is False


async def test_an_unexpected_failure_is_a_500_without_a_traceback(
    serve: Serve, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("internal detail at /secret/place.py line 3")

    monkeypatch.setattr(routes, "reflect_and_read", broken)
    async with serve() as client:
        response = await client.post(REFLECT, json=reflect_body(project))
    assert response.status_code == 500
    assert response.json() == {"success": False,
                               "error": "the server failed to answer this request; its log has the details"}


async def test_openapi_documents_every_path_response_and_error(serve: Serve) -> None:
    async with serve() as client:
        doc = (await client.get("/openapi.json")).json()
    assert doc["openapi"] == "3.1.0"
    operations = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert operations == {("/api/skills/reflect", "post"), ("/api/skills/reflect/history", "get"),
                          ("/api/skills/reflect/history", "delete"), ("/api/health", "get"),
                          ("/openapi.json", "get")}
    schemas = doc["components"]["schemas"]
    assert {"ReflectRequest", "ReflectResult", "ReflectResponse", "HistoryResponse", "ClearResponse",
            "HealthResponse", "ErrorResponse"} <= set(schemas)
    assert set(schemas["ReflectRequest"]["required"]) == {"projectPath", "sessionId", "conversation"}
    post = doc["paths"]["/api/skills/reflect"]["post"]["responses"]
    assert set(post) == {"200", "400", "401", "403", "404", "405", "408", "409", "413", "415", "422", "500", "503"}
    for code, response in doc["components"]["responses"].items():
        assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
    _all_refs_resolve(doc, doc)


def _all_refs_resolve(node: object, doc: dict) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            target: object = doc
            for part in ref.removeprefix("#/").split("/"):
                assert isinstance(target, dict) and part in target, ref
                target = target[part]
        for value in node.values():
            _all_refs_resolve(value, doc)
    elif isinstance(node, list):
        for value in node:
            _all_refs_resolve(value, doc)
