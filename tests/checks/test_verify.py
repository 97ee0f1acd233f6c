"""verify: commands in their own process group, bounded output, verdicts that classify."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import anyio
import pytest

from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import CommandResult, Verdict, run_command, verify
from orchestrator.processes import escaped_pids, kill_escaped, starting_command
from reflection.schema import FailureType

PY = shlex.quote(sys.executable)


async def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """True once pid no longer runs (a zombie nobody reaped has stopped running too)."""
    with anyio.move_on_after(wait_s):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, ProcessLookupError):
                return True
            if state == "Z":
                return True
            await anyio.sleep(0.05)
    return False


def _pid(path: Path) -> int:
    return int(path.read_text().strip())


@pytest.mark.anyio
async def test_a_passing_command_reports_its_output(tmp_path: Path) -> None:
    result = await run_command("echo out; echo err >&2", tmp_path, timeout_s=30)
    assert result.started and not result.timed_out
    assert result.exit_code == 0
    assert result.output == "out\nerr\n"


@pytest.mark.anyio
async def test_command_runs_in_cwd_with_the_given_environment(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "GREETING": "hi"}
    result = await run_command(
        'echo "$GREETING $PYTHONUNBUFFERED $(pwd)"', tmp_path, timeout_s=30, env=env
    )
    assert result.output == f"hi 1 {tmp_path}\n"


@pytest.mark.anyio
async def test_no_commands_pass(tmp_path: Path) -> None:
    verdict = await verify(tmp_path, CheckSettings(timeout_s=5))
    assert verdict.passed and verdict.steps == []
    assert verdict.failure_type is None and verdict.score == 1.0


@pytest.mark.anyio
async def test_passing_pytest_run_counts_tests(tmp_path: Path) -> None:
    (tmp_path / "test_ok.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    verdict = await verify(
        tmp_path,
        CheckSettings(
            typecheck=[f"{PY} -c 'import sys; sys.exit(0)'"],
            tests=[f"{PY} -m pytest -q -p no:cacheprovider test_ok.py"],
            timeout_s=60,
        ),
    )
    assert verdict.passed, verdict.steps[-1].output
    assert [s.kind for s in verdict.steps] == ["typecheck", "test"]
    assert verdict.tests_passed == 2
    assert verdict.summary() == "passed: 2 tests"


@pytest.mark.anyio
async def test_failing_pytest_run_is_a_test_failure_with_counts(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        textwrap.dedent(
            """
            def test_good():
                assert 1 + 1 == 2

            def test_bad():
                assert [1, 2] == [1, 3]
            """
        )
    )
    verdict = await verify(
        tmp_path,
        CheckSettings(tests=[f"{PY} -m pytest -q -p no:cacheprovider test_sample.py"], timeout_s=60))
    assert not verdict.passed
    assert verdict.failure_type is FailureType.TEST_FAILURE
    assert (verdict.tests_failed, verdict.tests_passed) == (1, 1)
    assert verdict.score == 0.5
    assert verdict.digest is not None
    assert any("test_bad" in name for name in verdict.digest.failing_tests)
    summary = verdict.summary()
    assert summary.startswith("test_failure: 1 failed, 1 passed — ") and "test_bad" in summary


@pytest.mark.anyio
async def test_typecheck_failure_stops_before_the_tests(tmp_path: Path) -> None:
    verdict = await verify(
        tmp_path,
        CheckSettings(
            typecheck=[f"{PY} -c 'print(\"x.py:3: error: bad type\"); raise SystemExit(1)'"],
            tests=["touch tests-ran.marker"],
            timeout_s=30,
        ),
    )
    assert verdict.failure_type is FailureType.TYPECHECK_FAILURE
    assert not (tmp_path / "tests-ran.marker").exists()
    assert [s.kind for s in verdict.steps] == ["typecheck"]
    assert verdict.score == 0.0
    assert verdict.summary().startswith("typecheck_failure")


@pytest.mark.anyio
async def test_a_missing_program_is_a_runtime_error(tmp_path: Path) -> None:
    verdict = await verify(
        tmp_path,
        CheckSettings(typecheck=["no-such-typechecker-xyz --strict"], timeout_s=30))
    assert verdict.failure_type is FailureType.RUNTIME_ERROR
    step = verdict.steps[0]
    assert step.started and step.exit_code == 127
    assert "not found" in step.output


@pytest.mark.anyio
async def test_a_test_command_that_crashes_is_a_runtime_error(tmp_path: Path) -> None:
    verdict = await verify(
        tmp_path,
        CheckSettings(tests=[f"{PY} -c 'import no_such_module_xyz'"], timeout_s=30))
    assert verdict.failure_type is FailureType.RUNTIME_ERROR
    assert "ModuleNotFoundError" in verdict.steps[0].output


@pytest.mark.anyio
async def test_a_command_that_cannot_start_is_reported_not_raised(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    result = await run_command("true", missing, timeout_s=5)
    assert not result.started and result.exit_code is None
    assert str(missing) in result.output
    verdict = await verify(missing, CheckSettings(tests=["true"], timeout_s=5))
    assert verdict.failure_type is FailureType.RUNTIME_ERROR


@pytest.mark.anyio
async def test_timeout_kills_the_shell_and_its_children(tmp_path: Path) -> None:
    command = "echo $$ > shell.pid; sleep 300 & echo $! > child.pid; echo started; sleep 300"
    verdict = await verify(tmp_path, CheckSettings(tests=[command], timeout_s=1))

    assert verdict.failure_type is FailureType.TIMEOUT
    step = verdict.steps[0]
    assert step.timed_out and step.exit_code is None
    assert "started" in step.output
    assert verdict.digest is not None
    assert verdict.digest.text.startswith(f"`{command}` timed out after 1 s")
    assert await _gone(_pid(tmp_path / "shell.pid"))
    assert await _gone(_pid(tmp_path / "child.pid"))


@pytest.mark.anyio
async def test_background_children_do_not_outlive_a_finished_command(tmp_path: Path) -> None:
    result = await run_command(
        "sleep 300 & echo $! > child.pid; echo done", tmp_path, timeout_s=30
    )
    assert result.exit_code == 0 and not result.timed_out
    assert result.output == "done\n"
    assert await _gone(_pid(tmp_path / "child.pid"))


@pytest.mark.anyio
async def test_huge_output_keeps_head_and_tail_within_the_cap(tmp_path: Path) -> None:
    body = 20 * 1024 * 1024
    script = f"import sys; w = sys.stdout.write; w('FIRST\\n'); w('x' * {body}); w('\\nLAST\\n')"
    result = await run_command(f"{PY} -c {shlex.quote(script)}", tmp_path, timeout_s=60)

    # The line the cut went through goes whole: a piece of it could be half a secret.
    assert result.exit_code == 0
    assert result.output == f"FIRST\n[... {body + 1} bytes omitted ...]\nLAST\n"


@pytest.mark.anyio
async def test_small_cap_is_respected(tmp_path: Path) -> None:
    result = await run_command(
        "seq 1 100000", tmp_path, timeout_s=30, output_cap_bytes=800
    )
    lines = result.output.splitlines()
    assert lines[:3] == ["1", "2", "3"]
    assert lines[-1] == "100000"
    assert "bytes omitted" in result.output
    assert len(result.output) < 900


NOISY_CHECK = """\
import sys, traceback

