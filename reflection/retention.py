"""Retention of outcome reflections: the newest 30 per agent stay, older ones are archived.

The protocol keeps the last 30 reflections of each agent at hand and archives the rest.
Nothing is deleted: records move to the store's archive (for the JSONL store, as their
exact lines, to `<memory>/archive/reflections-<year>.jsonl`; see `JsonlReflectionStore.move_out`),
where `archived_outcomes` finds them again, e.g. for the markdown view's archive. Any
`ReflectionStore` will do: which records leave is decided here, once.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC
from pathlib import Path

from reflection.location import REFLECTIONS_PATH
from reflection.outcome import OutcomeReflection
from reflection.store import JsonlReflectionStore, ReflectionStore

LIVE_PER_AGENT = 30


def archive_outcomes(store: ReflectionStore, keep_per_agent: int = LIVE_PER_AGENT) -> int:
    """Move each agent's outcome records beyond its newest `keep_per_agent` to the
    store's archive; how many moved. Attempt reflections are left alone."""
    leaving = _beyond_newest(store.outcomes(), max(keep_per_agent, 0))
    if not leaving:
        return 0
    return store.archive(leaving)


def archived_outcomes(memory_dir: Path) -> list[OutcomeReflection]:
    """The outcome records in `<memory_dir>/archive/` (the JSONL store's archive)."""
    return JsonlReflectionStore(Path(memory_dir) / REFLECTIONS_PATH.name).archived_outcomes()


def _beyond_newest(records: list[OutcomeReflection], keep: int) -> set[str]:
    """The ids of every agent's records but its `keep` newest (createdAt, then file order)."""
    by_agent: dict[str, list[tuple[int, OutcomeReflection]]] = defaultdict(list)
    for order, record in enumerate(records):
        by_agent[record.agent].append((order, record))
    leaving: set[str] = set()
    staying: set[str] = set()
    for mine in by_agent.values():
        mine.sort(key=lambda pair: (_utc_key(pair[1]), pair[0]), reverse=True)
        staying.update(record.id for _, record in mine[:keep])
        leaving.update(record.id for _, record in mine[keep:])
    return leaving - staying  # moves go by id: a record kept is never moved with a copy


def _utc_key(record: OutcomeReflection) -> float:
    value = record.created_at
    return (value.replace(tzinfo=UTC) if value.tzinfo is None else value).timestamp()

