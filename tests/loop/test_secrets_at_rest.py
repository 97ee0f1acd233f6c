"""Nothing leaks: a failing test that prints credentials leaves none of them behind.

The repository's test reads credentials from a file outside the repository (so they are
in no file of it) and prints them as it fails, the way a test that logs its settings or
its connection string does. `do-one-task` runs in-process with the scripted model, fails,
reflects and escalates. Then every git object reachable from any ref, every file under
`.openagents/` (the bookkeeping commit's and the fleet's, the run log, history, the
escalation packet, memory) and the console are searched for any 8-character slice of
each secret. The model's script fails any call whose prompt carries a slice, so a leak
into a prompt (the retry's failure digest, the reflection's question) shows as a task
put back instead of escalated.
"""

from __future__ import annotations

import json
import random
import re
import string
import subprocess
from pathlib import Path

import pytest
from projects import CALC, PY, REFLECTION, do_one_task, git, make_project, tasks_on_disk, write_file

from reflection.scripted import scripted_script

_rng = random.Random(7)
ALNUM = string.ascii_letters + string.digits


def draw(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


# Each secret in its vendor's shape, glued from pieces so no file here looks live.
SECRETS = {
    "aws_id": "AK" + "IA" + draw(string.ascii_uppercase + string.digits, 16),
    "aws_secret": draw(ALNUM + "+/", 40),
    "github": "gh" + "p_" + draw(ALNUM, 36),
    "slack": "xo" + "xb-" + draw(string.digits, 11) + "-" + draw(string.digits, 13) + "-" + draw(ALNUM, 24),
    "stripe": "sk" + "_live_" + draw(ALNUM, 24),
    "pem": "MIIEow" + draw(ALNUM + "+/", 58),
    "db_password": "Tr0ub4dor-" + draw(ALNUM, 8) + "!",
    "email": "jane.doe@" + "acme-corp.com",
    "host": "build-01.ci." + "acme-corp.com",
}

# The user's test: it prints what it connects with, then fails with it in its message.
LEAKY_TEST = '''import json

from calc import add

S = json.load(open({creds!r}))


def test_add():
    print("aws_access_key_id=" + S["aws_id"] + " aws_secret_access_key=" + S["aws_secret"])
    print("GITHUB_TOKEN=" + S["github"])
    print("-----BEGIN RSA " + "PRIVATE KEY-----\\n" + S["pem"] + "\\n-----END RSA " + "PRIVATE KEY-----")
    url = "postgresql://app:" + S["db_password"] + "@" + S["host"] + "/app"
    assert add(-1, -1) == -2, ("cannot connect to " + url + " as " + S["email"] + " with " + S["slack"] + " "
                               + S["stripe"] + " " + S["aws_id"] + " " + S["aws_secret"] + " " + S["github"])
'''


def slices(secret: str) -> list[str]:
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


def leaks_in(text: str) -> list[str]:
    return sorted({name for name, secret in SECRETS.items() for piece in slices(secret) if piece in text})


def git_objects(repo: Path) -> dict[str, str]:
    """Every object reachable from any ref, by its line in `git rev-list --all --objects`."""
    listing = git(repo, "rev-list", "--all", "--objects").splitlines()
    return {line: subprocess.run(["git", "cat-file", "-p", line.split()[0]], cwd=repo, capture_output=True,
                                 check=True).stdout.decode(errors="replace") for line in listing}


def openagents_files(repo: Path) -> dict[str, str]:
    folder = repo / ".openagents"
    return {str(p.relative_to(repo)): p.read_bytes().decode(errors="replace") for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def leaky_project(git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    creds = tmp_path / "creds.json"  # outside the repository
    creds.write_text(json.dumps(SECRETS))
    any_slice = "|".join(re.escape(piece) for secret in SECRETS.values() for piece in slices(secret))
    model = scripted_script([
        {"match": any_slice, "error": "auth", "times": None},  # a prompt that carries a secret fails
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
    assert leaks_in(console) == [], console
    files = openagents_files(repo)
    assert {name: leaks_in(text) for name, text in files.items() if leaks_in(text)} == {}
    objects = git_objects(repo)
    assert {line: leaks_in(text) for line, text in objects.items() if leaks_in(text)} == {}
    # The failure is still told, with the secrets' places marked.
    plan = json.loads(files[".openagents/subtasks/T-1.json"])
    assert "cannot connect to postgresql://[REDACTED:" in plan["subtasks"][0]["lastFailureReason"]
