"""Nothing leaks from a fleet: a check that prints credentials leaves none of them in the
remote a worker pushes to, in the outcome rows of the database, or on the worker's console.

The check reads the credentials from a file outside every repository and prints them as it
fails; a worker runs the task in-process with the scripted model until it is escalated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fleetkit import bare_path, make_remote, query, reply, task, write_script
from leaks import PRINT_SECRETS, SECRETS, git_objects, leaking, trap

from orchestrator.cli import main

pytestmark = pytest.mark.postgres

FAILING_CHECK = PRINT_SECRETS + "sys.exit(WHY)\n"


def test_a_check_that_prints_credentials_leaves_none_in_the_remote_the_outcomes_or_the_console(
    tmp_path: Path, pg_url: str, capfd: pytest.CaptureFixture[str]
) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps(SECRETS))
    model = write_script(tmp_path / "script.json", [trap(), reply("T-1", "fix.py", "VALUE = 1\n")])
    remote = make_remote(tmp_path, "leaky", [task("T-1", "Make the check pass")], model,
                         check_extra=FAILING_CHECK.format(creds=str(creds)),
                         config={"reflexion": {"maxRetries": 0, "useLLM": False}})

    assert main(["enqueue", "--queue", pg_url, "--workdir", str(tmp_path / "wd"), remote]) == 0
    main(["worker", "--queue", pg_url, "--workdir", str(tmp_path / "machine"), "--name", "w1", "--until-empty"])
    console = "".join(capfd.readouterr())

    rows = query(pg_url, "SELECT status, row_to_json(o)::text FROM goldenloop_outcomes o")
    assert [status for status, _ in rows] == ["blocked"]  # escalated: no prompt carried a secret
    assert leaking({"outcomes": rows[0][1]}) == {}
    assert leaking(git_objects(bare_path(remote))) == {}
    assert leaking({"console": console}) == {}, console
