"""What an earlier run wrote, shown to a later prompt as data: quoted, never obeyed.

Task notes, playbooks and lessons are a model's or an agent's own words from another run.
A later prompt shows them as an account to weigh, each line quoted (`> `), under headings
that name them for what they are, and without the lines that read as orders to the agent
("ignore the tests", "mark the task done", "you are now ..."): such a line in a note is an
injection, whoever wrote it, and advice worth keeping never needs that form.
"""

from __future__ import annotations

import re

__all__ = ["as_data", "instruction_like", "quote"]

_ORDERS = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,60}\b(?:instructions?|tests?|checks?|rules?|prompt|"
    r"above|previous|system|guidelines?|task)\b"
    r"|\bmark\b[^.\n]{0,40}\b(?:done|closed|complete|completed|passed|finished|resolved)\b"
    r"|\b(?:skip|disable|delete|remove|weaken|comment out|xfail)\b[^.\n]{0,30}\b(?:tests?|checks?|assertions?)\b"
    r"|\b(?:you are now|you must now|new instructions|system prompt|developer message)\b"
    r"|\b(?:without|no need (?:for|to))\b[^.\n]{0,20}\b(?:running|run|verifying|checking)\b[^.\n]{0,20}\btests?\b",
    re.IGNORECASE,
)
_NEGATED = re.compile(r"\b(?:do not|don't|never|not|avoid)\b[^.\n]{0,20}$", re.IGNORECASE)


def instruction_like(line: str) -> bool:
    """A line that reads as an order to the agent about its task or the checks; advice
    against it ("never skip the tests") is not one."""
    for found in _ORDERS.finditer(line):
        if not _NEGATED.search(line[: found.start()]):
            return True
    return False


def as_data(text: str) -> str:
    """`text` without its instruction-like lines (a line-less text is judged whole)."""
    return "\n".join(line for line in text.splitlines() if not instruction_like(line))


def quote(text: str) -> str:
    """Each line of `text` quoted, as a mail client quotes: the reader sees whose words."""
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.splitlines())
