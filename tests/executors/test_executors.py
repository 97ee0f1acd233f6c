"""The builtin executor (with a scripted stand-in for the model) and the command executor."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.executors import (
    BuiltinExecutor,
    CommandExecutor,
    ExecutionRequest,
    ExecutionResult,
    Executor,
)
from orchestrator.executors.format_choice import FormatChooser, FormatHistory, format_for_model
from reflection.llm import ChatReply, ModelError

CALC = "def add(a, b):\n    return a - b\n"
FIX = "src/calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


class FakeModel:
    """Answers `complete` from a script and remembers what it was sent."""

    name = "fake/model"

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, str]]] = []
        self.temperatures: list[float | None] = []

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        timeout: float | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        self.calls.append(messages)
        self.temperatures.append(temperature)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return ChatReply(
            text=reply, model=self.name, input_tokens=120, output_tokens=30, cost_usd=None, latency_s=0.1
        )

    @property
    def user_text(self) -> str:
        return self.calls[-1][-1]["content"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def commit_files(repo: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")


def request(repo: Path, prompt: str = "Fix add() in src/calc.py", **extra: object) -> ExecutionRequest:
    return ExecutionRequest(repo_dir=repo, prompt=prompt, attempt=1, **extra)


# --------------------------------------------------------------------------- builtin


@pytest.mark.anyio
async def test_builtin_applies_the_models_edits(git_repo: Path) -> None:
    commit_files(git_repo, {"src/calc.py": CALC})
    model = FakeModel("The sign is wrong.\n\n```python\n" + FIX + "```\n")
    executor = BuiltinExecutor(model)

    result = await executor.execute(request(git_repo))

    assert isinstance(executor, Executor)
    assert result.ok and result.error is None
    assert result.touched == ["src/calc.py"]
    assert (git_repo / "src/calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert result.reply is not None and "<<<<<<< SEARCH" in result.reply
    assert result.usage == {
        "inputTokens": 120, "outputTokens": 30, "costUsd": None, "model": "fake/model", "latencyS": 0.1,
        "finishReason": None,
    }
    assert (result.format_asked, result.format_received) == ("whole", "search-replace")
    system, user = model.calls[0]
    assert system["role"] == "system" and "complete new content" in system["content"]
    assert "Fix add() in src/calc.py" in user["content"]
    assert "## src/calc.py\n```\n" + CALC + "```" in user["content"]
    assert user["content"].endswith("Reply with the complete new code of src/calc.py (the whole file, or "
                                     "the complete functions you change) in one ```python code block.")


@pytest.mark.anyio
async def test_builtin_context_prefers_hints_and_mentions_and_respects_budget(git_repo: Path) -> None:
    commit_files(
        git_repo,
        {
            "src/calc.py": CALC,
            "src/hinted.py": "HINTED = True\n",
            "docs/notes.md": "notes mentioned in the prompt\n" + "n" * 400 + "\n",
            "big/data.py": "BIG = '" + "x" * 5000 + "'\n",
            "small.txt": "tiny\n",
            "uv.lock": "lock content\n",
            "image.bin": b"\x00\x01\x02binary",
            ".openagents/tasks.jsonl": "{\"id\": \"t1\"}\n",
        },
    )
    model = FakeModel(FIX)
    executor = BuiltinExecutor(model, max_context_bytes=1200)

    prompt = "Fix add() and see docs/notes.md."
    await executor.execute(request(git_repo, prompt, hint_paths=["src/hinted.py"]))

    user = model.user_text
    assert "HINTED = True" in user
    assert "notes mentioned in the prompt" in user
    assert "def add(a, b):" in user  # named in the prompt only by its file name
    assert "tiny" in user
    assert "x" * 5000 not in user
    assert "Files not shown (over the context budget): big/data.py" in user
    assert "lock content" not in user and "binary" not in user and '"id": "t1"' not in user
    assert user.index("HINTED = True") < user.index("notes mentioned") < user.index("tiny")


@pytest.mark.anyio
async def test_builtin_context_finds_files_named_in_a_retry_diff(git_repo: Path) -> None:
    # Smallest-first alone would pick b.txt; the diff names src/calc.py, which goes first.
    calc = "# " + "c" * 120 + "\n" + CALC
    commit_files(git_repo, {"src/calc.py": calc, "b.txt": "b" * 60 + "\n"})
    model = FakeModel(FIX)
    prompt = "Last attempt:\n--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1 +1 @@\n"

    await BuiltinExecutor(model, max_context_bytes=210).execute(request(git_repo, prompt))

    assert calc in model.user_text
    assert "Files not shown (over the context budget): b.txt\n" in model.user_text


@pytest.mark.anyio
async def test_builtin_redacts_secrets_before_the_model_sees_them(git_repo: Path) -> None:
    commit_files(git_repo, {"src/calc.py": CALC, "settings.py": f"AWS_ACCESS_KEY_ID = '{AWS_KEY}'\n"})
    model = FakeModel(FIX)

    await BuiltinExecutor(model).execute(request(git_repo, f"Fix add(); the key {AWS_KEY} is in settings.py"))

    sent = "\n".join(message["content"] for message in model.calls[0])
    assert AWS_KEY not in sent
    assert "[REDACTED" in sent
    assert "AWS_ACCESS_KEY_ID = " in sent  # the rest of the file is still there


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("I would change the minus to a plus.", "the reply holds no code to apply"),
        (FIX.replace("src/calc.py", "lib/calc.py").replace("a - b", "a - c"), "edit 1 for src/calc.py: SEARCH text not found"),
        (FIX.replace("src/calc.py", "calc2.py").replace("a - b", "a - c"),
         "edit 1: calc2.py does not exist; the files are: README.md, src/calc.py"),
    ],
)
async def test_builtin_bad_reply_is_a_failed_result_and_changes_nothing(
    git_repo: Path, reply: str, error: str
) -> None:
    commit_files(git_repo, {"src/calc.py": CALC})

    result = await BuiltinExecutor(FakeModel(reply)).execute(request(git_repo))

    assert not result.ok
    assert result.error is not None and error in result.error
    assert result.touched == []
    assert result.reply == reply
    assert result.repair is not None and "The repository's files are: README.md, src/calc.py" in result.repair
    assert git(git_repo, "status", "--porcelain") == ""


@pytest.mark.anyio
async def test_builtin_lets_model_errors_through(git_repo: Path) -> None:
    model = FakeModel(ModelError("invalid api key", kind="auth"))
    with pytest.raises(ModelError, match="invalid api key"):
        await BuiltinExecutor(model).execute(request(git_repo))


# --------------------------------------------------------------------------- command

AGENT = """\
import pathlib, sys
prompt_file, repo = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
print("agent read", prompt_file)
(repo / "src" / "calc.py").write_text(prompt_file.read_text())
"""


def python_template(script: Path, args: str) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {args}"


@pytest.mark.anyio
async def test_command_runs_the_agent_in_the_repo(git_repo: Path, tmp_path: Path) -> None:
    commit_files(git_repo, {"src/calc.py": CALC})
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    executor = CommandExecutor(python_template(script, "{prompt_file} {repo}"), timeout_s=30)

    result = await executor.execute(request(git_repo, "make add() add; it's in src/calc.py"))

    assert isinstance(executor, Executor)
    assert result.ok and result.error is None
    assert (git_repo / "src/calc.py").read_text() == "make add() add; it's in src/calc.py"
    assert git(git_repo, "status", "--porcelain") == " M src/calc.py\n"  # no prompt file left in the repo
    assert result.reply is not None
    prompt_file = Path(result.reply.split("agent read ", 1)[1].split("\n", 1)[0])
    assert not prompt_file.exists()  # removed after the run
    assert not prompt_file.is_relative_to(git_repo)


@pytest.mark.anyio
async def test_command_redacts_the_prompt_file(git_repo: Path, tmp_path: Path) -> None:
    commit_files(git_repo, {"src/calc.py": CALC})
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    executor = CommandExecutor(python_template(script, "{prompt_file} {repo}"), timeout_s=30)

    await executor.execute(request(git_repo, f"use key {AWS_KEY}"))

    assert AWS_KEY not in (git_repo / "src/calc.py").read_text()


@pytest.mark.anyio
async def test_command_failure_reports_exit_code_and_output_tail(git_repo: Path, tmp_path: Path) -> None:
    script = tmp_path / "fail.py"
    script.write_text(
        "import sys\nfor i in range(100):\n    print('line', i)\n"
        "print('agent gave up: no API key')\nsys.exit(3)\n"
    )
    executor = CommandExecutor(python_template(script, "{prompt_file}"), timeout_s=30)

    result = await executor.execute(request(git_repo))

    assert not result.ok
    assert result.error is not None
    assert "exited with code 3" in result.error
    assert "agent gave up: no API key" in result.error
    assert "line 99" in result.error and "line 0\n" not in result.error  # the tail, not all of it


@pytest.mark.anyio
async def test_command_failure_keeps_no_piece_of_a_secret_its_tail_cuts_through(git_repo: Path, tmp_path: Path) -> None:
    token = "gh" + "p_" + "R8vK2mQ9xL4tN7pW3sZ6bY1cF5hJ0dA2eG8u"
    script = tmp_path / "fail.py"  # one long line: the tail kept starts 12 characters before the token's end
    script.write_text(f"import sys\nprint('auth with {token} ' + 'y' * 3987)\nsys.exit(1)\n")
    executor = CommandExecutor(python_template(script, "{prompt_file}"), timeout_s=30)

    result = await executor.execute(request(git_repo))

    summary = result.failure_summary()
    assert "exited with code 1" in summary
    assert not any(token[i : i + 8] in summary for i in range(len(token) - 7)), summary


@pytest.mark.anyio
async def test_command_timeout_kills_the_agent(git_repo: Path) -> None:
    executor = CommandExecutor("echo started; sleep 30 # {prompt_file}", timeout_s=0.5)

    result: ExecutionResult = await executor.execute(request(git_repo))

    assert not result.ok
    assert result.error is not None and "timed out" in result.error
    assert "started" in result.error


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("my-agent --repo {repo}", "must contain {prompt_file}"),
        ("my-agent {{prompt_file}}", "must contain {prompt_file}"),
        ("my-agent {prompt_file} {model}", "unknown placeholder"),
        ("my-agent --prompt {prompt}", "unknown placeholder {prompt} (did you mean {prompt_file}?)"),
        ("my-agent {prompt_file", "malformed"),
    ],
)
def test_command_template_is_checked_at_construction(template: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        CommandExecutor(template)
    assert message in str(caught.value)


# --------------------------------------------------------------------------- edit formats


def big_module(lines: int) -> str:
    return "".join(f"X{i} = {i}\n" for i in range(lines))


@pytest.mark.anyio
async def test_auto_asks_for_whole_files_when_small_and_search_replace_when_large(git_repo: Path) -> None:
    commit_files(git_repo, {"src/calc.py": CALC, "src/big.py": big_module(600)})
    model = FakeModel(FIX, FIX)
    executor = BuiltinExecutor(model)

    small = await executor.execute(request(git_repo, "Fix add() in src/calc.py"))
    large = await executor.execute(request(git_repo, "Fix add() in src/calc.py; see src/big.py"))

    assert (small.format_asked, large.format_asked) == ("whole", "search-replace")
    assert "<<<<<<< SEARCH" in model.calls[1][0]["content"]  # described, never shown as an example
    assert "src/calc.py" not in model.calls[1][0]["content"]


@pytest.mark.anyio
async def test_a_model_that_failed_search_replace_before_gets_whole_files(git_repo: Path, tmp_path: Path) -> None:
    commit_files(git_repo, {"src/calc.py": CALC, "src/big.py": big_module(600)})
    history = FormatHistory(tmp_path / "edit-formats.json")
    for _ in range(3):
        history.record("fake/model", "search-replace", applied=False)
    executor = BuiltinExecutor(FakeModel(FIX), formats=FormatChooser("auto", "fake/model", history))

    result = await executor.execute(request(git_repo, "Fix add() in src/calc.py; see src/big.py"))

    assert result.format_asked == "whole"
    assert history.load()["fake/model"]["whole"] == {"asked": 1, "applied": 1}


@pytest.mark.anyio
async def test_two_failures_in_a_row_switch_to_whole_and_the_repair_says_so(git_repo: Path) -> None:
    commit_files(git_repo, {"src/calc.py": CALC})
    bad = FIX.replace("a - b", "a - c")
    executor = BuiltinExecutor(FakeModel(bad, bad), formats=FormatChooser("search-replace", "fake/model"))

    first = await executor.execute(request(git_repo))
    second = await executor.execute(request(git_repo))

    assert (first.format_asked, second.format_asked) == ("search-replace", "search-replace")
    assert first.repair is not None and first.repair.endswith("(for src/calc.py, its path is src/calc.py).")
    assert second.repair is not None and "Reply with the complete new code of src/calc.py" in second.repair
    assert executor.formats.choose(10) == "whole"


def test_a_format_can_be_set_per_model_by_pattern() -> None:
    by_model = {"ollama/*": "whole", "openai/gpt-4*": "diff"}
    assert format_for_model("auto", by_model, "ollama/qwen2.5-coder:1.5b") == "whole"
    assert format_for_model("auto", by_model, "openai/gpt-4o") == "diff"
    assert format_for_model("search-replace", by_model, "anthropic/claude") == "search-replace"


def test_an_unreadable_format_record_is_no_record(tmp_path: Path) -> None:
    path = tmp_path / "edit-formats.json"
    path.write_text("{not json")
    history = FormatHistory(path)
    assert history.share_applied("m", "whole") is None
    history.record("m", "whole", applied=True)  # rewritten, not crashed on
    assert json.loads(path.read_text()) == {"models": {"m": {"whole": {"applied": 1, "asked": 1}}}}
