"""`GET /openapi.json`: an OpenAPI 3.1 document built from the pydantic models.

OpenAPI 3.1 schemas are JSON Schema 2020-12, which is what pydantic writes, so the
models' schemas go into `components/schemas` as they are.
"""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from orchestrator.api.schemas import ClearResponse, ErrorResponse, HealthResponse, HistoryResponse, ReflectResponse
from reflection.reflect_skill import ReflectRequest

REF = "#/components/schemas/{model}"
ERRORS = {
    "400": "the body is not a JSON object, projectPath is not absolute, or a query parameter is invalid",
    "401": "the bearer token is missing or wrong (only when the server has one)",
    "403": "projectPath resolves outside the server's --root folders; a link, or a file that is not a regular "
           "one, stands where the project's history is kept; the request carries the Origin of a web page "
           "that is not on this machine, or (without a token) a Host that is not loopback",
    "404": "the project folder does not exist, or no such route",
    "405": "the method is not allowed on this path",
    "408": "the request body did not arrive whole within the server's --read-timeout",
    "409": "the session already holds REFLECT_MAX_REFLECTIONS reflections in this project",
    "413": "the request body is larger than the server's --max-body",
    "415": "the body is not sent as Content-Type: application/json",
    "422": "the body is JSON but does not match the schema: a field missing, unknown, of another type or out of "
           "range (the sentence names it)",
    "500": "the server failed; the sentence says so and the server log has the details",
    "503": "the reflect skill is disabled (REFLECT_SKILL_ENABLED=false), or another process has held the "
           "project's history lock too long (Retry-After says when to try again)",
}


def openapi_document(version: str) -> dict[str, Any]:
    _, defs = models_json_schema(
        [(ReflectRequest, "validation"), *((m, "serialization") for m in _RESPONSES)],
        ref_template=REF, by_alias=True,
    )
    return {
        "openapi": "3.1.0",
        "info": {"title": "goldenloop API", "version": version,
                 "description": "The Reflect skill over HTTP (docs/API.md). Every error is "
                                "{success: false, error: <one sentence>}."},
        "paths": _paths(),
        "components": {
            "schemas": defs["$defs"],
            "responses": {code: _error(text) for code, text in ERRORS.items()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "required when GOLDENLOOP_API_TOKEN is set"}},
        },
        "security": [{}, {"bearer": []}],
    }


_RESPONSES = (ReflectResponse, HistoryResponse, ClearResponse, HealthResponse, ErrorResponse)


def _paths() -> dict[str, Any]:
    project = _query("projectPath", {"type": "string"}, "absolute path of the project folder", required=True)
    limit = _query("limit", {"type": "integer", "minimum": 1}, "at most this many records, newest first")
    return {
        "/api/skills/reflect": {"post": _operation(
            "reflect", "Reflect on a conversation and store the result", "ReflectResponse",
            ["400", "401", "403", "404", "405", "408", "409", "413", "415", "422", "500", "503"],
            requestBody={"required": True, "content": {"application/json": {"schema": _ref("ReflectRequest")}}},
        )},
        "/api/skills/reflect/history": {
            "get": _operation("reflectHistory", "The project's reflections, newest first", "HistoryResponse",
                              ["400", "401", "403", "404", "405", "500", "503"], parameters=[project, limit]),
            "delete": _operation("clearReflectHistory", "Move the project's reflections to the archive",
                                 "ClearResponse", ["400", "401", "403", "404", "405", "500", "503"],
                                 parameters=[project]),
        },
        "/api/health": {"get": {**_operation("health", "Whether the server answers", "HealthResponse",
                                             ["403", "405", "500"]), "security": []}},
        "/openapi.json": {"get": {
            "operationId": "openapi", "summary": "This document",
            "responses": {"200": {"description": "the OpenAPI 3.1 document",
                                  "content": {"application/json": {"schema": {"type": "object"}}}},
                          **{code: _error_ref(code) for code in ("401", "403", "405", "500")}},
        }},
    }


def _operation(op_id: str, summary: str, schema: str, errors: list[str], **extra: Any) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "success",
                                         "content": {"application/json": {"schema": _ref(schema)}}}}
    responses.update({code: _error_ref(code) for code in errors})
    return {"operationId": op_id, "summary": summary, **extra, "responses": responses}


def _error_ref(code: str) -> dict[str, str]:
    return {"$ref": f"#/components/responses/{code}"}


def _error(text: str) -> dict[str, Any]:
    return {"description": text, "content": {"application/json": {"schema": _ref("ErrorResponse")}}}


def _query(name: str, schema: dict[str, Any], text: str, *, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": text}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}
