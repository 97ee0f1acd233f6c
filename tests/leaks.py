"""Credentials in their vendors' shapes, and where to look for any piece of them: git
objects, files, text. For the tests that make sure nothing a failing check prints leaks.

Each secret is glued from pieces and random characters from a seeded generator, so no
file here looks like a live credential to a secret scanner.
"""

from __future__ import annotations

import random
import re
import string
import subprocess
from pathlib import Path
from typing import Any

_rng = random.Random(7)
_ALNUM = string.ascii_letters + string.digits


def _draw(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


SECRETS = {
    "aws_id": "AK" + "IA" + _draw(string.ascii_uppercase + string.digits, 16),
    "aws_secret": _draw(_ALNUM + "+/", 40),
    "github": "gh" + "p_" + _draw(_ALNUM, 36),
    "slack": "xo" + "xb-" + _draw(string.digits, 11) + "-" + _draw(string.digits, 13) + "-" + _draw(_ALNUM, 24),
    "stripe": "sk" + "_live_" + _draw(_ALNUM, 24),
    "pem": "MIIEow" + _draw(_ALNUM + "+/", 58),
    "db_password": "Tr0ub4dor-" + _draw(_ALNUM, 8) + "!",
    "email": "jane.doe@" + "acme-corp.com",
    "host": "build-01.ci." + "acme-corp.com",
}

# Python that prints every secret, read from the JSON file `creds`, the way a test or a
# check prints its settings and connection string; then `fail` with them in the message.
PRINT_SECRETS = '''import json

S = json.load(open({creds!r}))
print("aws_access_key_id=" + S["aws_id"] + " aws_secret_access_key=" + S["aws_secret"])
print("GITHUB_TOKEN=" + S["github"])
print("-----BEGIN RSA " + "PRIVATE KEY-----\\n" + S["pem"] + "\\n-----END RSA " + "PRIVATE KEY-----")
URL = "postgresql://app:" + S["db_password"] + "@" + S["host"] + "/app"
WHY = ("cannot connect to " + URL + " as " + S["email"] + " with " + S["slack"] + " " + S["stripe"] + " "
       + S["aws_id"] + " " + S["aws_secret"] + " " + S["github"])
'''


def slices(secret: str) -> list[str]:
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


def leaks_in(text: str) -> list[str]:
    """The secrets of which an 8-character slice is in `text`."""
    return sorted({name for name, secret in SECRETS.items() for piece in slices(secret) if piece in text})


def trap() -> dict[str, Any]:
    """A scripted model's first entry: any call whose prompt carries a slice fails (auth)."""
    any_slice = "|".join(re.escape(piece) for secret in SECRETS.values() for piece in slices(secret))
    return {"match": any_slice, "error": "auth", "times": None}


def git_objects(repo: Path) -> dict[str, str]:
    """Every object reachable from any ref, by its line in `git rev-list --all --objects`."""
    listing = subprocess.run(["git", "rev-list", "--all", "--objects"], cwd=repo, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    return {line: subprocess.run(["git", "cat-file", "-p", line.split()[0]], cwd=repo, capture_output=True,
                                 check=True).stdout.decode(errors="replace") for line in listing}


def files_under(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_bytes().decode(errors="replace")
            for p in folder.rglob("*") if p.is_file()}


def leaking(texts: dict[str, str]) -> dict[str, list[str]]:
    """Each text that holds a slice of a secret, and which secrets."""
    return {name: found for name, text in texts.items() if (found := leaks_in(text))}
