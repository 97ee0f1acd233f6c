"""Give back what redaction hid from the model, on the lines a reply copied unchanged.

Every file a model is shown is redacted first: a test fixture's `ann@example.com` reads
`[REDACTED:email]`. A reply that rewrites the file whole, or copies such a line into its
SEARCH text, copies the placeholder. Written as it stands, the user's real value would be
replaced by the placeholder and committed. So a line of an edit that holds a placeholder
and reads exactly as one of the file's own lines reads once redacted gets that line back;
a placeholder left on any other line is refused, since nothing says what it stood for.
"""

from __future__ import annotations

import re

from orchestrator.edits.base import Edit, EditError

PLACEHOLDER = re.compile(r"\[REDACTED:[\w.-]+\]", re.IGNORECASE)


def restore(edit: Edit, original: str | None) -> Edit:
    """`edit` with the values `original` hides behind placeholders given back where known."""
    if original is None or not PLACEHOLDER.search(edit.search + edit.replace):
        return edit
    hidden = _Hidden(original)
    return edit.model_copy(update={"search": hidden.give_back(edit.search), "replace": hidden.give_back(edit.replace)})


def refuse_leftovers(text: str | None, original: str | None) -> None:
    """EditError when `text` holds a placeholder on a line `original` does not have."""
    if text is None or not PLACEHOLDER.search(text):
        return
    own = set((original or "").splitlines())
    for line in text.splitlines():
        found = PLACEHOLDER.search(line)
        if found and line not in own:
            raise EditError(
                f"the reply writes {found[0]}, which stands for a value hidden from you, where goldenloop "
                "cannot tell which value it was; keep the lines that hold it exactly as shown, or leave "
                "them out and write only the functions you change"
            )


class _Hidden:
    """What redaction changed in one file: whole lines (shown -> on disk, indentation
    stripped) and, per placeholder, the values it stood for."""

    def __init__(self, original: str) -> None:
        from reflection.redact import redact  # only a reply holding a placeholder pays for it

        lines = original.splitlines()
        shown = redact(original).splitlines()
        if len(shown) != len(lines):  # a secret spanning lines: line by line instead
            shown = [redact(line) for line in lines]
        by_line: dict[str, set[str]] = {}
        self.values: dict[str, set[str]] = {}
        for seen, real in zip(shown, lines, strict=True):
            if seen != real:
                by_line.setdefault(seen.strip(), set()).add(real.strip())
                self._note_values(seen, real)
        self.lines = {seen: next(iter(reals)) for seen, reals in by_line.items() if len(reals) == 1}

    def _note_values(self, seen: str, real: str) -> None:
        pieces = PLACEHOLDER.split(seen)
        pattern = "(.+?)".join(re.escape(piece) for piece in pieces)
        match = re.fullmatch(pattern, real, re.DOTALL)
        if match:
            for marker, value in zip(PLACEHOLDER.findall(seen), match.groups(), strict=True):
                self.values.setdefault(marker, set()).add(value)

    def give_back(self, text: str) -> str:
        out = []
        for line in text.split("\n"):
            key = line.strip()
            if key in self.lines and PLACEHOLDER.search(key):  # a copied line: exactly as on disk
                line = line[: len(line) - len(line.lstrip())] + self.lines[key]
            else:  # a changed line: each placeholder that stood for one value only in this file
                line = PLACEHOLDER.sub(self._one_value, line)
            out.append(line)
        return "\n".join(out)

    def _one_value(self, marker: re.Match[str]) -> str:
        values = self.values.get(marker[0], set())
        return next(iter(values)) if len(values) == 1 else marker[0]
