"""The `.openagents/` merge at integration: two workers closed different tasks of one backlog."""

from __future__ import annotations

import orjson

from orchestrator.fleet.bookkeeping import merge_file
from orchestrator.tasks import TaskBoard


def lines(*tasks: dict) -> bytes:
    return b"".join(orjson.dumps(t) + b"\n" for t in tasks)


def t(task_id: str, status: str = "open", **extra: object) -> dict:
    return {"id": task_id, "title": f"task {task_id}", "status": status, **extra}


TASKS = ".openagents/tasks.jsonl"


def test_two_workers_closing_neighbouring_tasks_both_keep_their_close():
    base = lines(t("T-1"), t("T-2"), t("T-3"))
    ours = lines(t("T-1", "closed", commits=["a1"]), t("T-2"), t("T-3"))  # we closed T-1
    theirs = lines(t("T-1"), t("T-2", "closed", commits=["b2"]), t("T-3"))  # another worker closed T-2

    merged = merge_file(TASKS, base, ours, theirs)

    assert merged == lines(t("T-1", "closed", commits=["a1"]), t("T-2", "closed", commits=["b2"]), t("T-3"))


def test_our_change_to_a_task_keeps_the_keys_a_human_changed_at_the_tip():
    base = lines(t("T-1", description="old words"))
    ours = lines(t("T-1", "closed", description="old words", commits=["a1"]))
    theirs = lines(t("T-1", description="clearer words", labels=["api"]))

    merged = orjson.loads(merge_file(TASKS, base, ours, theirs) or b"")
    assert merged == t("T-1", "closed", description="clearer words", commits=["a1"], labels=["api"])


def test_lines_we_did_not_touch_stay_as_the_tip_wrote_them_byte_for_byte():
    odd = b'{"id": "T-2",   "title": "spaced", "status": "open", "custom": 1}\n'
    base = lines(t("T-1")) + odd
    ours = lines(t("T-1", "closed")) + odd
    theirs = lines(t("T-1")) + odd.replace(b'"custom": 1', b'"custom": 2') + b"not json at all\n"

    merged = merge_file(TASKS, base, ours, theirs) or b""

    assert merged.splitlines()[1] == odd.replace(b'"custom": 1', b'"custom": 2').rstrip()
    assert merged.splitlines()[2] == b"not json at all"
    assert orjson.loads(merged.splitlines()[0])["status"] == "closed"


def test_a_task_we_archived_goes_and_a_task_we_added_is_appended():
    base = lines(t("T-1", "closed"), t("T-2"))
    ours = lines(t("T-2", "closed"), t("T-9"))  # T-1 moved to the archive, T-9 added
    theirs = lines(t("T-1", "closed"), t("T-2"), t("T-3"))  # someone added T-3

    merged = merge_file(TASKS, base, ours, theirs) or b""

    assert [orjson.loads(line)["id"] for line in merged.splitlines()] == ["T-2", "T-3", "T-9"]
    assert orjson.loads(merged.splitlines()[0])["status"] == "closed"


def test_the_merged_backlog_reads_as_a_board(tmp_path):
    base = lines(t("T-1"), t("T-2"), t("T-3", deps=[{"id": "T-1", "type": "blocks"}]))
    ours = lines(t("T-1", "closed"), t("T-2"), t("T-3", deps=[{"id": "T-1", "type": "blocks"}]))
    theirs = lines(t("T-1"), t("T-2", "blocked"), t("T-3", deps=[{"id": "T-1", "type": "blocks"}]))
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(merge_file(TASKS, base, ours, theirs) or b"")

    board = TaskBoard(path)

    assert board.statuses() == {"T-1": "closed", "T-2": "blocked", "T-3": "open"}
    assert [task.id for task in board.ready()] == ["T-3"]
    assert board.warnings == []


def test_archives_are_joined_by_task_id():
    ours = lines(t("T-1", "closed"), t("T-4", "closed"))
    theirs = lines(t("T-1", "closed"), t("T-2", "closed"))

    merged = merge_file(".openagents/archive/tasks-2026.jsonl", None, ours, theirs) or b""

    assert [orjson.loads(line)["id"] for line in merged.splitlines()] == ["T-1", "T-2", "T-4"]


def test_a_tasks_own_files_are_ours_and_untouched_files_are_the_tips():
    plan = ".openagents/subtasks/T-1.json"
    assert merge_file(plan, b"{}", b'{"mine": 1}', b'{"theirs": 1}') == b'{"mine": 1}'
    assert merge_file(plan, None, b'{"mine": 1}', None) == b'{"mine": 1}'
    packet = ".openagents/escalations/T-1.md"
    assert merge_file(packet, b"old", b"ours", b"theirs") == b"ours"
    other = ".openagents/notes.txt"
    assert merge_file(other, b"same", b"same", b"moved on") == b"moved on"  # we did not change it
    assert merge_file(other, b"same", None, b"same") is None  # we removed it, they did not touch it


def test_rules_are_the_union_in_order():
    base = b"# Project rules\n\n- Keep it simple\n"
    ours = base + b"- Run mypy before committing <!-- lesson L1 -->\n"
    theirs = base + b"- Quote shell arguments\n"

    merged = (merge_file(".openagents/memory/rules.md", base, ours, theirs) or b"").decode()

    assert merged == ("# Project rules\n\n- Keep it simple\n- Quote shell arguments\n"
                      "- Run mypy before committing <!-- lesson L1 -->\n")
    same = theirs + b"- Run mypy before committing\n"  # the tip already holds it (without our comment)
    assert merge_file(".openagents/memory/rules.md", base, ours, same) == same


def counters(**models: dict) -> bytes:
    return orjson.dumps({"models": models})


def test_edit_format_counts_add_up_what_each_side_counted():
    path = ".openagents/memory/edit-formats.json"
    base = counters(m={"whole": {"asked": 4, "applied": 3}})
    ours = counters(m={"whole": {"asked": 6, "applied": 5}, "udiff": {"asked": 1, "applied": 0}})
    theirs = counters(m={"whole": {"asked": 5, "applied": 4}}, other={"whole": {"asked": 1, "applied": 1}})

    merged = orjson.loads(merge_file(path, base, ours, theirs) or b"")

    assert merged == {"models": {"m": {"whole": {"asked": 7, "applied": 6}, "udiff": {"asked": 1, "applied": 0}},
                                 "other": {"whole": {"asked": 1, "applied": 1}}}}
    assert merge_file(path, base, b"not json", theirs) == b"not json"  # a hint: ours, never a failure
