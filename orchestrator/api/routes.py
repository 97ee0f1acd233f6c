"""The endpoints: reflect, its history (list, clear), health and the OpenAPI document.

Each handler checks in the order that keeps the disk safe: the skill switch, the body
(type, size, time, JSON, fields), the project folder against the roots, and only then a
file. Blocking file work (the history's lock and append, then the memory's lesson) runs
in a worker thread, one per project at a time, and the append's fsync after it, shared by
the appends before it: the store serialises a project's calls anyway, and a project whose
files stall (a slow disk, a lock another process keeps) must not take every thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import orjson
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from orchestrator.api.errors import ApiError, JsonBody
from orchestrator.api.guard import project_folder, read_body, require_json
from orchestrator.api.memory_feed import MemoryFeed, Remembered
from orchestrator.api.openapi import openapi_document
from orchestrator.api.schemas import ClearResponse, HealthResponse, MemoryNote, ReflectResponse
from orchestrator.api.settings import ApiSettings
from reflection.fileio import LockTimeout
from reflection.redact import redact
from reflection.reflect_history import ReflectHistory, ReflectionLimitReached, UnsafeHistoryPath, Unsynced
from reflection.reflect_skill import Reflected, ReflectRequest, reflect_and_read

T = TypeVar("T")


@dataclass(frozen=True)
class Project:
    """A project's history store (its counts stay warm), its turn at a worker thread, and
    its turn at the fsync that makes appends durable (so one project holds two threads at most)."""

    history: ReflectHistory
    turn: anyio.Lock
    sync_turn: anyio.Lock
    memory: MemoryFeed  # what the loop reads: reflections feed it too


class ApiState:
    """The settings and the projects asked about so far."""

    def __init__(self, settings: ApiSettings, version: str) -> None:
        self.settings = settings
        self.version = version
        self.openapi = orjson.dumps(openapi_document(version))
        self._projects: dict[Path, Project] = {}

    def project(self, folder: Path) -> Project:
        if folder not in self._projects:
            history = ReflectHistory(folder, max_per_session=self.settings.reflect.max_reflections)
            self._projects[folder] = Project(history, anyio.Lock(), anyio.Lock(), MemoryFeed(folder, history))
        return self._projects[folder]


async def on_disk(project: Project, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)` in a worker thread once the project's turn comes; the files' refusals
    become answers: a link or an odd file 403, a lock held elsewhere too long 503."""
    async with project.turn:
        try:
            return await anyio.to_thread.run_sync(call, *args)
        except UnsafeHistoryPath as exc:
            raise ApiError(403, str(exc)) from None
        except LockTimeout as exc:
            raise ApiError(503, f"{exc}; try again later", {"Retry-After": "5"}) from None


def _state(request: Request) -> ApiState:
    return request.app.state.api


async def reflect(request: Request) -> Response:
    state = _state(request)
    config = state.settings.reflect
    if not config.enabled:
        raise ApiError(503, "the reflect skill is disabled on this server (REFLECT_SKILL_ENABLED=false)")
    require_json(request)
    asked = _parsed(await read_body(request, state.settings.max_body, state.settings.read_timeout))
    project = state.project(project_folder(asked.project_path, state.settings.roots))
    # Refused before a model is paid for; the append checks again under the lock (and
    # alone when no model is called: the heuristic costs less than asking first).
    if state.settings.model is not None and await on_disk(project, project.history.full, redact(asked.session_id)):
        raise ApiError(409, str(ReflectionLimitReached(redact(asked.session_id), config.max_reflections)))
    reflected = await reflect_and_read(asked, criteria=config.criteria, threshold=config.threshold,
                                       model=state.settings.model)
    try:
        written, kept = await on_disk(project, _record, project, reflected, config.to_memory)
    except ReflectionLimitReached as exc:
        raise ApiError(409, str(exc)) from None
    await durable(project, written)
    memory = MemoryNote(lesson_id=kept.lesson_id, reason=kept.reason) if kept else None
    return _ok(ReflectResponse(result=reflected.result, memory=memory))


def _record(project: Project, reflected: Reflected, to_memory: bool) -> tuple[Unsynced, Remembered | None]:
    """The history's line, then the memory's lesson, in one turn of the project's worker
    thread: a second turn would cost a thread hop per request. The answer waits for the
    line's fsync either way; the lesson of a line whose session was full is never written."""
    written = project.history.append_unsynced(reflected.result, check=project.memory.files() if to_memory else ())
    try:
        return written, project.memory.remember(reflected, written) if to_memory else None
    except BaseException:
        written.close()  # no answer will be given: nothing to make durable
        raise


async def durable(project: Project, written: Unsynced) -> None:
    """Return once an append is on disk. The fsync runs after the project's turn, so the
    next appends go on meanwhile; whoever waited while it ran finds their line covered by
    it and needs no thread of its own (group commit)."""
    try:
        async with project.sync_turn:
            if not written.covered():
                await anyio.to_thread.run_sync(written.wait)
    finally:
        written.close()  # covered, or cancelled: no answer was given, so nothing promised


async def history_endpoint(request: Request) -> Response:
    """One route for both methods, so a 405 there names them both in Allow."""
    return await (clear_history(request) if request.method == "DELETE" else history(request))


async def history(request: Request) -> Response:
    state = _state(request)
    project = state.project(project_folder(_project_param(request), state.settings.roots))
    records = await on_disk(project, project.history.records, _limit_param(request))
    return JsonBody({"success": True, "history": records, "count": len(records)})


async def clear_history(request: Request) -> Response:
    state = _state(request)
    project = state.project(project_folder(_project_param(request), state.settings.roots))
    moved = await on_disk(project, project.history.archive)
    return _ok(ClearResponse(archived=moved.count, archive_path=str(moved.path) if moved.path else None))


async def health(request: Request) -> Response:
    state = _state(request)
    return _ok(HealthResponse(skill_enabled=state.settings.reflect.enabled, version=state.version))


async def openapi(request: Request) -> Response:
    return Response(_state(request).openapi, media_type="application/json")


def _ok(body: Any) -> Response:
    return JsonBody(body.model_dump(mode="json", by_alias=True))


def _parsed(body: bytes) -> ReflectRequest:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    try:
        return ReflectRequest.model_validate(data)
    except ValidationError as exc:
        raise ApiError(422, _field_problem(exc)) from None


def _field_problem(exc: ValidationError) -> str:
    """The first problem of a body, naming its field as the client wrote it."""
    first = exc.errors(include_url=False)[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
    if first["type"] == "missing":
        return f"the field {where} is required"
    if first["type"] == "extra_forbidden":
        return f"the field {where} is not one this endpoint reads (a misspelling?)"
    message = str(first["msg"])
    return f"the field {where} is invalid: {message[:1].lower()}{message[1:]}"


def _project_param(request: Request) -> str:
    raw = request.query_params.get("projectPath")
    if not raw:
        raise ApiError(400, "the projectPath query parameter is required")
    return raw


def _limit_param(request: Request) -> int | None:
    raw = request.query_params.get("limit")
    if raw is None:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ApiError(400, f"the limit query parameter must be a whole number of 1 or more, not {raw!r}")
    return int(raw)
