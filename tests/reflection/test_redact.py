"""Secrets become typed placeholders; ordinary developer text comes back unchanged.

Every fake secret is assembled at run time from pieces, so no file in the repository
holds a string that a secret scanner would take for a live credential.
"""

from __future__ import annotations

import pytest

from reflection.redact import KINDS, placeholder, redact, redact_data

# --- fake secrets in the real formats ---------------------------------------------------

OPENAI = "sk-" + "A" * 48
OPENAI_PROJECT = "sk-" + "proj-" + "Ab1_" * 20
ANTHROPIC = "sk-" + "ant-" + "api03-" + "Zq9-" * 23
AWS_ID = "AK" + "IA" + "Q7" * 8
AWS_SESSION_ID = "AS" + "IA" + "X3" * 8
AWS_SECRET = "wJ7r/" * 8
GITHUB = "gh" + "p_" + "a1B2" * 9
GITHUB_SERVER = "gh" + "s_" + "Z9y8" * 9
GITHUB_PAT = "github_" + "pat_" + "11AB" * 6 + "_" + "cd34" * 14
GITLAB = "gl" + "pat-" + "Xy7_" * 5
SLACK_BOT = "xo" + "xb-" + "1234567890-" + "0987654321-" + "aBcD" * 6
SLACK_APP = "xa" + "pp-1-" + "A0B1C2" + "-" + "9" * 13
SLACK_HOOK_PATH = "T0" + "0000000/B0" + "0000000/" + "AbCd" * 6
GOOGLE = "AI" + "za" + "Sy" + "Q1w2" * 7 + "E3r4b"
STRIPE_LIVE = "sk" + "_live_" + "4eC39H" * 4
STRIPE_RESTRICTED = "rk" + "_live_" + "51Hq2a" * 4
STRIPE_PUBLISHABLE = "pk" + "_live_" + "51Hq2a" * 4
STRIPE_TEST = "sk" + "_test_" + "4eC39H" * 4
JWT = "ey" + "JhbGciOiJIUzI1NiJ9." + "ey" + "JzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N"
BEARER = "tok_" + "8f14e45f" * 4
BASIC = "dXNlcjpw" + "YXNzd29yZA=="
PEM_BODY = "MIIEow" + "IBAAKCAQEA" + "q1w2e3r4" * 7 + "\n" + "Zx9Y" * 16 + "\n" + "kL0p==\n"
PEM_RSA = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + PEM_BODY + "-----END RSA PRIVATE KEY-----"
PEM_OPENSSH = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + PEM_BODY + "-----END OPENSSH PRIVATE KEY-----"
DB_PASSWORD = "s3cr3t-" + "Pa55word!"
URL_PASSWORD = "hunter2" + "hunter2"
GENERIC = "f00b4r" + "Baz9x7y6"


