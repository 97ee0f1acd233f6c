"""Reading tasks to import: a markdown checklist or a JSON array, as task drafts.

Markdown: every `- [ ] title` (or `* [ ]`, at any indentation) is a task; indented
lines under it, up to the next item or unindented line, are its description. A `- [x]`
item is done already, so it is skipped (counted in the report): importing finished work
would only fill the closed list. JSON: an array of objects with `title` (required),
`description`, `priority` (0-4), `labels`, `deps` (task ids) and `type`.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ITEM = re.compile(r"^(?P<indent>\s*)[-*+]\s+\[(?P<mark>[ xX])\]\s*(?P<title>.*?)\s*$")
_KEYS = frozenset({"title", "description", "priority", "labels", "deps", "type"})
_TYPES = frozenset({"bug", "feature", "task", "chore"})


class ImportFileError(Exception):
    """The file cannot be imported; one sentence."""


@dataclass
class Drafts:
    tasks: list[dict[str, Any]] = field(default_factory=list)
    done: int = 0  # checked items left out


def read_drafts(path: Path) -> Drafts:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ImportFileError(f"no file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFileError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    suffix = path.suffix.lower()
    # By suffix; a file named otherwise is JSON when it opens an array (a markdown file may start with "[link]").
    if suffix == ".json" or (suffix not in (".md", ".markdown", ".txt") and text.lstrip().startswith("[")):
        return Drafts(_from_json(text, path.name))
    return _from_markdown(text, path.name)


def _from_markdown(text: str, name: str) -> Drafts:
    drafts = Drafts()
    current: dict[str, Any] | None = None
    body: list[str] = []
    for line in text.splitlines():
        item = _ITEM.match(line)
        if item is not None:
            _finish(current, body)
            current, body = None, []
            if item["mark"] != " ":
                drafts.done += 1
            elif item["title"]:
                current = {"title": item["title"]}
                drafts.tasks.append(current)
        elif current is not None and (not line.strip() or line[:1].isspace()):
            body.append(line)  # indented (or blank) text belongs to the item above
        else:
            _finish(current, body)
            current, body = None, []
    _finish(current, body)
    if not drafts.tasks and not drafts.done:
        raise ImportFileError(f"{name} has no checklist item (lines like `- [ ] title`) and is not a JSON array")
    return drafts


def _finish(draft: dict[str, Any] | None, body: list[str]) -> None:
    description = textwrap.dedent("\n".join(body)).strip()
    if draft is not None and description:
        draft["description"] = description


def _from_json(text: str, name: str) -> list[dict[str, Any]]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"{name} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(items, list):
        raise ImportFileError(f"{name} must hold a JSON array of task objects")
    return [_json_draft(item, number, name) for number, item in enumerate(items, start=1)]


def _json_draft(item: Any, number: int, name: str) -> dict[str, Any]:
    where = f"item {number} of {name}"
    if not isinstance(item, dict):
        raise ImportFileError(f"{where} is not an object")
    title = item.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ImportFileError(f"{where} has no title")
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        raise ImportFileError(f"{where} has keys an import does not take: {', '.join(unknown)}")
    priority = item.get("priority", 2)
    if type(priority) is not int or not 0 <= priority <= 4:
        raise ImportFileError(f"{where}: priority must be a whole number from 0 (most urgent) to 4")
    if item.get("type", "task") not in _TYPES:
        raise ImportFileError(f"{where}: type must be one of {', '.join(sorted(_TYPES))}")
    for key in ("labels", "deps"):
        value = item.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ImportFileError(f"{where}: {key} must be a list of strings")
    if not isinstance(item.get("description", ""), str):
        raise ImportFileError(f"{where}: description must be a string")
    return {**item, "title": title.strip()}
