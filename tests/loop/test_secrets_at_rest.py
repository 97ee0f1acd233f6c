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
import stat
from pathlib import Path

import pytest
from leaks import PRINT_SECRETS, SECRETS, files_under, git_objects, leaking, trap
from projects import (
    CALC,
    PY,
    REFLECTION,
    do_one_task,
    git,
    make_project,
    run_events,
    tasks_on_disk,
    write_file,
)

from orchestrator.loop.attempt_history import read_attempts, write_attempt
from reflection.pattern.evaluation import ReflectionEvaluation
from reflection.pattern.history import ReflectionVersion
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


ENV_KEY = "Zk4" + "Qp8Lw2Vn7Rt5Xb3Jm9Hc6"  # a vendor key without a prefix: only its value tells it
HARDCODED = 'ACME_API_KEY = "{key}"\n'
FROM_ENV = 'import os\n\nACME_API_KEY = os.environ.get("ACME_API_KEY", "")\n'


def test_a_key_copied_from_env_into_code_is_rejected_and_never_committed(
    git_repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fixed = CALC.replace("a - b", "a + b")
    model = scripted_script([
        {"match": ENV_KEY, "error": "auth", "times": None},  # the key never reaches a model
        {"match": "ACME_API_KEY into settings.py", "reply": write_file("calc.py", fixed)
         + write_file("settings.py", FROM_ENV)},  # the retry, told why
        {"reply": write_file("calc.py", fixed) + write_file("settings.py", HARDCODED.format(key=ENV_KEY))},
    ], dir=tmp_path)  # fmt: skip
    repo = make_project(git_repo, [], config={"defaultModel": model, "reflexion": {"maxRetries": 1, "useLLM": False}})
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n.env\n")
    (repo / ".env").write_text(f"ACME_API_KEY={ENV_KEY}\n")
    git(repo, "commit", "-qam", "ignore .env")

    assert do_one_task(repo) == 0
    console = "".join(capfd.readouterr())

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert git(repo, "show", "HEAD:settings.py") == FROM_ENV
    (rejected,) = [e for e in run_events(repo) if e.get("event") == "secret_written"]
    assert rejected["attempt"] == 1
    assert "the change writes the value of ACME_API_KEY into settings.py" in json.dumps(run_events(repo))
    assert ENV_KEY not in console
    assert [name for name, text in files_under(repo / ".openagents").items() if ENV_KEY in text] == []
    assert [line for line, text in git_objects(repo).items() if ENV_KEY in text] == []


# Eight shapes of a secret in prose, as a test or an agent prints them; each value is what
# must be found nowhere at rest.
PROSE_SECRETS = {
    "The database password is {v} for now": "Tr0ub4dor&" + "3xK9q",
    "log in with password {v} then retry": "hunter2" + "hunter2X",
    "The API key for staging is {v}.": "9f8e7d6c5b4a" + "39281706f5e4d3c2b1a0",
    "the passphrase was '{v}'": "correct horse " + "battery staple",
    "{v}": "aB3dE5gH7jK9mN1p" + "Q3rS5tU7vW9xY1zA2bC4dE6f",  # a bare AWS secret key
    "deploy token: {v}": "8Xk2LmQ9" + "vR4tY7wZ1pN5",
    "key material:\n{v}": "MIIEpAIBAAKCAQEAx7Lm2QpR4tV6yB8nD0fH3jK5" + "mN7qS9uW1zA3cE5gI7kM9oQ2sU4wY6a",
    "E   assert '[default]\\naws_secret_access_key = {v}\\n' == ''": "Kd8Rf3Ws9" + "Lq2Mx7Vb4Nc6Zp1Ty5Hg0Ja3Ue8",
}
PROSE_TEST = """from calc import add

TOLD = {told!r}


def test_add():
    print(TOLD)
    assert add(-1, -1) == -2, TOLD
"""


def test_secrets_told_in_prose_by_a_failing_attempt_are_in_no_file_at_rest(
    git_repo: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    told = "\n".join(shape.format(v=value) for shape, value in PROSE_SECRETS.items())
    model = scripted_script([
        {"reply": write_file("calc.py", CALC.replace("a - b", "abs(a + b)")) + write_file("NOTES.md", told + "\n"),
         "times": None},
    ], dir=tmp_path)  # fmt: skip
    # The test is the repository's, committed: its secrets are in git already, and not
    # what this run may add. Its copy in the history's exact patch is elsewhere.
    repo = make_project(git_repo, [], config={"defaultModel": model, "reflexion": {"maxRetries": 1, "useLLM": False}},
                        files={"test_prose.py": PROSE_TEST.format(told=told)})
    (repo / ".openagents" / "project.json").write_text((repo / ".openagents" / "project.json").read_text()
                                                       .replace("test_calc.py", "test_calc.py test_prose.py"))
    git(repo, "commit", "-qam", "both tests")
    before = set(git_objects(repo))

    assert do_one_task(repo) == 1
    console = "".join(capfd.readouterr())

    values = list(PROSE_SECRETS.values())
    assert [v for v in values if v in console] == []
    at_rest = {name: [v for v in values if v in text] for name, text in files_under(repo / ".openagents").items()}
    assert {name: found for name, found in at_rest.items() if found} == {}
    added = {line: text for line, text in git_objects(repo).items() if line not in before}
    assert [line for line, text in added.items() if any(v in text for v in values)] == []
    # the attempts were rejected for writing what the run had seen as secrets
    assert [e["outcome"] for e in run_events(repo) if e.get("event") == "verdict"] == ["integrity", "integrity"]


def test_a_masked_patch_keeps_its_exact_bytes_outside_the_repository(git_repo: Path) -> None:
    secret_line = "+PASSWORD = 'Tr0ub4dor&3xK9q'\n"
    patch = "--- a/settings.py\n+++ b/settings.py\n@@ -0,0 +1 @@\n" + secret_line
    version = ReflectionVersion(iteration=1, output="", evaluation=ReflectionEvaluation(0.0, {}, False))
    write_attempt(git_repo, "T-1", "T-1.1", version, patch)

    (stored,) = read_attempts(git_repo, "T-1")
    assert "Tr0ub4dor" not in stored.patch_path.read_text()  # in .openagents/: masked
    assert stored.patch() == patch and stored.exact_path is not None  # for `history --patch`: exact
    assert git_repo not in stored.exact_path.parents and stat.S_IMODE(stored.exact_path.stat().st_mode) == 0o600