def contexts() -> list[tuple[str, str, str, str]]:
    """(case id, kind, secret, realistic text holding it)."""
    env_file = (
        "# local settings\nDEBUG=true\nOPENAI_API_KEY={openai}\nANTHROPIC_API_KEY={anthropic}\n"
        "AWS_ACCESS_KEY_ID={aws_id}\nAWS_SECRET_ACCESS_KEY={aws_secret}\nDB_PASSWORD={db}\n"
        "export SENTRY_TOKEN={generic}\nMAX_TOKENS=1500\n"
    ).format(
        openai=OPENAI, anthropic=ANTHROPIC, aws_id=AWS_ID, aws_secret=AWS_SECRET,
        db=DB_PASSWORD, generic=GENERIC,
    )  # fmt: skip
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/settings.py", line 41, in load\n'
        "    raise ConfigError(settings)\n"
        "app.errors.ConfigError: {'STRIPE_KEY': '%s', 'GOOGLE_MAPS': '%s', "
        "'aws_secret_access_key': '%s', 'password': '%s', 'timeout': 30}\n"
    ) % (STRIPE_LIVE, GOOGLE, AWS_SECRET, DB_PASSWORD)
    curl = "$ curl -sS -H 'Authorization: Bearer %s' -H 'Accept: json' https://api.example.com/v1/me"
    json_config = '{\n  "name": "svc",\n  "api_key": "%s",\n  "retries": 3\n}\n'
    yaml_config = "database:\n  host: db.example.com\n  password: %s\n  pool: 5\n"
    return [
        ("env-openai", "openai_key", OPENAI, env_file),
        ("env-anthropic", "anthropic_key", ANTHROPIC, env_file),
        ("env-aws-id", "aws_access_key", AWS_ID, env_file),
        ("env-aws-secret", "aws_secret_key", AWS_SECRET, env_file),
        ("env-password", "password", DB_PASSWORD, env_file),
        ("env-export-token", "token", GENERIC, env_file),
        ("traceback-stripe", "stripe_key", STRIPE_LIVE, traceback),
        ("traceback-google", "google_api_key", GOOGLE, traceback),
        ("traceback-aws-secret", "aws_secret_key", AWS_SECRET, traceback),
        ("traceback-password", "password", DB_PASSWORD, traceback),
        ("curl-bearer", "bearer_token", BEARER, curl % BEARER),
        ("curl-bearer-jwt", "jwt", JWT, curl % JWT),
        ("curl-basic", "basic_auth", BASIC, f"curl -H \"Authorization: Basic {BASIC}\" https://ci.example.com"),
        ("curl-user", "basic_auth", f"admin:{URL_PASSWORD}", f"curl -u admin:{URL_PASSWORD} https://ci.example.com"),
        ("remote-github-token", "github_token", GITHUB, f"origin\thttps://{GITHUB}@github.com/acme/app.git (fetch)"),
        ("remote-x-access-token", "github_token", GITHUB_SERVER,
         f"git clone https://x-access-token:{GITHUB_SERVER}@github.com/acme/app.git"),
        ("remote-gitlab", "gitlab_token", GITLAB, f"git remote add origin https://oauth2:{GITLAB}@gitlab.com/acme/app.git"),
        ("remote-user-password", "url_credentials", f"deploy:{URL_PASSWORD}",
         f"fatal: unable to access 'https://deploy:{URL_PASSWORD}@git.example.com/app.git/': 403"),
        ("json-api-key", "secret", GENERIC, json_config % GENERIC),
        ("json-openai-project", "openai_key", OPENAI_PROJECT, json_config % OPENAI_PROJECT),
        ("json-github-pat", "github_token", GITHUB_PAT, json_config % GITHUB_PAT),
        ("yaml-password", "password", DB_PASSWORD, yaml_config % DB_PASSWORD),
        ("yaml-session-id", "aws_access_key", AWS_SESSION_ID, f"credentials:\n  key_id: {AWS_SESSION_ID}\n"),
        ("slack-bot", "slack_token", SLACK_BOT, f"slack_client = WebClient(token=\"{SLACK_BOT}\")"),
        ("slack-app", "slack_token", SLACK_APP, f"SOCKET_MODE={SLACK_APP}"),
        ("slack-webhook", "slack_webhook", SLACK_HOOK_PATH,
         f"requests.post('https://hooks.slack.com/services/{SLACK_HOOK_PATH}', json=msg)"),
        ("stripe-restricted", "stripe_key", STRIPE_RESTRICTED, f"stripe.api_key = '{STRIPE_RESTRICTED}'"),
        ("stripe-publishable", "stripe_key", STRIPE_PUBLISHABLE, f"<script>Stripe('{STRIPE_PUBLISHABLE}')</script>"),
        ("stripe-test", "stripe_key", STRIPE_TEST, f"E   stripe.error.AuthenticationError: Invalid API Key provided: {STRIPE_TEST}"),
        ("python-constant", "secret", "django-insecure-" + GENERIC, f'SECRET_KEY = "django-insecure-{GENERIC}"'),
        ("kwarg-client-secret", "secret", GENERIC, f"OAuth(client_id='web', client_secret='{GENERIC}')"),
        ("query-token", "token", GENERIC, f"GET /callback?state=xyz&access_token={GENERIC}&expires=3600 HTTP/1.1"),
        ("escaped-json", "password", DB_PASSWORD, f'"body": "{{\\"user\\": \\"ann\\", \\"password\\": \\"{DB_PASSWORD}\\"}}"'),
        ("pem-rsa", "private_key", PEM_BODY.splitlines()[1], f"key = '''\n{PEM_RSA}\n'''\n"),
        ("pem-openssh-escaped", "private_key", "Zx9Y" * 16,
         '{"deploy_key": "' + PEM_OPENSSH.replace("\n", "\\n") + '"}'),
        ("pem-truncated", "private_key", PEM_BODY.splitlines()[1], PEM_RSA.split("kL0p")[0] + "... (output truncated)"),
        ("email", "email", "jane.doe+ci@acme-corp.com", "Author: Jane Doe <jane.doe+ci@acme-corp.com>"),
        ("private-ip-10", "private_ip", "10.12.0.7", "ConnectionRefusedError: [Errno 111] connect to 10.12.0.7:5432"),
        ("private-ip-172", "private_ip", "172.31.255.254", "upstream 172.31.255.254 timed out"),
        ("private-ip-192", "private_ip", "192.168.1.20", "ping 192.168.1.20"),
        ("internal-host", "internal_host", "db-primary.prod.internal",
         "could not translate host name \"db-primary.prod.internal\" to address"),
        ("corp-host", "internal_host", "build01.corp", "Host build01.corp\n  User ci"),
        ("mdns-host", "internal_host", "printer.local", "http://printer.local:631/jobs"),
    ]  # fmt: skip


