"""The name a task's reflections are filed under (memory/reflections/<agent>/, the `agent`
key of an outcome record, `memory list --agent`).

A command executor's agent is named by what it runs, not by the program that starts it:
`python agent.py {prompt_file}` is "agent", `sh tools/fix.sh` is "fix", `uv run my-agent`
is "my-agent", `python -m aider` is "aider", `sh -c "claude -p ..."` is "claude". An
interpreter, a runner (`uv run`, `npx`) or a wrapper (`env`, `timeout 600`) is looked
through; a generic script name (`index.js`, `main.py`) gives way to its folder's name.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

from orchestrator.config import ProjectConfig

__all__ = ["agent_name", "command_agent_name"]

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_INTERPRETER = re.compile(r"(python|pypy|node|deno|bun|ruby|perl|php|rscript|java|tsx|ts-node|"
                          r"sh|bash|zsh|dash|ksh|fish)[\d.]*(\.exe)?")
_WRAPPERS = {"env", "exec", "nice", "nohup", "time", "command", "stdbuf", "setsid", "caffeinate"}
_TAKES_VALUE = {"timeout": 1, "nice": 0}  # wrappers with a positional argument before the program
# Runners: the words that start them, then the program they run.
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipx", "run"), ("pdm", "run"), ("hatch", "run"), ("rye", "run"),
            ("npm", "exec"), ("pnpm", "exec"), ("pnpm", "dlx"), ("yarn", "dlx"), ("bundle", "exec"),
            ("deno", "run"), ("bun", "run"), ("conda", "run")}
_SINGLE_RUNNERS = {"npx", "uvx", "bunx", "pipx"}
_OPTION_VALUES = {"-n", "--name", "-p", "--prefix", "--with", "--from", "--python", "-W", "-X", "--env-file",
                  "-e", "--directory", "--project"}
_GENERIC = {"main", "index", "cli", "__main__", "run", "app", "start"}
_EXTENSIONS = (".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php", ".jar", ".exe")
_SEPARATORS = {"|", "||", "&&", ";", "&", "|&"}
_REDIRECTIONS = {"<", ">", ">>", "<<", "<<<", "&>", ">&", "2>", "2>>"}
_PLUMBING = {"cat", "echo", "printf", "tee", "cd", "test", "true", "export", "source", ".", "set", "[", "exit",
             "head", "tail"}
_MAX_DEPTH = 3  # `sh -c "..."` looked into, a few levels at most


def agent_name(config: ProjectConfig) -> str:
    """memory.agentName, else the model of the builtin executor, the agent a command executor
    runs (see the module docstring), or the agent preset's name."""
    if config.memory.agent_name:
        return config.memory.agent_name
    if config.executor.kind not in ("builtin", "command"):  # an agent preset: the agent did the work
        return config.executor.kind
    command = config.executor.command
    if config.executor.kind == "command" and command:
        return command_agent_name(command) or "command"
    return config.default_model


def command_agent_name(command: str, depth: int = 0) -> str | None:
    """The agent a command line runs, as a short lowercase name; None when it names none.
    In a pipeline or a list (`cd sub && ...`, `cat {prompt_file} | codex`) it is the first
    program that is no shell plumbing."""
    for words in _simple_commands(command):
        words = _past_wrappers(words)
        if not words or PurePosixPath(words[0]).name in _PLUMBING:
            continue
        program = PurePosixPath(words[0]).name.lower()
        if _INTERPRETER.fullmatch(program):
            inner = _interpreted(words[1:], depth)
            return inner if inner else _clean(program)
        return _clean(_named(words[0]))
    return None


def _simple_commands(command: str) -> list[list[str]]:
    """The words of each simple command, split at `|`, `&&`, `||`, `;` and `&`, redirections
    left out; a line that cannot be split (unbalanced quotes) word by word."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = command.split()
    commands: list[list[str]] = [[]]
    skip = False
    for token in tokens:
        if skip:
            skip = False
        elif token in _SEPARATORS:
            commands.append([])
        elif token in _REDIRECTIONS:
            skip = True  # its target is no word of the command
        else:
            commands[-1].append(token)
    return [words for words in commands if words]


def _past_wrappers(words: list[str]) -> list[str]:
    """The words from the program on: assignments, wrappers and runners skipped."""
    i = 0
    while i < len(words):
        word, name = words[i], PurePosixPath(words[i]).name
        if _ASSIGNMENT.match(word) or (word.startswith("-") and i > 0):
            i += 1 + (word in _OPTION_VALUES)
        elif name in _WRAPPERS or name in _TAKES_VALUE:
            i += 1 + _TAKES_VALUE.get(name, 0)
        elif (name, words[i + 1] if i + 1 < len(words) else "") in _RUNNERS:
            i += 2
        elif name in _SINGLE_RUNNERS:
            i += 1
        else:
            return words[i:]
    return []


def _interpreted(args: list[str], depth: int) -> str | None:
    """What an interpreter runs: `-m module`, `-c "command"` (a shell's), or the script."""
    i = 0
    while i < len(args):
        word = args[i]
        if word == "-m" and i + 1 < len(args):
            return _clean(args[i + 1])
        if word == "-c" and i + 1 < len(args):
            return command_agent_name(args[i + 1], depth + 1) if depth < _MAX_DEPTH else None
        if word in ("-jar", "run") and i + 1 < len(args):
            return _clean(_named(args[i + 1]))
        if word.startswith("-"):
            i += 1 + (word in _OPTION_VALUES)
            continue
        return None if "{" in word else _clean(_named(word))
    return None


def _named(path: str) -> str:
    """A script's name without its extension; a generic one (`index.js`) by its folder."""
    pure = PurePosixPath(path)
    stem = pure.name
    for ext in _EXTENSIONS:
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
            break
    if stem.lower() in _GENERIC and pure.parent.name not in ("", ".", "src", "bin", "dist", "lib", "build"):
        return pure.parent.name
    if stem.lower() in _GENERIC and len(pure.parts) > 2:  # dist/cli.js in my-agent/: the folder above
        return pure.parts[-3]
    return stem


def _clean(name: str) -> str | None:
    """Lowercase letters, digits, dots and hyphens; None when nothing is left."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.")
    return cleaned or None
