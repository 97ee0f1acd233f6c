"""The secret values a run can reach as it starts: the environment and the repository's
git-ignored config files.

A variable with a secret name (`ACME_API_KEY`, `DB_PASSWORD`, `GH_TOKEN`) whose value
looks like a credential is one. So is a value under such a name in a `.env`-style or other
config file git ignores (`.env`, `.env.local`, `config/secrets.yml`, `.npmrc`), and any
token or private key a redaction rule finds in one: the file is ignored because it holds
them. A private key's lines are learnt one by one, so a line quoted alone is still masked.
Nothing here is written anywhere: the values go into a `SecretValues`, in memory.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

from reflection.redact import looks_like_credential, secret_name, tokens_in
from reflection.secret_values import SecretValues

__all__ = ["learn_environment", "learn_ignored_files", "secrets_in_reach"]

# Names of files that hold settings: an ignored one of these is where secrets live.
_CONFIG_NAME = re.compile(
    r"(?i)^(?:\.env(?:\..+)?|.+\.env|\.envrc|\.npmrc|\.pypirc|\.netrc|\.pgpass|credentials|secrets?"
    r"|.+\.(?:ini|cfg|conf|toml|json|ya?ml|properties|tfvars|pem|key|secrets?))$"
)
# Ignored folders that are a tool's, not settings: never read.
_TOOL_FOLDERS = frozenset({".venv", "venv", "env", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache",
                           ".ruff_cache", ".tox", ".nox", "build", "dist", ".git", ".openagents", "site-packages",
                           "target", ".next", ".cache", ".idea", ".vscode"})
_MAX_BYTES = 256 * 1024
_MAX_FILES = 200
_MAX_DEPTH = 3
# `NAME=value`, `export NAME=value`, `name: value`, `"name": "value"`, `name = "value"`.
_SETTING = re.compile(r"""^\s*(?:export\s+)?["']?(?P<name>[\w.-]+)["']?\s*[:=]\s*(?P<value>.+?)\s*,?\s*$""")
_PEM_LINE = re.compile(r"^[A-Za-z0-9+/=]{16,}$")


def secrets_in_reach(root: Path, environ: Mapping[str, str] | None = None) -> SecretValues:
    """The values of the environment and of `root`'s ignored config files, learnt."""
    values = SecretValues()
    learn_environment(values, os.environ if environ is None else environ)
    learn_ignored_files(values, root)
    return values


def learn_environment(values: SecretValues, environ: Mapping[str, str]) -> int:
    """Each variable with a secret name and a credential for a value; how many."""
    return sum(values.learn(value, name) for name, value in environ.items()
               if secret_name(name) and looks_like_credential(value))


def learn_ignored_files(values: SecretValues, root: Path) -> int:
    """The secrets of the config files git ignores in `root`; how many values."""
    learnt = 0
    for path in _ignored_config_files(root):
        try:
            if path.stat().st_size > _MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        learnt += _learn_text(values, text, path.name)
    return learnt


def _learn_text(values: SecretValues, text: str, source: str) -> int:
    learnt = 0
    for line in text.splitlines():
        found = _SETTING.match(line)
        if found and secret_name(found["name"]):
            value = found["value"].strip().strip("\"'")
            if looks_like_credential(value):
                learnt += values.learn(value, found["name"])
    for value, kind in tokens_in(text).items():
        learnt += values.learn(value, kind)
        if kind == "private_key":  # each line of its body on its own, as a log may quote one
            learnt += sum(values.learn(line, kind) for line in value.splitlines() if _PEM_LINE.match(line.strip()))
    return learnt


def _ignored_config_files(root: Path) -> Iterator[Path]:
    """Config files git ignores under `root`, inside ignored folders too (not a tool's)."""
    listed = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "-z"],
                            cwd=root, capture_output=True, check=False, stdin=subprocess.DEVNULL)
    if listed.returncode != 0:
        return
    count = 0
    for entry in os.fsdecode(listed.stdout).split("\0"):
        if not entry or any(part in _TOOL_FOLDERS for part in Path(entry).parts):
            continue
        for path in _config_files(root / entry.rstrip("/")):
            count += 1
            if count > _MAX_FILES:
                return
            yield path


def _config_files(path: Path, depth: int = 0) -> Iterator[Path]:
    if path.is_symlink():
        return  # may lead anywhere: the user's home, another repository
    if path.is_file():
        if _CONFIG_NAME.match(path.name):
            yield path
    elif path.is_dir() and depth < _MAX_DEPTH and path.name not in _TOOL_FOLDERS:
        try:
            children = sorted(path.iterdir())[:_MAX_FILES]
        except OSError:
            return
        for child in children:
            yield from _config_files(child, depth + 1)
