"""The library under the API: the history store's limits under contention, and the heuristic."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from reflection.pattern.criteria import REVIEW_CRITERIA
from reflection.reflect_history import ReflectHistory, ReflectionLimitReached
from reflection.reflect_skill import ReflectRequest, ReflectResult, reflect_on_conversation


def _reflect(turns: list[dict[str, str]], session: str = "s", cap: int = 5) -> ReflectResult:
    request = ReflectRequest(project_path="/p", session_id=session, conversation=turns, max_insights=cap)
    return anyio.run(lambda: reflect_on_conversation(request, criteria=REVIEW_CRITERIA, threshold=0.8))


def test_the_heuristic_counts_files_tools_and_error_patterns() -> None:
    tools = ["Read", "Edit", "Bash", "Grep", "Write"]
    turns = [{"role": "user", "content": "go"}]
    turns += [{"role": "tool", "name": name, "content": "ok"} for name in tools]
    turns += [{"role": "assistant", "content": "Changed a.py, pkg/b.ts and docs/c.md; see https://x.io/d.py"},
              {"role": "tool", "name": "Bash", "content": "TypeError: x\nnpm ERR! code 1"},
              {"role": "assistant", "content": "Fixed; it works now."}]
    result = _reflect(turns)
    assert result.insights[:3] == ["Modified 3 files", "Used 5 different tools",
                                   "Encountered 2 error patterns: build errors, TypeError"]
    scores = {c.name: c.score for c in result.criterion_scores}
    assert scores["task_completion"] == 0.8 and scores["test_coverage"] == 0.2
    assert "Address: Add tests that cover the change" in result.suggested_actions


def test_no_assistant_answer_scores_task_completion_lowest() -> None:
    result = _reflect([{"role": "user", "content": "please fix"}])
    assert result.criterion_scores[0].score == 0.1 and result.satisfactory is False


def _result(session: str) -> ReflectResult:
    return _reflect([{"role": "assistant", "content": "done"}], session)


def test_the_session_limit_holds_across_stores_and_threads(tmp_path: Path) -> None:
    stores = [ReflectHistory(tmp_path, max_per_session=3) for _ in range(2)]  # two processes' worth of caches
    accepted, refused = [], []
    template = _result("same")

    def add(n: int) -> None:
        try:
            stores[n % 2].append(template)
            accepted.append(n)
        except ReflectionLimitReached:
            refused.append(n)

    threads = [threading.Thread(target=add, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(accepted) == 3 and len(refused) == 17
    assert len(stores[0].records()) == 3 and stores[1].count_for("same") == 3


def test_a_torn_line_is_skipped_and_the_next_record_starts_on_its_own_line(tmp_path: Path) -> None:
    store = ReflectHistory(tmp_path)
    store.append(_result("a"))
    with store.path.open("ab") as handle:
        handle.write(b'{"reflectionId": "torn')  # a writer killed mid-line
    store.append(_result("b"))
    assert [r["sessionId"] for r in store.records()] == ["b", "a"]
    moved = store.archive()
    assert moved.count == 2 and moved.path is not None and not store.path.exists()
    assert store.count_for("a") == 0


def test_a_store_counts_its_own_appends_as_a_fresh_reading_does(tmp_path: Path) -> None:
    # Its own line is counted without reading it back, unless the file ended otherwise than counted.
    store = ReflectHistory(tmp_path, max_per_session=3)
    store.append(_result("a"))
    store.append(_result("b"))
    with store.path.open("ab") as handle:
        handle.write(ReflectHistory(tmp_path).path.read_bytes().splitlines(keepends=True)[0])  # another writer's "a"
    store.append(_result("a"))
    with store.path.open("ab") as handle:
        handle.write(b'{"sessionId": "a", "torn')
    store.append(_result("b"))
    with pytest.raises(ReflectionLimitReached):
        store.append(_result("a"))
    fresh = ReflectHistory(tmp_path, max_per_session=3)
    assert [store.count_for(s) for s in "ab"] == [fresh.count_for(s) for s in "ab"] == [3, 2]
    assert [r["sessionId"] for r in fresh.records()] == ["b", "a", "a", "b", "a"]


@pytest.mark.parametrize("limit", [0, -1])
def test_a_store_needs_room_for_one(tmp_path: Path, limit: int) -> None:
    with pytest.raises(ValueError):
        ReflectHistory(tmp_path, max_per_session=limit)


def test_an_append_is_on_disk_when_it_returns_though_its_fsync_runs_outside_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import stat

    synced: list[int] = []  # the history's size at each fsync of it
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        if stat.S_ISREG(os.fstat(fd).st_mode):
            synced.append(os.fstat(fd).st_size)

    monkeypatch.setattr(os, "fsync", fsync)
    history = ReflectHistory(tmp_path, max_per_session=1)
    late: list[str] = []

    def add(n: int) -> None:
        history.append(_result(f"session-{n}"))
        data = history.path.read_bytes()
        end = data.index(b'"session-%d"' % n)
        end = data.index(b"\n", end) + 1
        if not synced or max(synced) < end:
            late.append(f"session-{n}")

    threads = [threading.Thread(target=add, args=(n,)) for n in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert late == []
    assert len(history.records()) == 24
    assert len(synced) <= 24  # one fsync may serve several appends, never more than one each
