"""The JSON bodies of the API's answers, as pydantic models: they serialise the answers
and give `/openapi.json` its schemas, so the document cannot drift from the code."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from reflection.reflect_skill import ReflectResult
from reflection.schema import CamelModel


class MemoryNote(CamelModel):
    """What the project's memory (the lessons the golden loop reads) kept of a reflection."""

    lesson_id: str | None = Field(description="the lesson's id in the project's memory, or null when none was kept")
    reason: str = Field(description="one sentence: what was kept, or why nothing was")


class ReflectResponse(CamelModel):
    success: Literal[True] = True
    result: ReflectResult
    memory: MemoryNote | None = Field(default=None, description="null when REFLECT_TO_MEMORY is off")


class HistoryResponse(CamelModel):
    success: Literal[True] = True
    history: list[ReflectResult] = Field(description="newest first")
    count: int = Field(ge=0)


class ClearResponse(CamelModel):
    success: Literal[True] = True
    archived: int = Field(ge=0, description="records moved to the archive")
    archive_path: str | None = Field(description="the archive file, or null when there was nothing to move")


class HealthResponse(CamelModel):
    success: Literal[True] = True
    status: Literal["ok"] = "ok"
    skill_enabled: bool
    version: str


class ErrorResponse(CamelModel):
    success: Literal[False] = False
    error: str = Field(description="one sentence saying what went wrong")
