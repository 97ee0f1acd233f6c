"""Rules: lessons confirmed by passing attempts land once in rules.md and agent files."""

from __future__ import annotations

import json
from pathlib import Path

from reflection.lesson_index import LessonIndex
from reflection.rules import append_to_agent_file, promote_rules, read_rules, rules_prompt


def write_outcome(memory: Path, lesson_id: str, rule: str, *, principle: bool = False) -> None:
    record = {
        "id": lesson_id,
        "kind": "outcome",
        "outcome": "failed",
        "sessionId": "s1",
        "taskId": f"T-{lesson_id}",
        "agent": "coder",
        "title": "a task",
        "createdAt": "2025-03-01T10:00:00Z",
        "labels": [],
        "files": [],
        "whatToDoDifferently": f"advice of {lesson_id}",
        ("principle" if principle else "tacticalRule"): f"I should follow this rule: {rule}" if principle else rule,
        "source": "agent",
    }
    memory.mkdir(parents=True, exist_ok=True)
    with open(memory / "reflections.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def show(index: LessonIndex, lesson_id: str, passes: int, failures: int = 0) -> None:
    for attempt in range(passes + failures):
        index.record_use([lesson_id], task_id="T-x", attempt=attempt + 1, passed=attempt < passes)


def test_a_rule_confirmed_by_three_passes_lands_once(tmp_path: Path) -> None:
    write_outcome(tmp_path, "a", "Run the migrations before the tests.")
    write_outcome(tmp_path, "b", "Prefer pathlib over os.path.")
    index = LessonIndex(tmp_path)
    show(index, "a", passes=3)
    show(index, "b", passes=2)
    assert promote_rules(index, tmp_path) == ["Run the migrations before the tests."]
    assert promote_rules(index, tmp_path) == []
    assert read_rules(tmp_path) == ["Run the migrations before the tests."]
    text = (tmp_path / "rules.md").read_text()
    assert text.count("Run the migrations") == 1 and "<!-- lesson a; confirmed by 3 passes -->" in text


def test_a_principle_is_promoted_without_its_preamble(tmp_path: Path) -> None:
    write_outcome(tmp_path, "p", "validate inputs at the boundary.", principle=True)
    index = LessonIndex(tmp_path)
    show(index, "p", passes=4)
    assert promote_rules(index, tmp_path, min_passes=3) == ["validate inputs at the boundary."]


def test_a_rule_shown_far_more_often_than_it_helped_is_not_promoted(tmp_path: Path) -> None:
    write_outcome(tmp_path, "a", "Sleep before retrying.")
    index = LessonIndex(tmp_path)
    show(index, "a", passes=3, failures=20)
    assert promote_rules(index, tmp_path) == []


def test_a_hand_written_rule_is_kept_and_counts_as_present(tmp_path: Path) -> None:
    hand_written = "# Our rules\n\n- Never edit generated files.\n* run the MIGRATIONS before the tests\n"
    (tmp_path / "rules.md").write_text(hand_written)
    write_outcome(tmp_path, "a", "Run the migrations before the tests.")
    write_outcome(tmp_path, "b", "Keep commits small.")
    index = LessonIndex(tmp_path)
    show(index, "a", passes=3)
    show(index, "b", passes=3)
    assert promote_rules(index, tmp_path) == ["Keep commits small."]
    assert read_rules(tmp_path) == [
        "Never edit generated files.",
        "run the MIGRATIONS before the tests",
        "Keep commits small.",
    ]
    assert (tmp_path / "rules.md").read_text().startswith("# Our rules\n\n- Never edit generated files.\n")


def test_the_prompt_block_carries_whole_rules_within_its_budget(tmp_path: Path) -> None:
    assert rules_prompt(tmp_path) == ""
    (tmp_path / "rules.md").write_text("- First rule.\n- " + "x" * 200 + "\n")
    block = rules_prompt(tmp_path, max_chars=100)
    assert "- First rule." in block and "xxx" not in block and len(block) <= 100
    assert "x" * 200 in rules_prompt(tmp_path)


def test_append_to_agent_file_adds_the_heading_once(tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# Agents\n\nBe nice.\n\n## Style\n\n- Use black.\n")
    assert append_to_agent_file(agents, ["Run the migrations first.", "Use black."])
    assert append_to_agent_file(agents, ["Keep commits small.", "run the migrations first"])
    assert not append_to_agent_file(agents, ["Keep commits small."])
    text = agents.read_text()
    assert text.count("## Rules learned by goldenloop") == 1
    assert text.startswith("# Agents\n\nBe nice.\n\n## Style\n\n- Use black.\n")
    assert text.endswith("## Rules learned by goldenloop\n\n- Run the migrations first.\n- Keep commits small.\n")


def test_rules_go_under_the_heading_even_when_a_section_follows_it(tmp_path: Path) -> None:
    claude = tmp_path / "CLAUDE.md"
    claude.write_text("## Rules learned by goldenloop\n\n- Old rule.\n\n## Other\n\ntext\n")
    assert append_to_agent_file(claude, ["New rule."])
    assert claude.read_text() == "## Rules learned by goldenloop\n\n- Old rule.\n- New rule.\n\n## Other\n\ntext\n"


def test_append_to_agent_file_creates_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    assert append_to_agent_file(path, ["Only rule."])
    assert path.read_text() == "## Rules learned by goldenloop\n\n- Only rule.\n"


def test_a_rule_about_one_line_of_one_task_is_never_promoted(tmp_path: Path) -> None:
    lesson = {"id": "L-9", "kind": "outcome", "outcome": "success", "sessionId": "s", "taskId": "T-1",
              "agent": "coder", "title": "t", "createdAt": "2026-11-01T00:00:00Z", "labels": [], "files": [],
              "strategy": "Strip the input.", "principle": "I should follow this rule: Read test_calc.py:9 first."}
    (tmp_path / "reflections.jsonl").write_text(json.dumps(lesson) + "\n")
    index = LessonIndex(tmp_path)
    for n in range(5):
        index.record_use(["L-9"], task_id=f"T-{n + 2}", attempt=1, passed=True)
    assert promote_rules(index, tmp_path, min_passes=3) == []
