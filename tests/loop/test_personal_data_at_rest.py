"""Personal data a model writes into its reflection reaches no file, lesson or prompt.

The scripted model's reflection on a failed attempt says who it confirmed the fix with,
quotes a customer's card number, IBAN and National Insurance number, names a host of the
company's own domain (project.json's `redaction.ownDomains`) and an employee id of the
project's own form (`redaction.extraPatterns`); its task notes say the same. Two tasks
run, so the first task's lesson is offered to the second's first prompt. The model's
script fails any call whose prompt carries one of the values, and every file under
`.openagents/` (reflections.jsonl, the markdown pages, lessons.sqlite, the task notes)
and every git object is searched for them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from leaks import files_under, git_objects
from projects import CALC, do_one_task, make_project, task, tasks_on_disk, write_file

from reflection.scripted import scripted_script

PERSONAL = {
    "name": "Jane Doe",
    "card": "4539899720743225",
    "iban": "DE62370400440532013001",
    "national_id": "AB 12 34 56 C",
    "host": "vault.acme-corp.com",
    "employee_id": "EMP-" + "481516",
}
TOLD = (f"Confirmed with {PERSONAL['name']} that add() must keep the sign; the failing order used card "
        f"{PERSONAL['card']}, IBAN {PERSONAL['iban']}, NI number {PERSONAL['national_id']}, logged on "
        f"{PERSONAL['host']} by {PERSONAL['employee_id']}. Thanks Ada Lovelace for the pointer.")
REFLECTION = json.dumps({"category": "edge_case", "analysis": f"add used abs(). {TOLD}",
                         "suggestion": f"Return a + b without abs. {TOLD}",
                         "actionItems": [f"Remove abs() from add in calc.py ({TOLD})"], "confidence": 0.8})
NOTES = json.dumps({"refinedDescription": f"Make add() return a + b. {TOLD}", "observations": [TOLD]})
FIXED = CALC.replace("a - b", "a + b")
DOCUMENTED = FIXED.replace("def add(a, b):\n", 'def add(a, b):\n    """The sum of a and b."""\n')


def holding(texts: dict[str, str]) -> dict[str, list[str]]:
    """Each text that holds one of the personal values, and which."""
    return {name: found for name, text in texts.items()
            if (found := [kind for kind, value in PERSONAL.items() if value in text])}


@pytest.fixture
def project(git_repo: Path, tmp_path: Path) -> Path:
    any_value = "|".join(re.escape(value) for value in PERSONAL.values())
    model = scripted_script([
        {"match": any_value, "error": "auth", "times": None},  # no prompt may carry one
        {"match": "Failure digest", "reply": REFLECTION, "times": None},
        {"match": "refinedDescription", "reply": NOTES, "times": None},
        {"match": "Document add", "reply": write_file("calc.py", DOCUMENTED), "times": None},
        {"reply": write_file("calc.py", CALC.replace("a - b", "abs(a + b)"))},  # the first attempt fails
        {"reply": write_file("calc.py", FIXED), "times": None},
    ], dir=tmp_path)  # fmt: skip
    tasks = [task("T-1", "Fix add in calc.py"), task("T-2", "Document add in calc.py", type="chore")]
    return make_project(git_repo, [], tasks=tasks,
                        config={"defaultModel": model, "reflexion": {"maxRetries": 2, "useLLM": True},
                                "memory": {"taskReflection": True, "successProcedures": "always"},
                                "redaction": {"ownDomains": ["acme-corp.com"],
                                              "extraPatterns": {"employee_id": r"EMP-\d{6}"},
                                              "keepNames": ["Ada Lovelace"]}})


def test_a_reflections_personal_data_reaches_no_record_page_lesson_note_or_prompt(
    project: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert do_one_task(project) == 0
    assert do_one_task(project) == 0
    console = "".join(capfd.readouterr())

    assert [tasks_on_disk(project)[t]["status"] for t in ("T-1", "T-2")] == ["closed", "closed"]  # no prompt refused
    assert "model error" not in console
    files = files_under(project / ".openagents")
    assert any(name.endswith("reflections.jsonl") for name in files) and "lessons.sqlite" in " ".join(files)
    assert holding(files) == {}
    assert holding(git_objects(project)) == {}
    assert holding({"console": console}) == {}
    # What stood there is still told by kind, and the name the project keeps stands.
    memory = "\n".join(text for name, text in files.items() if name.endswith("reflections.jsonl"))
    for kind in ("name", "card", "iban", "national_id", "internal_host", "employee_id"):
        assert f"[REDACTED:{kind}]" in memory, kind
    assert "Thanks Ada Lovelace" in memory
