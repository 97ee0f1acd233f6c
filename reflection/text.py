"""Text that has to fit somewhere: a prompt, a log line, a reflection, a sentence.

One helper per way of fitting, so that every clipped text in goldenloop reads the same.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import orjson


def shorten(text: str, limit: int) -> str:
    """Cut the end off, marked by "…": for sentences and one-line summaries."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def clip_middle(text: str, limit: int) -> str:
    """Cut the middle out: for errors, whose start and end both matter. A redaction
    placeholder the cut would halve goes whole ("[REDACTED:sl … ret_key]" says nothing)."""
    if len(text) <= limit:
        return text
    if limit < 8:
        return text[:limit]
    head = (limit * 3) // 4
    tail = len(text) - (limit - head - 3)
    left, right = _placeholder_around(text, head), _placeholder_around(text, tail)
    left_text = text[:head] if left is None else text[: left[0]].rstrip()
    right_text = text[tail:] if right is None else text[right[1] :].lstrip()
    return f"{left_text} … {right_text}"


_PLACEHOLDER_HEAD = "[REDACTED:"  # reflection.redact.placeholder's


def _placeholder_around(text: str, cut: int) -> tuple[int, int] | None:
    """(start, end) of the placeholder that `cut` falls strictly inside, if any."""
    start = text.rfind(_PLACEHOLDER_HEAD, 0, cut + len(_PLACEHOLDER_HEAD) - 1)
    if start < 0 or start >= cut:
        return None
    end = text.find("]", start) + 1
    return (start, end) if end > cut else None


def error_gist(text: str, limit: int) -> str:
    """An error on one line within `limit`, keeping what says what went wrong: a
    traceback's exception line(s) at its end (its innermost frame too if there is room)
    after the head, anything else its head and tail around an ellipsis (`clip_middle`).
    Redact `text` first: a secret cut in half is no longer recognised."""
    whole = joined_lines(text)
    end = _traceback_end(text.splitlines())
    if len(whole) <= limit or not end:
        return clip_middle(whole, limit)
    frame, exception = end
    tail = joined_lines("\n".join(frame))
    if len(tail) > (limit * 2) // 3:
        tail = joined_lines(exception)
    head = whole[: max(limit - len(tail) - 3, 0)].rstrip()
    return f"{head} … {tail}"[-limit:] if head else tail[-limit:]


def _traceback_end(lines: list[str]) -> tuple[list[str], str] | None:
    """(innermost frame and exception lines, the exception lines) of the last Python
    traceback in `lines`, or None when there is none. The exception lines are the
    unindented ones after its last `File "..."` line."""
    starts = [i for i, line in enumerate(lines) if line.strip().startswith("Traceback (most recent call last)")]
    if not starts:
        return None
    body = [line for line in lines[starts[-1] + 1 :] if line.strip() and set(line.strip()) - set("^~ ")]
    frames = [i for i, line in enumerate(body) if line.strip().startswith('File "')]
    if not frames:
        return None
    after = body[frames[-1] + 1 :]
    first = next((i for i, line in enumerate(after) if not line[:1].isspace()), len(after))
    exception = "\n".join(after[first:])
    if not exception:
        return None
    return body[frames[-1] :], exception


def one_line(text: str, limit: int) -> str:
    """The lines joined into one (`joined_lines`), the middle clipped out of anything too long."""
    return clip_middle(joined_lines(text), limit)


def joined_lines(text: str) -> str:
    """The non-blank lines of `text`, trimmed and joined by one space. Spaces inside a line
    are kept: a quoted value (`'a  b'`) may differ from another by them alone."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def cut_block(text: str, limit: int) -> str:
    """Keep the head of a block (a diff, a reply) and say how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters omitted ...]"


def english_list(items: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def template_problem(template: str, placeholders: tuple[str, ...], *, required: str | None = None,
                     required_is: str = "") -> str | None:
    """What makes a prompt template unusable, as a phrase; None if nothing. `required`:
    the placeholder it must contain, `required_is` what that placeholder stands for."""
    try:
        names = template_fields(template)
    except ValueError as exc:
        return str(exc)
    unknown = sorted(names - set(placeholders))
    if unknown:
        known = ", ".join(f"{{{name}}}" for name in placeholders)
        return (f"has an unknown placeholder {{{unknown[0]}}}; the placeholders are {known}, and a literal "
                "brace (as in JSON) is written twice: {{ }}")
    if required is not None and required not in names:
        return f"must contain {{{required}}}, {required_is}"
    return None


def template_fields(template: str) -> set[str]:
    """The `{names}` a str.format template uses; ValueError (a phrase) when it is malformed."""
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ValueError(f"is malformed ({exc}); write a literal brace twice, {{{{ or }}}}") from None


def reason_of(exc: BaseException) -> str:
    """An exception as one short line for a log: its message's first line, else its type."""
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def reply_text(value: object) -> str:
    """A string field of a model's JSON reply, stripped; "" for anything else."""
    return value.strip() if isinstance(value, str) else ""


def reply_items(value: object) -> list[str]:
    """A list-of-strings field of a model's JSON reply (a lone string counts as one), stripped."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [reply_text(v) for v in value if isinstance(v, str)]


SCAN_LIMIT = 100_000  # a reply longer than this is not JSON we asked for; scan its head only
MAX_CANDIDATES = 20  # '{' positions tried before giving up on a prose-heavy reply


def extract_json(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text`, even inside prose or code fences; None if none."""
    text = text[:SCAN_LIMIT]
    try:  # a reply that is JSON as a whole must be an object, not a list of them
        whole = orjson.loads(text)
        return whole if isinstance(whole, dict) else None
    except orjson.JSONDecodeError:
        pass
    start = text.find("{")
    for _ in range(MAX_CANDIDATES):
        if start < 0:
            return None
        end = _matching_brace(text, start)
        if end is not None:
            try:
                value = orjson.loads(text[start : end + 1])
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                return value
        start = text.find("{", start + 1)
    return None


def _matching_brace(text: str, start: int) -> int | None:
    """Index of the brace closing the one at `start`, honouring JSON strings."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None
