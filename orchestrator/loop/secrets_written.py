"""An attempt that writes a secret into a file it would commit is rejected before it is judged.

The scan reads what the attempt changed against the subtask's base: a value the run knows
as secret (`reflection.secret_values`: a variable's, a `.env` file's, one a rule found) that
occurs more often than before, or a secret-shaped token (a provider's key, a private key)
the base did not have. The sentence names the secret by its name, never its value, and
tells the retry what to do instead.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.git.repo import Repo
from reflection.redact import tokens_in
from reflection.secret_values import known_secrets

__all__ = ["secret_written"]

_MAX_BYTES = 2 * 1024 * 1024  # beyond this a file is data, not code a secret is pasted into


def secret_written(repo: Repo, base: str, changed: list[str]) -> str | None:
    """One sentence naming the first secret the change writes, and where; None when it writes none."""
    values = known_secrets.get()
    for path in changed:
        new = _text(repo.root / path)
        if not new:
            continue
        old = (repo.blob(base, path) or b"").decode("utf-8", "replace")
        if values is not None:
            before = values.found_in(old)
            for value, count in values.found_in(new).items():
                if count > before.get(value, 0):
                    return _told(values.name_of(value) or "secret", path)
        for value, kind in tokens_in(new).items():
            if value not in old:
                return (f"the change writes a {kind.replace('_', ' ')} into {path}; a credential never goes into "
                        "a tracked file: read it from the environment")
    return None


def _told(name: str, path: str) -> str:
    if name.islower():  # a kind: the value was found in the run's own output, not named anywhere
        return (f"the change writes a {name.replace('_', ' ')} this run saw in its output into {path}; a secret "
                "never goes into a file goldenloop commits")
    return (f"the change writes the value of {name} into {path}; read it from the environment (or the settings "
            "that hold it), never write the value itself")


def _text(path: Path) -> str:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return ""
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""