def noise(label):
    for i in range(6000):  # ~500 KB
        print(f"{label} {i}: record {i} of the nightly import processed, nothing to report")

noise("loading")
try:
    total = 41
    assert total == 42, "the ledger total must be 42, got 41"
except AssertionError:
    traceback.print_exc(file=sys.stdout)
noise("cleanup")
sys.exit(1)
"""


@pytest.mark.anyio
async def test_a_failure_in_the_middle_of_a_megabyte_of_output_reaches_the_digest(tmp_path: Path) -> None:
    (tmp_path / "check.py").write_text(NOISY_CHECK)
    checks = CheckSettings(tests=(f"{PY} check.py",), timeout_s=60)

    verdict = await verify(tmp_path, checks)

    assert verdict.digest is not None
    assert "the ledger total must be 42, got 41" in verdict.digest.text
    assert "AssertionError" in (verdict.digest.first_error or "")
    output = verdict.steps[0].output
    assert output.startswith("loading 0: ")
    assert output.endswith("cleanup 5999: record 5999 of the nightly import processed, nothing to report\n")
    assert len(output.encode()) <= 256 * 1024 + 200  # the failure's lines came out of the tail's share


@pytest.mark.anyio
async def test_failure_lines_everywhere_keep_the_first_ones_within_the_cap(tmp_path: Path) -> None:
    script = "for i in range(400000): print(f'FAILED test_{i}.py::test_x - AssertionError: {i}')"  # ~19 MB
    cap = 64 * 1024
    result = await run_command(f"{PY} -c {shlex.quote(script)}", tmp_path, timeout_s=60, output_cap_bytes=cap)

    assert len(result.output) <= cap + 200
    assert result.output.count(" bytes omitted ...]") == 1
    start, _, end = result.output.partition(" bytes omitted ...]")
    # The head runs on into the failure lines right after it: the first ones, unbroken.
    first = start.splitlines()[:-2]  # the last is clipped, then the marker's own line
    assert [line.rsplit(" ", 1)[1] for line in first] == [str(i) for i in range(len(first))]
    assert len(start) > cap // 8 + cap // 16
    assert end.endswith("FAILED test_399999.py::test_x - AssertionError: 399999\n")


@pytest.mark.anyio
async def test_output_under_the_cap_is_kept_whole_even_across_characters(tmp_path: Path) -> None:
    script = "print('a' + '\\u00e9' * 20000)"  # 40 KB: the head/tail seam splits a character
    result = await run_command(f"{PY} -c {shlex.quote(script)}", tmp_path, timeout_s=30)
    assert result.output == "a" + "\u00e9" * 20000 + "\n"


@pytest.mark.anyio
async def test_cancellation_kills_the_group_and_propagates(tmp_path: Path) -> None:
    command = "echo $$ > shell.pid; sleep 300 & echo $! > child.pid; sleep 300"
    finished: CommandResult | None = None
    with anyio.move_on_after(1) as scope:
        finished = await run_command(command, tmp_path, timeout_s=600)
    assert scope.cancelled_caught and finished is None
    assert await _gone(_pid(tmp_path / "shell.pid"))
    assert await _gone(_pid(tmp_path / "child.pid"))


def test_score_and_summary_of_a_partial_failure() -> None:
    step = CommandResult(command="pytest", kind="test", exit_code=1, output="")
    verdict = Verdict(
        passed=False,
        failure_type=FailureType.TEST_FAILURE,
        steps=[step],
        tests_passed=3,
        tests_failed=1,
    )
    assert verdict.score == 0.75
    assert verdict.summary() == "test_failure: 1 failed, 3 passed — `pytest` exited with 1"


def test_a_command_forked_but_not_yet_running_its_program_is_never_taken_for_an_escapee() -> None:
    """Between its fork (and `setsid`) and its exec, a command's process still runs this
    program, with this program's environment: the mark of a command being started is not
    there yet. Another command ending in that moment must leave it alone (a parallel
    task's check once died with -9 on a busy machine)."""
    others = escaped_pids()
    with starting_command():
        child = os.fork()
        if child == 0:  # a command's process before its exec
            os.setsid()
            time.sleep(60)
            os._exit(0)
        try:
            while os.getsid(child) != child:  # its own session now, as a command's is
                time.sleep(0.01)
            assert kill_escaped(others) == []
            assert os.waitpid(child, os.WNOHANG) == (0, 0)  # still running
        finally:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)


