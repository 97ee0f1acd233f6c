"""Nothing leaks: a failing test that prints credentials leaves none of them behind.

The repository's test reads credentials from a file outside the repository (so they are
in no file of it) and prints them as it fails, the way a test that logs its settings or
its connection string does. `do-one-task` runs in-process with the scripted model, fails,
reflects and escalates. Then every git object reachable from any ref, every file under
`.openagents/` (the bookkeeping commit's, the run log, history, the escalation packet,
memory) and the console are searched for any 8-character slice of each secret. The
model's script fails any call whose prompt carries a slice, so a leak into a prompt (the
retry's failure digest, the reflection's question) shows as a task put back instead of
escalated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from leaks import PRINT_SECRETS, SECRETS, files_under, git_objects, leaking, trap
from projects import CALC, PY, REFLECTION, do_one_task, git, make_project, tasks_on_disk, write_file

from reflection.scripted import scripted_script

NOTES_FILE = ".openagents/memory/task-reflections.json"
NOTES = json.dumps({"refinedDescription": "Make add() in calc.py return a + b.",
                    "observations": ["The test prints its connection settings when it fails."]})
LEAKY_TEST = PRINT_SECRETS + '''
from calc import add


def test_add():
    assert add(-1, -1) == -2, WHY
'''


@pytest.fixture
def leaky_project(git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    creds = tmp_path / "creds.json"  # outside the repository
    creds.write_text(json.dumps(SECRETS))
    model = scripted_script([
        trap(),
        {"match": "Failure digest", "reply": REFLECTION, "times": None},
        {"reply": write_file("calc.py", CALC.replace("a - b", "abs(a + b)"))},  # wrong twice
        {"reply": write_file("calc.py", CALC.replace("a - b", "a * b")), "times": None},
    ], dir=tmp_path)  # fmt: skip
    return make_project(git_repo, [], files={"test_calc.py": LEAKY_TEST.format(creds=str(creds))}, config={
        "defaultModel": model,
        "testCommands": [f"{PY} -m pytest -q -p no:cacheprovider test_calc.py"],
        "reflexion": {"maxRetries": 1, "useLLM": True},
    })  # fmt: skip


def test_a_failing_test_that_prints_credentials_leaves_none_in_git_files_or_console(
    leaky_project: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    repo = leaky_project

    code = do_one_task(repo)
    console = "".join(capfd.readouterr())

    assert code == 1
    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"  # escalated: no prompt carried a secret
    assert "model error" not in console
    assert (repo / ".openagents" / "escalations" / "T-1.md").exists()
    assert git(repo, "log", "--format=%s", "-1", "--all") != "project under test"  # bookkeeping was committed
    assert leaking({"console": console}) == {}, console
    files = files_under(repo / ".openagents")
    assert leaking(files) == {}
    assert leaking(git_objects(repo)) == {}
    # The failure is still told, with the secrets' places marked.
    plan = json.loads(files["subtasks/T-1.json"])
    assert "cannot connect to postgresql://[REDACTED:" in plan["subtasks"][0]["lastFailureReason"]


def test_a_task_that_closes_after_a_leaky_failure_commits_no_secret_in_its_notes_or_lessons(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The task notes are committed now, and the outcome lesson is written from the task's
    # story: both come after a failure whose output carried every secret.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps(SECRETS))
    model = scripted_script([
        trap(),
        {"match": "Failure digest", "reply": REFLECTION, "times": None},
        {"match": "refinedDescription", "reply": NOTES},  # the task notes' question, only once trap-free
        {"reply": write_file("calc.py", CALC.replace("a - b", "abs(a + b)"))},
        {"reply": write_file("calc.py", CALC.replace("a - b", "a + b")), "times": None},
    ], dir=tmp_path)  # fmt: skip
    repo = make_project(git_repo, [], files={"test_calc.py": LEAKY_TEST.format(creds=str(creds))}, config={
        "defaultModel": model,
        "testCommands": [f"{PY} -m pytest -q -p no:cacheprovider test_calc.py"],
        "reflexion": {"maxRetries": 1, "useLLM": True},
        "memory": {"taskReflection": True},
    })  # fmt: skip

    assert do_one_task(repo) == 0
    console = "".join(capfd.readouterr())

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert git(repo, "ls-files", NOTES_FILE).strip() == NOTES_FILE  # the notes were written, and committed
    assert leaking({"console": console}) == {}, console
    assert leaking(files_under(repo / ".openagents")) == {}
    assert leaking(git_objects(repo)) == {}
