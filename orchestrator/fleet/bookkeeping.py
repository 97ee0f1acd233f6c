"""The `.openagents/` merge when a worker integrates a task: three-way, file by file, by meaning.

Several workers close different tasks of one repository at once. Each changed its own
line of `tasks.jsonl` and wrote its own plan, so git's line merge would see conflicts
where there are none (adjacent lines), and merge files it cannot understand (a JSON of
counters). `merge_file(path, base, ours, theirs)` decides per file, from the worker's
base (the tip its task started from), its own version and the remote tip's:

- `tasks.jsonl`: the tip's lines in the tip's order; a task whose line we changed since
  our base takes our changes key by key (the tip's changes to other keys stay), a task
  we removed (moved to the archive) goes, a task we added is appended. Lines that are
  not tasks stay as the tip has them.
- `archive/tasks-*.jsonl`: the union by task id (the tip's lines first).
- `subtasks/<id>.json`, `escalations/<id>.*`, `history/...`: ours (one task's own files).
- `memory/rules.md`: the tip's file with our rules that it lacks appended.
- `memory/edit-formats.json`: counters added up: the tip's, plus what we counted since our base.
- `memory/task-reflections.json`: the union by task identity; where both sides have notes
  for one identity, the later `reflectedAt` wins (last write wins, as in the store).
- anything else: ours where we changed it, else the tip's.

`None` stands for a file that does not exist (on that side, or as the result). Pure
functions: the caller reads and writes the files.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from reflection.rules import bullet_text

Content = bytes | None
TASKS = ".openagents/tasks.jsonl"
ARCHIVE = ".openagents/archive/"
RULES = ".openagents/memory/rules.md"
EDIT_FORMATS = ".openagents/memory/edit-formats.json"
TASK_NOTES = ".openagents/memory/task-reflections.json"


def merge_file(path: str, base: Content, ours: Content, theirs: Content) -> Content:
    """The merged content of `path` (see the module's docstring)."""
    if ours == base:
        return theirs  # we did not touch it: the tip's, whatever it is now
    if theirs == base or theirs == ours:
        return ours
    if ours is None or theirs is None:
        return ours  # one side removed it, the other changed it: the task's own intent wins
    return _merger(path)(base or b"", ours, theirs)


def _merger(path: str) -> Callable[[bytes, bytes, bytes], bytes]:
    if path == TASKS:
        return merge_tasks
    if path.startswith(ARCHIVE) and path.endswith(".jsonl"):
        return lambda _base, ours, theirs: union_by_id(ours, theirs)
    if path == RULES:
        return lambda _base, ours, theirs: union_of_rules(ours, theirs)
    if path == EDIT_FORMATS:
        return merge_counters
    if path == TASK_NOTES:
        return lambda _base, ours, theirs: merge_task_notes(ours, theirs)
    return lambda _base, ours, _theirs: ours


# -- tasks.jsonl --------------------------------------------------------------------------


def _lines(data: bytes) -> list[bytes]:
    return [line + b"\n" for line in data.splitlines() if line.strip()]


def _by_id(lines: list[bytes]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for line in lines:
        body = _task(line)
        if body is not None:
            found.setdefault(str(body["id"]), body)  # a duplicate id: the first line counts, as TaskBoard reads it
    return found


def _task(line: bytes) -> dict[str, Any] | None:
    try:
        body = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) and isinstance(body.get("id"), str) and body["id"] else None


def merge_tasks(base: bytes, ours: bytes, theirs: bytes) -> bytes:
    """tasks.jsonl merged by task id, key by key (see the module's docstring)."""
    base_tasks, our_lines = _by_id(_lines(base)), _lines(ours)
    our_tasks = _by_id(our_lines)
    out, seen = [], set()
    for line in _lines(theirs):
        body = _task(line)
        if body is None:
            out.append(line)
            continue
        task_id = str(body["id"])
        if task_id in seen:
            out.append(line)
            continue
        seen.add(task_id)
        before, mine = base_tasks.get(task_id), our_tasks.get(task_id)
        if before is not None and mine is None:
            continue  # we moved it out (to the archive)
        if mine is None or mine == before:
            out.append(line)  # ours did not change it: the tip's line, byte for byte
        elif body == before:
            out.append(_line_of(our_lines, task_id))  # only we changed it: our line, byte for byte
        else:
            out.append(orjson.dumps(merge_keys(before or {}, mine, body)) + b"\n")
    for task_id, mine in our_tasks.items():
        if task_id not in seen and task_id not in base_tasks:
            out.append(_line_of(our_lines, task_id))  # added by us
    return b"".join(out)


def merge_keys(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """One task's object: the tip's, with the keys we changed, added or removed since base."""
    merged = dict(theirs)
    for key, value in ours.items():
        if base.get(key, _MISSING) != value:
            merged[key] = value
    for key in base.keys() - ours.keys():
        merged.pop(key, None)
    return merged


_MISSING = object()


def _line_of(lines: list[bytes], task_id: str) -> bytes:
    return next(line for line in lines if (body := _task(line)) is not None and body["id"] == task_id)


def union_by_id(ours: bytes, theirs: bytes) -> bytes:
    """An archive: the tip's lines, then ours whose task the tip does not hold."""
    kept = _lines(theirs)
    known = set(_by_id(kept))
    for line in _lines(ours):
        body = _task(line)
        if body is None or str(body["id"]) not in known:
            kept.append(line)
            if body is not None:
                known.add(str(body["id"]))
    return b"".join(kept)


# -- memory --------------------------------------------------------------------------------


def union_of_rules(ours: bytes, theirs: bytes) -> bytes:
    """rules.md: the tip's file, then each of our rules it does not hold yet, in our order."""
    text = theirs.decode("utf-8", errors="replace")
    held = {rule for line in text.splitlines() if (rule := bullet_text(line))}
    added = [line for line in ours.decode("utf-8", errors="replace").splitlines()
             if (rule := bullet_text(line)) and rule not in held]
    if not added:
        return theirs
    return (text + ("" if text.endswith("\n") or not text else "\n") + "\n".join(added) + "\n").encode("utf-8")


def merge_counters(base: bytes, ours: bytes, theirs: bytes) -> bytes:
    """edit-formats.json ({"models": {model: {format: {asked, applied}}}}): the tip's counts
    plus ours less base's. A side that is not that shape: ours (a hint, never worth a fight)."""
    try:
        before, mine, tip = (_counts(orjson.loads(b)) if b.strip() else {} for b in (base, ours, theirs))
    except (orjson.JSONDecodeError, ValueError):
        return ours
    merged: dict[str, dict[str, dict[str, int]]] = {m: {f: dict(c) for f, c in fs.items()} for m, fs in tip.items()}
    for model, formats in mine.items():
        for fmt, counts in formats.items():
            target = merged.setdefault(model, {}).setdefault(fmt, {})
            for name, value in counts.items():
                gained = value - before.get(model, {}).get(fmt, {}).get(name, 0)
                target[name] = max(target.get(name, 0) + gained, 0)
    return orjson.dumps({"models": merged}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def _counts(data: Any) -> dict[str, dict[str, dict[str, int]]]:
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise ValueError("not a counters file")
    out: dict[str, dict[str, dict[str, int]]] = {}
    for model, formats in models.items():
        if not isinstance(formats, dict):
            raise ValueError("not a counters file")
        for fmt, counts in formats.items():
            if not isinstance(counts, dict) or not all(isinstance(v, int) for v in counts.values()):
                raise ValueError("not a counters file")
            out.setdefault(model, {})[fmt] = dict(counts)
    return out


def merge_task_notes(ours: bytes, theirs: bytes) -> bytes:
    """task-reflections.json ({identity: notes}): every identity of both sides; for one on
    both, the notes reflected on later. A side that is not that shape: ours."""
    try:
        mine, tip = (orjson.loads(b) if b.strip() else {} for b in (ours, theirs))
    except orjson.JSONDecodeError:
        return ours
    if not isinstance(mine, dict) or not isinstance(tip, dict):
        return ours
    merged = dict(tip)
    for identity, notes in mine.items():
        if _reflected_at(notes) >= _reflected_at(tip.get(identity)):
            merged[identity] = notes
    return orjson.dumps(merged, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def _reflected_at(notes: Any) -> str:
    """An ISO-8601 UTC time in one format (the store's), so text order is time order."""
    return str(notes.get("reflectedAt", "")) if isinstance(notes, dict) else ""
