"""Secrets masked by value: the values in reach as a run starts, and every one a rule finds,
are hidden wherever they stand later, whatever their form; and secrets told in prose."""

from __future__ import annotations

import base64
import secrets
import subprocess
from pathlib import Path

import pytest

from reflection.redact import redact, redact_data, tokens_in
from reflection.secret_values import SecretValues, secrets_known
from reflection.secrets_in_reach import secrets_in_reach

KEY = "7hQx2Lr9ZpV4mK8sW3nB6yD1fJ5gT0aE"  # what a vendor's API key looks like: no prefix


def _pem_body() -> list[str]:
    body = base64.b64encode(secrets.token_bytes(190)).decode()
    return [body[n:n + 64] for n in range(0, len(body), 64)]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text(".env\nsecrets/\n.venv/\n")
    return tmp_path


def test_a_key_from_env_is_masked_by_its_name_in_any_text(repo: Path) -> None:
    (repo / ".env").write_text(f"ACME_API_KEY={KEY}\nDEBUG=true\nDB_HOST=localhost\n")
    values = secrets_in_reach(repo, environ={})
    with secrets_known(values):
        shown = redact(f"connecting with {KEY}...\nok")  # no rule would know this word as a secret
        data = redact_data({"note": f"key {KEY}"})
    assert shown == "connecting with [REDACTED:ACME_API_KEY]...\nok"
    assert data == {"note": "key [REDACTED:ACME_API_KEY]"}
    assert redact(f"connecting with {KEY}") == f"connecting with {KEY}"  # outside the run: unknown


def test_environment_variables_with_secret_names_are_learnt_and_others_are_not(repo: Path) -> None:
    values = secrets_in_reach(repo, environ={"GH_TOKEN": KEY, "PWD": "/home/ann/shop", "MAX_TOKENS": "150000000",
                                             "HOME": "/home/ann", "DB_PASSWORD": "hunter2-long-enough"})
    with secrets_known(values):
        shown = redact(f"{KEY} /home/ann/shop 150000000 hunter2-long-enough")
    assert shown == "[REDACTED:GH_TOKEN] /home/ann/shop 150000000 [REDACTED:DB_PASSWORD]"


def test_ignored_folders_are_read_but_tool_folders_and_tracked_files_are_not(repo: Path) -> None:
    (repo / "secrets").mkdir()
    (repo / "secrets" / "prod.yml").write_text(f"database:\n  password: {KEY}\n")
    (repo / ".venv").mkdir()
    (repo / ".venv" / "pyvenv.cfg").write_text("api_key = Zx9Lw2Qp7Rt5Vn3Kb8\n")
    (repo / "settings.toml").write_text('secret_key = "Mm4Nn5Bb6Vv7Cc8Xx9"\n')  # tracked-to-be: not ignored
    values = secrets_in_reach(repo, environ={})
    assert values.name_of(KEY) == "password"
    assert values.name_of("Zx9Lw2Qp7Rt5Vn3Kb8") is None and values.name_of("Mm4Nn5Bb6Vv7Cc8Xx9") is None


def test_a_private_keys_lines_are_masked_one_by_one(repo: Path) -> None:
    lines = _pem_body()
    (repo / "secrets").mkdir()
    (repo / "secrets" / "deploy.pem").write_text(
        "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END RSA PRIVATE KEY-----\n")
    values = secrets_in_reach(repo, environ={})
    with secrets_known(values):
        shown = redact(f"E   assert b'{lines[2]}' in data")
    assert lines[2] not in shown


def test_a_value_a_rule_found_once_is_masked_later_where_no_rule_would_see_it() -> None:
    values = SecretValues()
    with secrets_known(values):
        redact(f"export STRIPE_SECRET={KEY}")
        later = redact(f"the request sent {KEY} to the server")
    assert KEY not in later and "[REDACTED:secret]" in later


# Eight shapes of a secret told in prose, as agents and test output print them.
PROSE = {
    "the password is": "The database password is Tr0ub4dor&3xK9 for now",
    "with password": "log in with password hunter2hunter2X then retry",
    "api key for ... is": "The API key for staging is 9f8e7d6c5b4a39281706f5e4d3c2b1a0.",
    "quoted passphrase": "the passphrase was 'correct horse battery staple'",
    "bare AWS secret": "aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4dE6f",
    "token:": "deploy token: 8Xk2LmQ9vR4tY7wZ1pN5",
    "key body lines": "\n".join(["key material:", *_pem_body()[:3]]),
    "escaped credentials file": ("E   AssertionError: assert '[default]\\naws_access_key_id = AK" + "IAQ3EGRT7WXHBM2L5N"
                                 "\\naws_secret_access_key = aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4dE6f\\n-----BEGIN RSA "
                                 "PRIVATE KEY-----\\n" + "\\n".join(_pem_body()[:2]) + "\\nMIIEpQIB...'"),
}


@pytest.mark.parametrize("name", list(PROSE))
def test_a_secret_told_in_prose_is_hidden(name: str) -> None:
    text = PROSE[name]
    shown = redact(text)
    assert "[REDACTED:" in shown
    for word in text.replace("\\n", " ").replace("'", " ").split():
        if len(word) >= 16 and any(ch.isdigit() for ch in word) and "REDACTED" not in word:
            assert word.rstrip(".") not in shown, word


@pytest.mark.parametrize("prose", [
    "the password is required", "token usage: 15000 input, 300 output", "the API key is missing: set OPENAI_API_KEY",
    "password reset flow works", "the secret is in the environment", "api_key = settings.api_key",
    "sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC",
    "commit 3f9a1c2e4b5d6f7a8b9c0d1e2f3a4b5c6d7e8f90",
])
def test_prose_about_secrets_that_holds_none_is_left_alone(prose: str) -> None:
    assert redact(prose) == prose


def test_tokens_in_names_live_credentials_not_examples() -> None:
    # glued from pieces, so that no file here looks like a live credential to a scanner
    found = tokens_in("AKIAIOSFODNN7EXAMPLE " + "gh" + "p_abcdefghijklmnopqrstuvwxyz0123456789AB "
                      "key = '" + "sk" + "_live_51HAbCdEfGhIjKlMnOpQrStUv'")
    assert set(found.values()) == {"github_token", "stripe_key"}