CASES = contexts()


@pytest.mark.parametrize(("kind", "secret", "text"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_secret_is_replaced_by_a_placeholder_of_its_kind(kind: str, secret: str, text: str) -> None:
    assert secret in text  # the case really contains what it claims to

    out = redact(text)

    assert secret not in out
    assert placeholder(kind) in out
    assert kind in KINDS


def test_assignment_keeps_the_name_and_the_rest_of_the_line() -> None:
    text = (
        f'OPENAI_API_KEY={OPENAI}\nDB_PASSWORD="{DB_PASSWORD}"\n'
        f'{{"api_key": "{GENERIC}", "retries": 3}}\n'
    )

    assert redact(text) == (
        "OPENAI_API_KEY=[REDACTED:openai_key]\n"
        'DB_PASSWORD="[REDACTED:password]"\n'
        '{"api_key": "[REDACTED:secret]", "retries": 3}\n'
    )


def test_url_credentials_keep_scheme_host_and_path() -> None:
    text = f"DATABASE_URL=postgres://app:{URL_PASSWORD}@db.example.com:5432/orders"

    assert redact(text) == (
        "DATABASE_URL=postgres://[REDACTED:url_credentials]@db.example.com:5432/orders"
    )


def test_header_keeps_its_scheme_and_the_command_around_it() -> None:
    out = redact(f"curl -H 'Authorization: Bearer {BEARER}' https://api.example.com/v1/me")

    assert out == (
        "curl -H 'Authorization: Bearer [REDACTED:bearer_token]' https://api.example.com/v1/me"
    )


def test_whole_private_key_block_goes_and_the_text_after_it_stays() -> None:
    out = redact(f"before\n{PEM_RSA}\nafter the key\n")

    assert out == "before\n[REDACTED:private_key]\nafter the key\n"


# --- ordinary text ---------------------------------------------------------------------

PYTEST_OUTPUT = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0
rootdir: /home/dev/project
configfile: pyproject.toml
collected 12 items

tests/test_auth.py ..F.                                                   [ 33%]
tests/test_tokens.py ........                                            [100%]

=================================== FAILURES ===================================
______________________________ test_refresh_token ______________________________

    def test_refresh_token():
        session = make_session(max_tokens=1500, skip_token=True)
>       assert session.refresh_token() == "expected-token"
E       AssertionError: assert 'stale-token' == 'expected-token'
E         - expected-token
E         + stale-token

tests/test_auth.py:42: AssertionError
=========================== short test summary info ============================
FAILED tests/test_auth.py::test_refresh_token - AssertionError: assert 'stale-token' == 'expected-token'
========================= 1 failed, 11 passed in 0.42s =========================
"""

PYTHON_DIFF = """\
diff --git a/src/app/auth.py b/src/app/auth.py
index 3f2c9e1..8a7b6c5 100644
--- a/src/app/auth.py
+++ b/src/app/auth.py
@@ -1,18 +1,24 @@
 import threading
+from pydantic import SecretStr
 
 KEY_NAMES = ["api_key", "token", "password"]
 MAX_TOKENS = 1500
+_state = threading.local()
 
 class Settings(BaseModel):
-    api_key: str
+    api_key: SecretStr
+    password_min_length: int = 12
 
 def login(settings: Settings, request: Request) -> Session:
-    token = request.headers.get("X-Token")
+    token = request.headers.get("X-Token") or settings.default_token
+    headers = {"Authorization": f"Bearer {token}"}
     cache_key = "sessions:v2:" + token
-    return connect(password=settings.db_password, api_key=api_key)
+    if token is None:
+        raise AuthError("missing token")
+    return connect(password=settings.db_password, timeout=30, max_tokens=MAX_TOKENS)
"""

MYPY_OUTPUT = """\
src/app/auth.py:12: error: Incompatible types in assignment (expression has type "None", variable has type "str")  [assignment]
src/app/auth.py:19: error: Argument "api_key" to "Client" has incompatible type "int"; expected "SecretStr"  [arg-type]
src/app/auth.py:23: note: Revealed type is "builtins.str"
Found 2 errors in 1 file (checked 14 source files)
"""

README = """\
## Setup

goldenloop retries a failing subtask up to 3 times. Copy `.env.example` to `.env` and set
`OPENAI_API_KEY=your-key-here` (or `API_KEY=${OPENAI_API_KEY}` in CI; `TOKEN=<token>` and
`PASSWORD=xxxxxxxx` are placeholders too). Requires Python 3.11 and git 2.39.2; tested on
release 1.2.3.4 with DNS at 8.8.8.8 and 1.1.1.1. The dev server listens on localhost:8080,
127.0.0.1:8000 and 0.0.0.0:8000. Pinned to commit 3f2c9e1a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e,
run id 123e4567-e89b-12d3-a456-426614174000. Caches live in ~/.local/share/goldenloop and
/usr/local/lib/python3.11/site-packages; on Windows C:\\Users\\dev\\AppData. Docs:
https://docs.example.com/setup?step=2#tokens and git@github.com:acme/goldenloop.git.
The API uses Bearer authentication; Authorization: required for every call.
"""


@pytest.mark.parametrize(
    "text",
    [PYTEST_OUTPUT, PYTHON_DIFF, MYPY_OUTPUT, README],
    ids=["pytest-output", "python-diff", "mypy-output", "readme"],
)
def test_ordinary_text_comes_back_unchanged(text: str) -> None:
    assert redact(text) == text


def test_public_addresses_and_loopback_are_kept_private_ones_are_not() -> None:
    text = "8.8.8.8 1.2.3.4 127.0.0.1 0.0.0.0 172.15.0.1 172.32.0.1 10.0.0.256 10.0.0.1"

    assert redact(text) == (
        "8.8.8.8 1.2.3.4 127.0.0.1 0.0.0.0 172.15.0.1 172.32.0.1 10.0.0.256 [REDACTED:private_ip]"
    )


def test_generic_values_that_are_not_credentials_stay() -> None:
    text = (
        "MAX_TOKENS=1500\nAPI_KEY=changeme\nGITHUB_TOKEN=${GITHUB_TOKEN}\nSECRET=<secret>\n"
        "api_key = os.environ['API_KEY']\npassword: str\nssh_key: ~/.ssh/id_ed25519\n"
        "token=token\nsort_key = 'created_at:desc'\n"
    )

    assert redact(text) == text


# --- invariants --------------------------------------------------------------------------


def test_redact_is_idempotent() -> None:
    corpus = "\n".join(text for *_, text in contexts()) + PYTEST_OUTPUT + PYTHON_DIFF + README

    once = redact(corpus)

    assert redact(once) == once
    assert once != corpus


def test_large_input_with_long_unbroken_runs_finishes_and_is_fully_redacted() -> None:
    env = f"OPENAI_API_KEY={OPENAI}\nDB_PASSWORD={DB_PASSWORD}\nhost 10.1.2.3 mail ops@acme-corp.com\n"
    hostile = (
        "a" * 200_000 + "\n" + "Ab3+" * 50_000 + "\n" + "-----BEGIN RSA PRIVATE KEY-----\n" * 5_000
        + "https://" * 20_000 + "key=" * 20_000 + "a." * 100_000 + "x@" * 50_000 + "\n"
    )  # fmt: skip
    block = env + PYTEST_OUTPUT + hostile
    text = block * (5_000_000 // len(block) + 1)

    out = redact(text)

    assert OPENAI not in out and DB_PASSWORD not in out and "ops@acme-corp.com" not in out
    assert out.count(placeholder("openai_key")) == text.count(OPENAI)
    assert out.count(PYTEST_OUTPUT) == text.count(PYTEST_OUTPUT)


# --- redact_data -------------------------------------------------------------------------


def test_redact_data_redacts_nested_strings_and_keeps_keys_and_other_values() -> None:
    record = {
        "analysis": f"auth failed with {OPENAI}",
        "actionItems": [f"rotate {GITHUB}", "rerun the tests"],
        "usage": {"inputTokens": 120, "costUsd": None},
        "nested": ({"hosts": ["10.0.0.5", "8.8.8.8"]},),
        "confidence": 0.7,
    }

    clean = redact_data(record)

    assert clean == {
        "analysis": "auth failed with [REDACTED:openai_key]",
        "actionItems": ["rotate [REDACTED:github_token]", "rerun the tests"],
        "usage": {"inputTokens": 120, "costUsd": None},
        "nested": ({"hosts": ["[REDACTED:private_ip]", "8.8.8.8"]},),
        "confidence": 0.7,
    }
    assert record["analysis"] == f"auth failed with {OPENAI}"  # the input is not modified


def test_redact_data_hides_a_value_stored_under_a_secret_key() -> None:
    record = {"password": "correcthorse", "apiKey": GENERIC, "cache_key": "users:v2", "token": "short"}

    clean = redact_data(record)

    assert clean == {
        "password": "[REDACTED:password]",
        "apiKey": "[REDACTED:secret]",
        "cache_key": "users:v2",
        "token": "short",
    }
