"""Read a model's reply into edits, whatever shape it took.

The format the model was asked for decides the instructions, not what is accepted: a
reply is read as marker blocks when it has SEARCH/REPLACE/FILE markers, as a unified
diff when it has one, as fenced code blocks otherwise, and as one code block when the
whole reply is Python code. `shape_of` names which of these a reply is, for the record
of asked and received formats.
"""

from __future__ import annotations

import ast
from typing import Literal

from orchestrator.edits.base import Edit, EditError
from orchestrator.edits.fenced import has_fences, parse_fenced
from orchestrator.edits.markers import has_markers, parse_markers
from orchestrator.edits.udiff import has_diff, parse_udiff

Shape = Literal["search-replace", "diff", "whole", "bare-code", "prose", "empty"]


def shape_of(reply: str) -> Shape:
    if not reply.strip():
        return "empty"
    if has_markers(reply):
        return "search-replace"
    if has_diff(reply):
        return "diff"
    if has_fences(reply):
        return "whole"
    return "bare-code" if _is_code(reply) else "prose"


def parse_reply(reply: str, *, truncated: bool = False) -> list[Edit]:
    """The edits of `reply` (paths as written); EditError when there are none to read.

    `truncated`: the model stopped at its output limit, so an unclosed block is cut off,
    not merely unclosed.
    """
    shape = shape_of(reply)
    if shape == "empty":
        raise EditError("the reply is empty: it holds no code")
    if shape == "search-replace":
        edits = parse_markers(reply)
    elif shape == "diff":
        edits = parse_udiff(reply)
    elif shape == "whole":
        edits = parse_fenced(reply, truncated=truncated)
    elif shape == "bare-code":
        edits = [Edit(path="", kind="block", replace=reply.strip("\n") + "\n")]
    else:
        edits = []
    if not edits:
        cut = " (it was cut off at the model's output limit)" if truncated else ""
        raise EditError(f"the reply holds no code to apply{cut}: no fenced code block and no edit block")
    return edits


def _is_code(reply: str) -> bool:
    """A reply that is nothing but Python defining something (no prose around it)."""
    try:
        tree = ast.parse(reply)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # deep nesting: the parser gives up
        return False
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for node in tree.body)
