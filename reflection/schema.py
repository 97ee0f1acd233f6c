"""The Reflexion memory's data contract: reflections and the failures they explain.

JSON keys are camelCase (`sessionId`, `actionItems`, ...), Python names snake_case.
Keys this version does not know are kept on read and written back unchanged, so a
record written by a newer tool survives a round trip through an older one.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_serializer
from pydantic.alias_generators import to_camel

from reflection.redact import placeholder, redact
from reflection.text import joined_lines, shorten


class CamelModel(BaseModel):
    """Base for every model stored as JSON: camelCase on disk, snake_case in code."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class FailureCategory(StrEnum):
    """Why an attempt failed, in Reflexion's terms."""

    ROOT_CAUSE = "root_cause"  # a bug in the code the attempt wrote
    MISCONCEPTION = "misconception"  # a wrong belief about an API, spec or codebase
    ENVIRONMENT = "environment"  # missing tool, dependency, permission: not the code
    APPROACH_ERROR = "approach_error"  # the strategy itself is wrong or repeats itself
    EDGE_CASE = "edge_case"  # right in general, wrong on a boundary input
    VERIFICATION = "verification"  # the checks themselves (flaky, wrong command, timeout)


class FailureType(StrEnum):
    """Which verification step failed."""

    TEST_FAILURE = "test_failure"
    TYPECHECK_FAILURE = "typecheck_failure"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"


