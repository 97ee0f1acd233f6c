"""The JSON bodies of the API's answers, as pydantic models: they serialise the answers
and give `/openapi.json` its schemas, so the document cannot drift from the code."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from reflection.reflect_skill import ReflectResult
from reflection.schema import CamelModel


class ReflectResponse(CamelModel):
    success: Literal[True] = True
    result: ReflectResult


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
