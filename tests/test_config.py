"""project.json loading: defaults, validation messages, unknown keys, env overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from projects import do_one_task, make_project, tasks_on_disk
from pydantic import BaseModel

from orchestrator.config import (
    ConfigError,
    ExecutorConfig,
    ProjectConfig,
    load_config,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
NO_ENV: dict[str, str] = {}


def write_config(project: Path, body: Any) -> Path:
    path = project / ".openagents" / "project.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body if isinstance(body, bytes) else orjson.dumps(body))
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "shop-api"
    directory.mkdir()
    return directory


def test_missing_file_gives_defaults_and_a_notice(project: Path) -> None:
    loaded = load_config(project, NO_ENV)

    assert loaded.path is None
    assert loaded.warnings == ["no .openagents/project.json: using defaults"]
    config = loaded.config
    assert config.project_id is None  # the memory's key then comes from the origin remote or the folder
    assert config.default_branch == "main"
    assert config.reflexion.enabled is True
    assert config.reflexion.max_retries == 3
    assert config.reflexion.max_reflections_per_retry == 3
    assert config.executor.kind == "builtin"
    assert config.failure_cleanup == "restore"
    assert config.reflection_model == "gpt-4o-mini"


def test_valid_file_is_read_with_camel_case_keys(project: Path) -> None:
    path = write_config(
        project,
        {
            "projectId": "shop",
            "testCommands": ["pytest -q"],
            "typecheckCommands": ["mypy src"],
            "defaultModel": "anthropic/claude-sonnet-4-5",
            "reflexion": {"maxRetries": 5, "useLLM": False, "model": "gpt-4o"},
            "executor": {"kind": "command", "command": "agent --prompt {prompt_file} {repo}"},
            "timeouts": {"verifySeconds": 30.5},
            "maxCostUsd": 2.5,
            "parallelExecution": 4,
            "failureCleanup": "keep",
            "commitBookkeeping": False,
        },
    )

    loaded = load_config(project, NO_ENV)

    assert loaded.path == path
    assert loaded.warnings == []
    config = loaded.config
    assert config.project_id == "shop"
    assert config.test_commands == ["pytest -q"]
    assert config.typecheck_commands == ["mypy src"]
    assert config.reflexion.max_retries == 5
    assert config.reflexion.use_llm is False
    assert config.reflexion.enabled is True  # untouched keys keep their defaults
    assert config.reflection_model == "gpt-4o"
    assert config.executor.command == "agent --prompt {prompt_file} {repo}"
    assert config.timeouts.verify_seconds == 30.5
    assert config.timeouts.model_seconds == 120
    assert config.max_cost_usd == 2.5
    assert config.parallel_execution == 4
    assert config.failure_cleanup == "keep"
    assert config.commit_bookkeeping is False


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"reflexion": {"maxRetries": "three"}},
            'project.json: reflexion.maxRetries must be an integer (got "three")',
        ),
        (
            {"reflexion": {"enabled": 1}},
            "project.json: reflexion.enabled must be true or false (got 1)",
        ),
        ({"reflexion": []}, "project.json: reflexion must be an object (got [])"),
        (
            {"testCommands": ["pytest", 7]},
            "project.json: testCommands[1] must be a string (got 7)",
        ),
        (
            {"testCommands": "pytest"},
            'project.json: testCommands must be a list (got "pytest")',
        ),
        (
            {"failureCleanup": "revert"},
            "project.json: failureCleanup must be one of 'restore' or 'keep' (got \"revert\")",
        ),
        (
            {"reflexion": {"maxRetries": -1}},
            "project.json: reflexion.maxRetries must be at least 0 (got -1)",
        ),
        (
            {"timeouts": {"verifySeconds": -5}},
            "project.json: timeouts.verifySeconds must be greater than 0 (got -5)",
        ),
        (
            {"maxTasksPerRun": 2.5},
            "project.json: maxTasksPerRun must be an integer (got 2.5)",
        ),
        (
            {"executor": {"editFormat": "patch"}},
            "project.json: executor.editFormat must be one of 'auto', 'whole', 'search-replace' or 'diff' "
            '(got "patch")',
        ),
        (
            {"executor": {"editFormatByModel": {"ollama/*": "entire"}}},
            "project.json: executor.editFormatByModel.ollama/* must be one of 'auto', 'whole', "
            "'search-replace' or 'diff' (got \"entire\")",
        ),
    ],
)
def test_wrong_value_names_the_key_path(project: Path, body: Any, message: str) -> None:
    write_config(project, body)

    with pytest.raises(ConfigError) as caught:
        load_config(project, NO_ENV)

    assert str(caught.value) == message


def test_several_wrong_values_report_the_first_and_count_the_rest(project: Path) -> None:
    write_config(project, {"digestTokens": "many", "parallelExecution": 0, "maxCostUsd": "5"})

    with pytest.raises(ConfigError) as caught:
        load_config(project, NO_ENV)

    assert str(caught.value) == (
        'project.json: digestTokens must be an integer (got "many") (and 2 more problems)'
    )


def test_command_executor_without_a_command_is_an_error(project: Path) -> None:
    write_config(project, {"executor": {"kind": "command"}})

    with pytest.raises(ConfigError, match=r'executor: command must be set when kind is "command"'):
        load_config(project, NO_ENV)


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("my-agent --prompt PROMPT", "the template must contain {prompt_file}, the file the agent reads"),
        ("my-agent --prompt {prompt}", "the template has an unknown placeholder {prompt} (did you mean {prompt_file}?)"),
        ("my-agent {prompt_file", "the template is malformed"),
    ],
)
def test_a_command_template_the_executor_cannot_fill_is_a_config_error(
    project: Path, template: str, problem: str
) -> None:
    write_config(project, {"executor": {"kind": "command", "command": template}})

    with pytest.raises(ConfigError) as caught:
        load_config(project, NO_ENV)

    assert str(caught.value).startswith(f"project.json: executor.command: {problem}")
    assert "\n" not in str(caught.value)


def test_a_bad_command_template_stops_do_one_task_with_one_sentence(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    executor = {"kind": "command", "command": "my-agent --prompt {prompt}"}
    repo = make_project(git_repo, [], config={"executor": executor})

    assert do_one_task(repo) == 2

    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert err == (
        "do-one-task: project.json: executor.command: the template has an unknown placeholder {prompt} "
        "(did you mean {prompt_file}?); the placeholders are {prompt_file} and {repo}, and a literal "
        'brace is written twice (got "my-agent --prompt {prompt}")\n'
    )
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"  # nothing was started


def test_a_typo_of_a_required_key_is_pointed_out_in_the_error(project: Path) -> None:
    write_config(project, {"executor": {"kind": "command", "comand": "my-agent {prompt_file}"}})

    with pytest.raises(ConfigError) as caught:
        load_config(project, NO_ENV)

    assert str(caught.value) == (
        'project.json: executor: command must be set when kind is "command" '
        "(executor.comand is not a known key; did you mean executor.command?)"
    )


def test_a_typo_elsewhere_is_not_blamed_for_an_error(project: Path) -> None:
    write_config(project, {"digestTokens": "many", "reflexion": {"maxRetry": 2}})

    with pytest.raises(ConfigError) as caught:
        load_config(project, NO_ENV)

    assert str(caught.value) == 'project.json: digestTokens must be an integer (got "many")'


def test_a_typo_of_test_commands_is_named_when_no_check_is_set(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(git_repo, [], config={"testCommands": [], "testCommand": ["pytest -q"]})

    assert do_one_task(repo) == 2

    err = capsys.readouterr().err
    assert err.startswith("do-one-task: project.json sets no testCommands or typecheckCommands")
    assert err.endswith("(testCommand is not a known key; did you mean testCommands?)\n")
    assert err.count("\n") == 1


def test_invalid_json_says_where(project: Path) -> None:
    write_config(project, b'{\n  "defaultBranch": "main",\n  "testCommands": [,]\n}\n')

    with pytest.raises(ConfigError) as caught:
        load_config(project, NO_ENV)

    assert str(caught.value).startswith("project.json is not valid JSON: line 3 column ")


def test_top_level_must_be_an_object(project: Path) -> None:
    write_config(project, b'["pytest"]')

    with pytest.raises(ConfigError, match=r"^project.json must be a JSON object \(got a list\)$"):
        load_config(project, NO_ENV)


def test_byte_order_mark_is_tolerated(project: Path) -> None:
    write_config(project, b'\xef\xbb\xbf{"defaultBranch": "trunk"}')

    assert load_config(project, NO_ENV).config.default_branch == "trunk"


def test_unknown_keys_warn_with_a_suggestion_and_are_ignored(project: Path) -> None:
    write_config(
        project,
        {
            "reflexion": {"maxRetry": 9, "useLlm": False, "maxRetries": 2},
            "testComands": ["pytest"],
            "zebra": True,
        },
    )

    loaded = load_config(project, NO_ENV)

    assert loaded.warnings == [
        "project.json: unknown key reflexion.maxRetry (ignored); did you mean maxRetries?",
        "project.json: unknown key reflexion.useLlm (ignored); did you mean useLLM?",
        "project.json: unknown key testComands (ignored); did you mean testCommands?",
        "project.json: unknown key zebra (ignored)",
    ]
    assert loaded.config.reflexion.max_retries == 2
    assert loaded.config.reflexion.use_llm is True  # the misspelt key had no effect
    assert loaded.config.test_commands == []


def test_snake_case_spelling_is_not_silently_accepted(project: Path) -> None:
    write_config(project, {"reflexion": {"max_retries": 7}})

    loaded = load_config(project, NO_ENV)

    assert loaded.config.reflexion.max_retries == 3
    assert loaded.warnings == [
        "project.json: unknown key reflexion.max_retries (ignored); did you mean maxRetries?"
    ]


@pytest.mark.parametrize(
    ("value", "enabled"), [("off", False), ("0", False), ("NO", False), ("on", True), ("yes", True)]
)
def test_env_switches_reflexion(project: Path, value: str, enabled: bool) -> None:
    write_config(project, {"reflexion": {"enabled": not enabled}})

    loaded = load_config(project, {"GOLDENLOOP_REFLEXION": value})

    assert loaded.config.reflexion.enabled is enabled
    assert loaded.overrides == [f"reflexion.enabled={str(enabled).lower()} (GOLDENLOOP_REFLEXION)"]


def test_env_overrides_models(project: Path) -> None:
    write_config(project, {"defaultModel": "gpt-4o", "reflexion": {"maxRetries": 4}})
    env = {"GOLDENLOOP_MODEL": "ollama/qwen2.5-coder", "GOLDENLOOP_REFLECTION_MODEL": "gpt-4o-mini"}

    config = load_config(project, env).config

    assert config.default_model == "ollama/qwen2.5-coder"
    assert config.reflexion.model == "gpt-4o-mini"
    assert config.reflection_model == "gpt-4o-mini"
    assert config.reflexion.max_retries == 4  # the rest of reflexion survives


def test_env_model_alone_also_moves_the_reflection_model(project: Path) -> None:
    env = {"GOLDENLOOP_MODEL": "gpt-4.1", "GOLDENLOOP_REFLEXION": ""}

    config = load_config(project, env).config

    assert config.reflection_model == "gpt-4.1"
    assert config.reflexion.enabled is True  # an empty variable counts as unset


def test_invalid_env_switch_names_the_variable(project: Path) -> None:
    expected = r"^GOLDENLOOP_REFLEXION must be one of on/off, .*\(got 'maybe'\)$"
    with pytest.raises(ConfigError, match=expected):
        load_config(project, {"GOLDENLOOP_REFLEXION": "maybe"})


def test_building_a_command_executor_in_code_is_checked_too() -> None:
    with pytest.raises(ValueError, match="command must be set"):
        ExecutorConfig(kind="command")


def _field_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        paths.add(key)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            paths |= _field_paths(info.annotation, key + ".")
    return paths


def _json_paths(data: dict[str, Any], prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for key, value in data.items():
        paths.add(prefix + key)
        if isinstance(value, dict):
            paths |= _json_paths(value, prefix + key + ".")
    return paths


def test_example_file_lists_every_key_with_its_default(project: Path) -> None:
    example = (REPO_ROOT / "project.json.example").read_bytes()
    write_config(project, example)

    loaded = load_config(project, NO_ENV)

    assert loaded.warnings == []
    assert _json_paths(orjson.loads(example)) == _field_paths(ProjectConfig)
    assert loaded.config == ProjectConfig()
    assert ProjectConfig.model_validate_json(example) == ProjectConfig()


def test_the_reflection_timeout_follows_the_model_timeout_unless_set(project: Path) -> None:
    write_config(project, {"timeouts": {"modelSeconds": 300}})
    assert load_config(project, NO_ENV).config.reflection_timeout_s == 300
    write_config(project, {"timeouts": {"modelSeconds": 300}, "reflexion": {"generationTimeoutMs": 45000}})
    assert load_config(project, NO_ENV).config.reflection_timeout_s == 45


@pytest.mark.parametrize(("review", "words"), [
    ({"criteria": []}, "review.criteria must"),
    ({"criteria": [{"name": "No Print!"}]}, "a criterion's name is snake_case"),
    ({"criteria": [{"name": "lint"}, {"name": "lint"}]}, "criterion lint is listed twice"),
    ({"criteria": [{"name": "lint", "weight": 0}]}, "at least one criterion needs a weight above 0"),
    ({"criteria": [{"name": "cov", "command": "pytest --cov", "scorePattern": "\\d+"}]},
     "scorePattern needs a group around the number"),
    ({"criteria": [{"name": "cov", "command": "pytest --cov", "scorePattern": "(\\d+"}]},
     "scorePattern is not a regular expression"),
    ({"criteria": [{"name": "cov", "scorePatern": "(\\d+)%"}]}, "scorePatern"),
    ({"successThreshold": 1.5}, "review.successThreshold must be at most 1"),
])
def test_a_review_that_cannot_judge_is_one_sentence(project: Path, review: dict[str, Any], words: str) -> None:
    write_config(project, {"review": review})
    with pytest.raises(ConfigError) as caught:
        load_config(project, NO_ENV)
    assert words in str(caught.value) and "\n" not in str(caught.value)


# --- model: name, apiBase, apiKeyEnv ----------------------------------------------------


def test_model_name_wins_over_default_model_and_the_environment_wins_over_both(project: Path) -> None:
    model = {"name": "openai/qwen", "apiBase": "http://localhost:8000/v1", "apiKeyEnv": "VLLM_KEY"}
    write_config(project, {"defaultModel": "gpt-4o-mini", "model": model})

    config = load_config(project, NO_ENV).config
    assert (config.default_model, config.reflection_model) == ("openai/qwen", "openai/qwen")
    assert (config.model.api_base, config.model.api_key_env) == ("http://localhost:8000/v1", "VLLM_KEY")
    assert load_config(project, {"GOLDENLOOP_MODEL": "gpt-4.1"}).config.default_model == "gpt-4.1"


def test_without_model_name_default_model_is_the_model(project: Path) -> None:
    write_config(project, {"defaultModel": "ollama/qwen2.5-coder", "model": {"apiBase": "http://127.0.0.1:11434"}})

    assert load_config(project, NO_ENV).config.default_model == "ollama/qwen2.5-coder"


@pytest.mark.parametrize("url", ["localhost:8000/v1", "ftp://host/v1", "http://", "file:///tmp/x"])
def test_an_api_base_that_is_not_an_http_url_is_a_config_error(project: Path, url: str) -> None:
    write_config(project, {"model": {"apiBase": url}})

    with pytest.raises(ConfigError, match=r"model\.apiBase: must be an http:// or https:// URL"):
        load_config(project, NO_ENV)


def test_api_key_env_names_a_variable_not_a_key(project: Path) -> None:
    write_config(project, {"model": {"apiKeyEnv": "sk-live-1234"}})

    with pytest.raises(ConfigError, match=r"model\.apiKeyEnv must be the name of an environment variable"):
        load_config(project, NO_ENV)
    with pytest.raises(ConfigError) as raised:
        load_config(project, NO_ENV)
    assert "sk-live" not in str(raised.value)  # it may be the key itself: never echoed
