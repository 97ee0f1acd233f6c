"""The reflection a retry's reply begins with (reflexion.oneCall): one call reflects and fixes.

The reply is asked to open with two labelled lines, "What went wrong:" and "What to do
differently:", before its edit. Only the text before the edit is read, so code or test
output that happens to hold those words is never taken for a reflection. A model that
answers with the JSON object of a separate reflection call is read too.
"""

from __future__ import annotations

import re

from reflection.text import extract_json

# Where the edit begins: a fence, an edit block or a diff header ends the reflection part.
_EDIT_START = re.compile(r"^(```|~~~|<{5,}|-{3} |\+{3} |@@ )", re.M)
_LABEL = r"^[ \t>*_#-]*{label}[ \t*_]*[:\-\u2013\u2014][ \t*_]*(?P<text>.*)$"
_WRONG = re.compile(_LABEL.format(label=r"what\s+went\s+wrong"), re.I | re.M)
_DIFFERENTLY = re.compile(_LABEL.format(label=r"what\s+to\s+do\s+differently"), re.I | re.M)
HEAD_LIMIT = 4_000  # characters read before the edit: a reflection is two sentences


def reflection_part(reply: str) -> tuple[str, str] | None:
    """(what went wrong, what to do differently) from the start of `reply`; None when
    either is missing or empty."""
    head = reply[:HEAD_LIMIT]
    edit = _EDIT_START.search(head)
    head = head[: edit.start()] if edit else head
    wrong, differently = _labelled(head, _WRONG), _labelled(head, _DIFFERENTLY)
    if wrong and differently:
        return wrong, differently
    obj = extract_json(head) if "{" in head else None
    if obj is not None:
        analysis, suggestion = obj.get("analysis"), obj.get("suggestion")
        if isinstance(analysis, str) and isinstance(suggestion, str) and analysis.strip() and suggestion.strip():
            return analysis.strip(), suggestion.strip()
    return None


def _labelled(head: str, label: re.Pattern[str]) -> str:
    """The text after `label`, with the lines that continue it (up to a blank line or the
    next label)."""
    found = label.search(head)
    if found is None:
        return ""
    lines = [found.group("text")]
    for line in head[found.end():].splitlines()[1:]:
        if not line.strip() or _WRONG.match(line) or _DIFFERENTLY.match(line):
            break
        lines.append(line)
    return " ".join(part.strip().strip("*_").strip() for part in lines if part.strip()).strip()