class Usage(CamelModel):
    """Tokens and money of one or more model calls; None means unknown, never zero."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


class ReflectionDraft(CamelModel):
    """The verbal part of a reflection, as a model or the heuristic produces it.

    Lengths are clamped where drafts are made (`clamped`) and records saved, not by
    validation, so that a longer record written by another tool is still readable.
    """

    category: FailureCategory
    analysis: str
    suggestion: str
    action_items: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0)

    @classmethod
    def clamped(
        cls, category: FailureCategory, analysis: str, suggestion: str, items: list[str], confidence: float
    ) -> ReflectionDraft:
        """A draft within the size limits every reflection keeps, whoever wrote it."""
        draft = cls(
            category=category,
            analysis=analysis,
            suggestion=suggestion,
            action_items=items,
            confidence=confidence,
        )
        return draft.refitted()

    def refitted(self) -> Self:
        """A copy within the limits, its text redacted before it is cut (see `fit_text`)."""
        items = [item for item in self.action_items if item.strip()][:MAX_ITEMS]
        return self.model_copy(
            update={
                "analysis": fit_text(self.analysis, TEXT_CHARS),
                "suggestion": fit_text(self.suggestion, TEXT_CHARS),
                "action_items": [fit_text(item, ITEM_CHARS) for item in items],
            }
        )


# What a reflection may hold: enough for a lesson, short enough for three in a prompt.
TEXT_CHARS = 500  # analysis, suggestion
ITEM_CHARS = 200  # one action item
MAX_ITEMS = 5


_PLACEHOLDER_HEAD = placeholder("")[:-1]  # "[REDACTED:"


def fit_text(text: str, limit: int) -> str:
    """`text` redacted, on one line (`joined_lines`: a quote's own spacing is kept), and cut
    to `limit` characters, in that order.

    Redaction comes first because a secret cut in half no longer looks like one and
    would be kept, and because a placeholder can be longer than what it replaced. A cut
    that falls inside a placeholder drops all of it rather than leave "[REDACTED:op…".
    """
    return fit_redacted(redact(text), limit)


def fit_redacted(text: str, limit: int) -> str:
    """`fit_text` for a text already redacted, such as one made of a redacted
    conversation's words: redaction is the dear part, and it is idempotent."""
    whole = joined_lines(text)
    cut = shorten(whole, limit)
    head = cut.rfind(_PLACEHOLDER_HEAD)
    if cut != whole and head >= 0 and "]" not in cut[head:]:
        cut = cut[:head].rstrip() + "…"
    return cut


def new_id() -> str:
    return uuid.uuid4().hex


def utc_now() -> datetime:
    return datetime.now(UTC)


class StoredLine(CamelModel):
    """What every line of reflections.jsonl shares: `createdAt` in UTC with a Z, the
    identifying keys (`key_order`) first, and the way to and from one line of JSON."""

    key_order: ClassVar[tuple[str, ...]] = ()

    @field_serializer("created_at", check_fields=False)
    def _iso_utc(self, value: datetime) -> str:
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")

    def to_dict(self) -> dict[str, Any]:
        """The JSON body with the identifying keys first, as a human reads a record."""
        body = super().to_dict()
        head = {key: body.pop(key) for key in self.key_order if key in body}
        return head | body

    def to_json_line(self) -> bytes:
        """The record as one `\\n`-terminated UTF-8 line."""
        return orjson.dumps(self.to_dict()) + b"\n"

    @classmethod
    def from_json_line(cls, line: bytes | str) -> Self:
        """Parse one line; raises ValueError (orjson or pydantic) when it is not a record."""
        return cls.model_validate(orjson.loads(line))


KEY_ORDER = ("id", "sessionId", "taskId", "subtaskId", "attemptNumber", "category")


class Reflection(ReflectionDraft, StoredLine):
    """One line of `.openagents/memory/reflections.jsonl`."""

    model_config = ConfigDict(extra="allow")
    key_order: ClassVar[tuple[str, ...]] = KEY_ORDER

    id: str = Field(default_factory=new_id)
    session_id: str
    task_id: str
    subtask_id: str
    attempt_number: int = Field(ge=1)
    created_at: datetime = Field(default_factory=utc_now)
    failure_type: FailureType | None = None
    error_signature: str | None = None
    files_modified: list[str] | None = None
    source: Literal["llm", "heuristic"] | None = None
    model: str | None = None
    usage: Usage | None = None


# Where an attempt failed: the checks ran and failed ("verify"), or it never got that far
# or was stopped beside them: a reply not applied ("edit"), the agent's run failed
# ("agent"), nothing here can run it ("environment"), it changed what judges it
# ("integrity"), it changed nothing ("no_change"), it gave back a failed attempt's code
# ("repeat"). Only "verify" has check output; the others' digest is the reason itself.
FailureStage = Literal["verify", "edit", "agent", "environment", "integrity", "no_change", "repeat"]


class FailureContext(StoredLine):
    """Everything the reflection step knows about one failed attempt.

    `stage` says where it failed (`FailureStage`): "verify" (the checks failed;
    `failure_type` says which) or a stage where no check told why, whose `digest` is
    the exact reason (`failure_type` is None, or `timeout` for an agent out of time).

    Like a `Reflection` it carries its own `id` and `createdAt`: a failure is a record
    too (the seed's schema), named in logs and kept apart from the reflection on it.
    """

    key_order: ClassVar[tuple[str, ...]] = KEY_ORDER[:5]

    id: str = Field(default_factory=new_id)
    created_at: datetime = Field(default_factory=utc_now)
    session_id: str
    task_id: str
    subtask_id: str
    attempt_number: int = Field(ge=1)
    subtask_title: str
    subtask_description: str = ""
    failure_type: FailureType | None = None
    stage: FailureStage = "verify"
    digest: str  # short failure digest (see reflection.digest), already bounded
    error_signature: str | None = None
    # The failures the attempt caused first; `first_error` is the first of those when known.
    failing_tests: list[str] = Field(default_factory=list)
    first_error: str | None = None  # "path:line: Kind: message" of the first failure
    # Known failures: failing the same way before the task and accepted by the user (the
    # loop sends the tests waived in checks.knownFailures); not this attempt's doing.
    preexisting_tests: list[str] = Field(default_factory=list)
    files_modified: list[str] = Field(default_factory=list)
    diff: str = ""  # the attempt's diff, possibly truncated
    previous_signature: str | None = None  # errorSignature of the attempt before

    @property
    def repeats_previous(self) -> bool:
        """The same failure as the attempt before: the last reflection did not help."""
        return bool(self.error_signature) and self.error_signature == self.previous_signature
