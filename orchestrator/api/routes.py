"""The endpoints: reflect, its history (list, clear), health and the OpenAPI document.

Each handler checks in the order that keeps the disk safe: the skill switch, the body
(type, size, time, JSON, fields), the project folder against the roots, and only then a
file. Blocking file work runs in a worker thread, one per project at a time: the store
serialises a project's calls anyway, and a project whose files stall (a slow disk, a lock
another process keeps) must not take every thread. Reflections waiting for that turn go
together (group commit): one thread turn appends every waiting one to the history, leaves
their lessons in the memory and fsyncs the history once, and only then are they answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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
from reflection.redaction_policy import policy_in_force
from reflection.reflect_history import ReflectHistory, ReflectionLimitReached, UnsafeHistoryPath, Unsynced
from reflection.reflect_skill import Reflected, ReflectRequest, reflect_and_read

T = TypeVar("T")


@dataclass(eq=False)
class Waiting:
    """A reflection waiting for a turn of its project's worker thread; once a turn wrote it
    (`done`), the lesson the memory kept of it, or why it was refused (`failed`)."""

    reflected: Reflected
    done: bool = False
    kept: Remembered | None = None
    failed: BaseException | None = None
    gone: bool = False  # its request ended first: no turn takes it any more


@dataclass(frozen=True)
class Project:
    """A project's history store (its counts stay warm), its turn at a worker thread, and
    the reflections waiting for that turn."""

    history: ReflectHistory
    turn: anyio.Lock
    memory: MemoryFeed  # what the loop reads: reflections feed it too
    waiting: list[Waiting] = field(default_factory=list)


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
            self._projects[folder] = Project(history, anyio.Lock(), MemoryFeed(folder, history))
        return self._projects[folder]


async def on_disk(project: Project, call: Callable[..., T], *args: Any) -> T:
    """`call(*args)` in a worker thread once the project's turn comes; the files' refusals
    become answers: a link or an odd file 403, a lock held elsewhere too long 503."""
    async with project.turn:
        try:
            return await anyio.to_thread.run_sync(call, *args)
        except (UnsafeHistoryPath, LockTimeout) as exc:
            raise _refusal(exc) from None


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
    # The project's own redaction settings, for the conversation, the judge and the memory.
    with policy_in_force(await anyio.to_thread.run_sync(project.memory.redaction)):
        reflected = await reflect_and_read(asked, criteria=config.criteria, threshold=config.threshold,
                                           model=state.settings.model)
        kept = await record(project, reflected, config.to_memory)
    memory = MemoryNote(lesson_id=kept.lesson_id, reason=kept.reason) if kept else None
    return _ok(ReflectResponse(result=reflected.result, memory=memory))


async def record(project: Project, reflected: Reflected, to_memory: bool) -> Remembered | None:
    """The reflection in the history, on disk when this returns, and its lesson in the
    memory (None when `to_memory` is off or the session was full). Whoever gets the
    project's turn writes every reflection waiting for it, its own among them: a thread
    hop and an fsync cost more than a reflection's own file work."""
    mine = Waiting(reflected)
    project.waiting.append(mine)
    try:
        async with project.turn:
            # A turn cancelled before its thread began leaves its batch waiting, not done.
            project.waiting[:] = [w for w in project.waiting if not (w.done or w.gone)]
            if not mine.done:
                await anyio.to_thread.run_sync(_record_all, project, list(project.waiting), to_memory)
    except BaseException:
        mine.gone = True
        raise
    if mine.failed is not None:
        raise _refusal(mine.failed)
    return mine.kept


def _record_all(project: Project, batch: list[Waiting], to_memory: bool) -> None:
    """In the project's worker thread: the history's lines, then the memory's lessons (a
    full session's line is refused and leaves none), then one fsync; each reflection of
    the batch is done, with its lesson or its refusal. Nothing is answered until the
    fsync ends: a failure of the files fails them all, one lesson's failure its own."""
    try:
        written = project.history.append_unsynced([w.reflected.result for w in batch],
                                                  check=project.memory.files() if to_memory else ())
        try:
            kept = [_lesson(project, w.reflected, written) if to_memory and refused is None else refused
                    for w, refused in zip(batch, written.refused)]
            written.wait()
        finally:
            written.close()
    except Exception as exc:  # noqa: BLE001 - each request of the batch answers it (a 500 when unforeseen)
        kept = [exc] * len(batch)
    for waiting, lesson in zip(batch, kept):
        if isinstance(lesson, BaseException):
            waiting.failed = lesson
        else:
            waiting.kept = lesson
        waiting.done = True


def _lesson(project: Project, reflected: Reflected, written: Unsynced) -> Remembered | Exception:
    try:
        return project.memory.remember(reflected, written)
    except Exception as exc:  # noqa: BLE001 - a fault of one reflection's lesson: the others are answered
        return exc


def _refusal(exc: BaseException) -> BaseException:
    """What the client is told of a reflection the files refused; anything else stays a 500."""
    if isinstance(exc, ReflectionLimitReached):
        return ApiError(409, str(exc))
    if isinstance(exc, UnsafeHistoryPath):
        return ApiError(403, str(exc))
    if isinstance(exc, LockTimeout):
        return ApiError(503, f"{exc}; try again later", {"Retry-After": "5"})
    return exc


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
