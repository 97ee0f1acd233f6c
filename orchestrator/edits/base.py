"""What every reply parser produces and every applier consumes: edits, and their errors."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

EditKind = Literal["replace", "write", "delete", "block"]


class EditError(Exception):
    """A reply that cannot be parsed or applied; the message is written for the model."""


class Edit(BaseModel):
    """One change to one file, as read from a reply.

    `path` is the path as the reply wrote it; "" when the reply named none (the
    resolver in `targets` finds the file or refuses).

    `replace`: `search` (whole lines, possibly empty) becomes `replace`.
    `write`: the file's whole content becomes `replace` (an explicit FILE block).
    `delete`: the file is removed; both texts are empty.
    `block`: a fenced code block: the whole new file, or, for a Python file, the
    top-level functions and classes it holds, which replace those of the same name.
    """

    path: str
    kind: EditKind
    search: str = ""
    replace: str = ""


def join_lines(lines: list[str]) -> str:
    """Lines as text, each "\\n"-terminated."""
    return "".join(line + "\n" for line in lines)
