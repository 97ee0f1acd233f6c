"""retry.strategy "adaptive": the project's record of which choice solved each failure class."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.loop.retry_choice import RetryChoices


def record_with(tmp_path: Path, classes: object) -> RetryChoices:
    path = tmp_path / "retry-choices.json"
    path.write_text(json.dumps({"classes": classes}))
    return RetryChoices(path)


def test_the_rule_decides_until_the_record_has_tried_it_enough(tmp_path: Path) -> None:
    choices = record_with(tmp_path, {"crash": {"repair": {"tried": 2, "passed": 0}}})
    assert choices.choose("crash") == ("repair", "the rule for a crash")
    assert choices.choose("far_off") == ("resample", "the rule for a far off")


def test_a_rule_that_never_passed_gives_way_to_the_other_choice(tmp_path: Path) -> None:
    # Without this, a fresh start after a crash would never be tried, and the record could
    # never learn that it works better for this project's model.
    choices = record_with(tmp_path, {"crash": {"repair": {"tried": 3, "passed": 0}}})
    choice, why = choices.choose("crash")
    assert choice == "resample"
    assert why == "repair passed none of its 3 tries for a crash in this project, so a fresh start is tried"


def test_once_both_were_tried_the_better_one_wins(tmp_path: Path) -> None:
    choices = record_with(tmp_path, {"crash": {"repair": {"tried": 3, "passed": 0},
                                               "resample": {"tried": 3, "passed": 1}}})
    assert choices.choose("crash")[0] == "resample"
    both_failed = record_with(tmp_path, {"crash": {"repair": {"tried": 3, "passed": 0},
                                                   "resample": {"tried": 3, "passed": 0}}})
    assert both_failed.choose("crash") == ("repair", "the rule for a crash (the record is even)")


def test_a_rule_that_passed_once_keeps_its_place(tmp_path: Path) -> None:
    choices = record_with(tmp_path, {"far_off": {"resample": {"tried": 9, "passed": 1}}})
    assert choices.choose("far_off")[0] == "resample"


def test_a_hand_edited_record_is_read_as_empty_and_its_odd_entries_left_alone(tmp_path: Path) -> None:
    choices = record_with(tmp_path, {"crash": {"repair": "three"}, "far_off": ["x"]})
    assert choices.choose("crash")[0] == "repair"
    assert choices.choose("far_off")[0] == "resample"
    choices.record("near_miss", "repair", passed=True)  # a class the file holds nothing odd for
    assert choices.load()["near_miss"]["repair"] == {"tried": 1, "passed": 1}
    choices.record("crash", "repair", passed=False)  # an odd entry: left as it was, the attempt goes on
    assert choices.load()["crash"] == {"repair": "three"}
