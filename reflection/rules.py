"""Project rules: lessons that proved themselves, kept where every prompt can carry them.

`<memory_dir>/rules.md` is a markdown list, one rule per bullet. A rule goldenloop
promoted ends with an HTML comment naming its lesson and the passes that confirmed it;
a bullet a human wrote by hand is a rule too, kept as written and never duplicated.

A lesson is promoted when it has a rule (a tactical rule or a MARS principle) and the
attempts it was shown to passed at least `min_passes` times, at least `min_pass_rate` of
its showings: a rule shown a hundred times that preceded three passes proved nothing.
The file is rewritten atomically under a lock, so two runs promoting at once add each
rule once.

`append_to_agent_file` copies rules into a file like AGENTS.md or CLAUDE.md under one
heading; committing that file is the caller's business.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from reflection.fileio import atomic_write, file_lock
from reflection.lessons import normal_text

if TYPE_CHECKING:  # the index (sqlite) is imported by the runs that rank lessons
    from reflection.lessons import LessonRanker

RULES_FILE = "rules.md"
RULES_HEADER = (
    "# Project rules goldenloop learned\n\n"
    "Each rule helped attempts pass. Edit or delete freely; a bullet you add is kept.\n\n"
)
AGENT_HEADING = "## Rules learned by goldenloop"
PROMPT_HEAD = "Project rules (learned from earlier attempts):"

_BULLET = re.compile(r"^\s*[-*+]\s+(.*\S)\s*$")
_COMMENT = re.compile(r"\s*<!--.*?-->\s*$")


def bullet_text(line: str) -> str | None:
    """The rule on a markdown bullet line, without its trailing comment; None for other lines."""
    match = _BULLET.match(line)
    if not match:
        return None
    return _COMMENT.sub("", match.group(1)).strip() or None


def bullets(text: str) -> list[str]:
    return [rule for line in text.splitlines() if (rule := bullet_text(line))]


def read_rules(memory_dir: Path) -> list[str]:
    """Every rule in rules.md, in file order: promoted and hand-written alike."""
    try:
        return bullets((Path(memory_dir) / RULES_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []


def rules_prompt(memory_dir: Path, max_chars: int = 1500) -> str:
    """The rules block for a prompt, whole bullets only, within `max_chars`; '' when none."""
    block = PROMPT_HEAD
    for rule in read_rules(memory_dir):
        line = f"\n- {rule}"
        if len(block) + len(line) > max_chars:
            break
        block += line
    return "" if block == PROMPT_HEAD else block


_PLACE = re.compile(r"\S+\.\w+:\d+")  # test_calc.py:9: one line of one task's code


def _one_tasks(rule: str) -> bool:
    """A rule that points at a line of one task's files helped that task's kin, but is no
    rule for every prompt of the project."""
    return bool(_PLACE.search(rule))


def promote_rules(
    index: LessonRanker, memory_dir: Path, min_passes: int = 3, *, min_pass_rate: float = 0.5
) -> list[str]:
    """Append the rules of lessons that proved themselves to rules.md; return those added."""
    path = Path(memory_dir) / RULES_FILE
    candidates = [
        (lesson.rule, lesson.id, helped)
        for lesson, shown, helped in index.proven(min_passes)
        if lesson.rule and helped >= min_pass_rate * shown and not _one_tasks(lesson.rule)
    ]
    if not candidates:
        return []
    with file_lock(path.with_name(path.name + ".lock"), timeout_s=None):
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        present = {normal_text(rule) for rule in bullets(current)}
        added: list[str] = []
        lines: list[str] = []
        for rule, lesson_id, helped in candidates:
            key = normal_text(rule)
            if key and key not in present:
                present.add(key)
                added.append(rule)
                lines.append(f"- {rule} <!-- lesson {lesson_id}; confirmed by {helped} passes -->\n")
        if added:
            base = current or RULES_HEADER
            atomic_write(path, (_with_newline(base) + "".join(lines)).encode())
    return added


def append_to_agent_file(path: Path, rules: list[str]) -> bool:
    """Add rules not already in `path` under AGENT_HEADING; True when the file changed."""
    path = Path(path)
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    present = {normal_text(rule) for rule in bullets(current)}
    new: list[str] = []
    for rule in rules:
        key = normal_text(rule)
        if key and key not in present:
            present.add(key)
            new.append(f"- {rule}\n")
    if not new:
        return False
    atomic_write(path, _insert_under_heading(current, "".join(new)).encode())
    return True


def _insert_under_heading(text: str, block: str) -> str:
    """`text` with `block` at the end of the heading's section, the heading added once."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == AGENT_HEADING), None)
    if start is None:
        gap = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
        return f"{text}{gap}{AGENT_HEADING}\n\n{block}"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("#")), len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # after the section's last bullet, before its trailing blank lines
    lines[end - 1] = _with_newline(lines[end - 1])
    return "".join(lines[:end]) + block + "".join(lines[end:])


def _with_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"
