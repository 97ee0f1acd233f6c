"""docs/REFLEXION.md documents every key a reflection line, an outcome record, a failure
context and the task notes are written with, and the injected block's own words: a key
added without its line in the page fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from reflection.outcome import OutcomeReflection
from reflection.prompts import CLOSING, HEADING, LEAD
from reflection.schema import FailureContext, Reflection, Usage
from reflection.task_prompts import NOTES_HEADING
from reflection.task_reflection import TaskReflection

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "REFLEXION.md").read_text()


def _keys(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


@pytest.mark.parametrize("model", [Reflection, OutcomeReflection, FailureContext, TaskReflection, Usage])
def test_every_key_of_each_record_is_documented(model: type[BaseModel]) -> None:
    named = set(re.findall(r"`(\w+)`", PAGE))
    missing = [key for key in _keys(model) if key not in named]
    assert missing == [], f"docs/REFLEXION.md does not name {missing} of {model.__name__}"


def test_the_page_shows_the_injected_blocks_own_words() -> None:
    for words in (HEADING, LEAD, CLOSING, "- **What went wrong**:", "- **What to do differently**:",
                  "- **Action items**:", NOTES_HEADING):
        assert words in PAGE


def test_the_readme_links_the_page() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "(docs/REFLEXION.md)" in readme


def test_the_migration_table_maps_every_key_of_an_attempt_reflection() -> None:
    section = PAGE.split("### Migrating to the Archivist's `AgentMemory`", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert sorted(rows) == sorted(_keys(Reflection))


def test_the_readme_tells_that_a_timeout_is_reflected_on() -> None:
    # tests/checks/test_retry_intelligence.py shows the run doing so: one reflection call
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert "A timeout is reflected on like any failing check" in readme
    assert "Timeouts are retried without a reflection call" not in readme
