"""Which edit format to ask a model for, learning from what it managed before.

`auto` (the default) asks for whole files while the files in play are small, and for
SEARCH/REPLACE blocks when one is large, unless the project's record shows that this
model failed that format before. Whatever the start, two replies in a row that could
not be applied switch the rest of the task to the most robust format: asking the same
way a third time is how a retry repeats a mistake.

The record is `.openagents/memory/edit-formats.json`: per model and format, how many
replies were asked for and how many applied. It is small, rewritten atomically under a
lock, and committed with the other memory files.
"""

from __future__ import annotations

import fnmatch
import logging
from pathlib import Path

import orjson

from orchestrator.edits.formats import FORMATS, ROBUST, EditFormat
from orchestrator.layout import Layout
from reflection.fileio import LockTimeout, atomic_write, file_lock

log = logging.getLogger("goldenloop.executors.format")

WHOLE_MAX_LINES = 400  # a larger file in play: whole files cost too many tokens
FAILURES_TO_SWITCH = 2  # unapplicable replies in a row before the robust format
MIN_ASKED = 3  # replies on record before the record is believed
MIN_APPLIED_SHARE = 0.8


class FormatHistory:
    """Per model and format: replies asked for and applied, across runs."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_project(cls, project_dir: Path) -> FormatHistory:
        return cls(Layout(project_dir).edit_formats)

    def load(self) -> dict[str, dict[str, dict[str, int]]]:
        try:
            data = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        models = data.get("models") if isinstance(data, dict) else None
        return models if isinstance(models, dict) else {}

    def share_applied(self, model: str, edit_format: str) -> float | None:
        counts = self.load().get(model, {}).get(edit_format, {})
        asked = counts.get("asked", 0)
        return counts.get("applied", 0) / asked if asked >= MIN_ASKED else None

    def record(self, model: str, edit_format: str, applied: bool) -> None:
        try:
            with file_lock(self.path.with_name(self.path.name + ".lock"), timeout_s=5):
                models = self.load()
                counts = models.setdefault(model, {}).setdefault(edit_format, {"asked": 0, "applied": 0})
                counts["asked"] = counts.get("asked", 0) + 1
                counts["applied"] = counts.get("applied", 0) + int(applied)
                body = {"models": models}
                atomic_write(self.path, orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        except (OSError, LockTimeout) as exc:  # a record is a hint: never worth failing an attempt
            log.warning("cannot update %s: %s", self.path, exc)


def format_for_model(setting: str, by_model: dict[str, str], model: str) -> str:
    """The configured format of `model`: the first matching pattern, else the setting."""
    for pattern, chosen in by_model.items():
        if fnmatch.fnmatchcase(model, pattern):
            return chosen
    return setting


class FormatChooser:
    """The format for the next reply of one model, within one task."""

    def __init__(self, setting: str, model: str, history: FormatHistory | None = None) -> None:
        if setting != "auto" and setting not in FORMATS:
            raise ValueError(f"unknown edit format {setting!r}")
        self.setting = setting
        self.model = model
        self.history = history
        self.failures_in_a_row = 0
        self.switched = False

    def choose(self, largest_lines: int) -> EditFormat:
        if self.switched:
            return ROBUST
        if self.setting != "auto":
            return self.setting  # type: ignore[return-value]
        preferred: EditFormat = "search-replace" if largest_lines > WHOLE_MAX_LINES else "whole"
        if preferred != ROBUST and self._failed_before(preferred):
            return ROBUST
        return preferred

    def record(self, asked: EditFormat, applied: bool) -> None:
        self.failures_in_a_row = 0 if applied else self.failures_in_a_row + 1
        if self.failures_in_a_row >= FAILURES_TO_SWITCH and not self.switched:
            self.switched = True
            log.info("model %s: %d replies in a row not applicable; asking for %s from now on",
                     self.model, self.failures_in_a_row, ROBUST)
        if self.history is not None:
            self.history.record(self.model, asked, applied)

    def _failed_before(self, edit_format: str) -> bool:
        if self.history is None:
            return False
        share = self.history.share_applied(self.model, edit_format)
        return share is not None and share < MIN_APPLIED_SHARE