def test_a_command_being_started_is_never_killed_as_an_escapee_by_another_command_ending() -> None:
    """Two commands of one process (parallel tasks): when one ends, it kills the children
    that escaped it; the other, started in the same instant, is a child in a session of its
    own too and must survive (it once died with exit code -9, one run in six on a busy machine)."""
    others = escaped_pids()  # this process's other children (a test database, say): not ours to touch
    with starting_command() as marked:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, **marked},
                                 start_new_session=True)
        try:
            assert kill_escaped(others) == []  # what another command's end does meanwhile
            assert child.poll() is None
        finally:
            started = child.pid
    assert kill_escaped(others) == [started]  # never announced as a live session: an escapee like any other
    assert not Path(f"/proc/{started}").exists()  # killed and reaped
    child.returncode = -signal.SIGKILL  # reaped by kill_escaped, not by Popen


def test_commands_ending_at_once_on_three_event_loops_each_report_their_own_exit_code(tmp_path: Path) -> None:
    """Parallel workers run their checks on event loops of their own. A command as quick as
    `exit 3` may end before its start has returned: its process then has no memory left to
    read, and another command's end must not take it for an escapee, kill and reap it (its
    exit code then read 255, about one command in thirty: a passing check failed)."""
    codes: dict[int, list[int | None]] = {n: [] for n in (3, 4, 5)}

    def worker(code: int) -> None:
        async def commands() -> None:
            for _ in range(100):
                codes[code].append((await run_command(f"exit {code}", tmp_path, timeout_s=60)).exit_code)

        anyio.run(commands)

    threads = [threading.Thread(target=worker, args=(code,)) for code in codes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {code: set(seen) for code, seen in codes.items()} == {3: {3}, 4: {4}, 5: {5}}


SCANS_CHECK = """\
import os, sys
from pathlib import Path
import anyio
from orchestrator import processes
from orchestrator.checks.verify import run_command

scans = []
scan = processes._processes
processes._processes = lambda: scans.append(1) or scan()
processes.become_subreaper()
folder = Path(sys.argv[1])

async def main():
    plain = await run_command("echo done", folder, timeout_s=30)
    print(plain.exit_code, len(scans))
    escape = "setsid sh -c 'sleep 300 & echo $! > child.pid; wait' & while [ ! -s child.pid ]; do sleep 0.01; done"
    escaped = await run_command(escape, folder, timeout_s=30)
    print(escaped.exit_code, len(scans))

anyio.run(main)
"""


@pytest.mark.anyio
async def test_a_command_that_leaves_nothing_costs_no_scan_of_every_process(tmp_path: Path) -> None:
    """A child subreaper with no child has no descendant left anywhere: a command's end
    asks the kernel that once instead of reading /proc for every process on the machine.
    A command whose child escaped into a session of its own is still searched and killed."""
    (tmp_path / "check.py").write_text(SCANS_CHECK)
    with anyio.fail_after(60):
        done = await anyio.run_process([sys.executable, str(tmp_path / "check.py"), str(tmp_path)])
    plain, escaped = (line.split() for line in done.stdout.decode().splitlines())
    assert plain == ["0", "0"]  # started and ended with no scan at all
    assert escaped[0] == "0" and int(escaped[1]) > 0  # the escapee made this process a parent: scanned
    assert await _gone(_pid(tmp_path / "child.pid"))
