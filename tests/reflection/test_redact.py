"""Secrets become typed placeholders; ordinary developer text comes back unchanged.

Every fake secret is assembled at run time from pieces or drawn from a seeded generator,
so no file in the repository holds a string that a secret scanner would take for a live
credential, and every run sees the same corpus.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import uuid
from collections.abc import Callable
from urllib.parse import quote

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


def test_every_rule_compiles_though_each_is_compiled_only_when_a_text_triggers_it() -> None:
    # A typo in a rule that few texts trigger would otherwise first fail on a user's text.
    from reflection.redact import _RULES

    for rule in _RULES:
        pattern, needs = rule.compile()
        assert isinstance(pattern, re.Pattern), rule.kind
        assert needs is None or isinstance(needs, re.Pattern), rule.kind


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


# --- a value found in one place is hidden everywhere ----------------------------------------


def test_a_password_found_in_an_assignment_is_hidden_in_the_assertion_that_quotes_it() -> None:
    password = "p@ssw0rd" + "-prod-99"
    output = (
        "    def test_connect():\n"
        f'        db_password = "{password}"\n'
        ">       assert connect(user, db_password)\n"
        f"E       AssertionError: connect as admin and db {password} failed\n"
        f"FAILED tests/test_db.py::test_connect - AssertionError: db {password} failed\n"
    )

    out = redact(output)

    assert password not in out
    assert out.count(placeholder("password")) == 3
    assert "E       AssertionError: connect as admin and db [REDACTED:password] failed\n" in out
    assert redact(out) == out


def test_an_exported_token_is_hidden_where_it_later_stands_bare() -> None:
    token = "Zx81qLmP" + "0vT7rWc3"
    text = f"$ export API_TOKEN={token}\n$ ./upload.sh\nupload: using {token}\n{token}\n"

    out = redact(text)

    assert out == (
        "$ export API_TOKEN=[REDACTED:token]\n$ ./upload.sh\nupload: using [REDACTED:token]\n[REDACTED:token]\n"
    )


def test_each_value_of_a_cookie_header_is_hidden_elsewhere_too() -> None:
    sid, csrf = "a8F3k2" + "Lq9Zx0", "c5rF" + "t0k3n99"
    text = f"Cookie: sid={sid}; csrf={csrf}\nsession {sid} expired (csrf {csrf})\n"

    out = redact(text)

    assert sid not in out and csrf not in out
    assert out.count(placeholder("cookie")) == 4


@pytest.mark.parametrize(
    "text",
    [
        'password = "x"\nx = 1\nprint(x, "xx")\n',  # too short to be redacted at all
        "$ sshpass -p hunter ssh ci@build\nhunter: ready\n",  # hidden where it is, but a word elsewhere
        'db_password: "production"\ndeploying to production\n',  # letters only: a word elsewhere
        "$ mysql -u root -p12345 shop\nprocessed 12345 rows\n",  # short
        'API_KEY = "OPENAI_API_KEY"\nexport OPENAI_API_KEY\n',  # names a variable: not a secret
        "Author: Jane Doe <jane@example.com>\nJane Doe fixed the parser\n",  # a name, found by its place
    ],
    ids=["one-character", "short-word", "plain-word", "short-number", "variable-name", "person"],
)
def test_short_or_ordinary_values_are_hidden_only_where_found(text: str) -> None:
    out = redact(text)

    assert out.splitlines()[1:] == text.splitlines()[1:]


def test_thousands_of_found_secrets_are_each_hidden_where_they_recur() -> None:
    rng = random.Random(7)
    sids = [f"{rng.getrandbits(128):032x}" for _ in range(5_000)]
    log = "".join(f"GET /a HTTP/1.1 Cookie: sid={sid}\nreq {n} ok\n" for n, sid in enumerate(sids))
    text = log + "".join(f"late {sid}\n" for sid in sids[::7])

    out = redact(text)

    assert not any(sid in out for sid in sids)
    assert out.count(placeholder("cookie")) == len(sids) + len(sids[::7])


def test_found_values_each_the_start_of_the_next_are_hidden_however_many() -> None:
    values = ["s3cr3t-" + "7" * n for n in range(1, 1_200)]  # too deep a trie: one value at a time
    text = "".join(f"DB{n}_PASSWORD={value}\n" for n, value in enumerate(values)) + f"late {values[500]}.\n"

    out = redact(text)

    assert out.endswith("\nlate [REDACTED:password].\n")
    assert "s3cr3t" not in out


def test_a_found_value_that_starts_another_is_hidden_whole_in_both() -> None:
    short, long = "hunter2" + "xyz", "hunter2" + "xyz-backup"
    text = f"DB_PASSWORD={short}\nBACKUP_PASSWORD={long}\nlogs: {long} then {short}.\n"

    out = redact(text)

    assert out.splitlines()[2] == "logs: [REDACTED:password] then [REDACTED:password]."


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


def test_redact_data_hides_a_secret_of_one_field_in_the_others() -> None:
    password = "s3cr3t" + "-Pa55"
    record = {"password": password, "log": [f"login with {password} failed"], "note": f"tried {password}"}

    clean = redact_data(record)

    assert clean == {
        "password": "[REDACTED:password]",
        "log": ["login with [REDACTED:password] failed"],
        "note": "tried [REDACTED:password]",
    }


# --- recall over a corpus of real secret formats -----------------------------------------
#
# Each format is generated from its documented shape by a seeded generator, then set in
# the places such a secret turns up: env files, JSON/YAML/TOML configs, command lines,
# code, HTTP headers, URLs, connection strings and log lines. A case counts as caught
# only when no ten-character piece of the secret is left: half a token is a leaked token.

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
URL_SAFE = ALNUM + "-_"
SYMBOLS = "!#%*+-.^_~@"


class Fake:
    """Credentials in real shapes, random but the same on every run."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def hex(self, n: int) -> str:
        return self.chars(HEX, n)

    def b64(self, nbytes: int) -> str:
        return base64.b64encode(self.rng.randbytes(nbytes)).decode()

    def b64url(self, nbytes: int) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(nbytes)).decode().rstrip("=")

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def pick(self, options):
        return self.rng.choice(list(options))

    def password(self) -> str:
        """What a password manager makes: letters, then at least a digit and a symbol."""
        length = self.rng.randint(10, 18)
        chars = list(self.chars(string.ascii_letters, 1) + self.chars(ALNUM + SYMBOLS, length))
        for extra in (self.chars(string.digits, 1), self.chars(SYMBOLS, 1)):
            chars.insert(self.rng.randint(1, len(chars)), extra)
        return "".join(chars)

    def jwt(self) -> str:
        header = {"alg": self.pick(["HS256", "RS256", "ES256"]), "typ": "JWT"}
        claims = {"sub": self.uuid(), "iat": self.rng.randint(1_600_000_000, 1_800_000_000)}
        encoded = (base64.urlsafe_b64encode(json.dumps(part).encode()) for part in (header, claims))
        return ".".join(part.decode().rstrip("=") for part in encoded) + "." + self.b64url(32)

    def aws_secret(self) -> str:
        return self.chars(ALNUM + "/+", 40)

    def pem_body(self) -> str:
        blob = self.b64(self.rng.randint(600, 1200))
        return "\n".join(blob[i : i + 64] for i in range(0, len(blob), 64))


# Tokens a provider marks with its own prefix: found by shape, wherever they are.
# (label, env var it usually lives in, generator)
PREFIXED: list[tuple[str, str, Callable[[Fake], str]]] = [
    ("aws-access-key", "AWS_ACCESS_KEY_ID", lambda f: f.pick(["AK" + "IA", "AS" + "IA"]) + f.chars(string.ascii_uppercase + string.digits, 16)),
    ("github-classic", "GITHUB_TOKEN", lambda f: "gh" + f.pick("pousr") + "_" + f.chars(ALNUM, 36)),
    ("github-fine-grained", "GH_TOKEN", lambda f: "github_" + "pat_" + f.chars(ALNUM, 22) + "_" + f.chars(ALNUM, 59)),
    ("github-app", "GITHUB_APP_TOKEN", lambda f: "gh" + "s_" + f.chars(ALNUM, 36)),
    ("gitlab-pat", "GITLAB_TOKEN", lambda f: "gl" + "pat-" + f.chars(URL_SAFE, 20)),
    ("gitlab-deploy", "CI_DEPLOY_PASSWORD", lambda f: "gl" + "dt-" + f.chars(URL_SAFE, 20)),
    ("gitlab-runner", "RUNNER_TOKEN", lambda f: "gl" + "rt-" + f.chars(URL_SAFE, 20)),
    ("gitlab-trigger", "TRIGGER_TOKEN", lambda f: "gl" + "ptt-" + f.hex(40)),
    ("gitlab-registration", "REGISTRATION_TOKEN", lambda f: "GR" + "1348941" + f.chars(URL_SAFE, 20)),
    ("slack-bot", "SLACK_BOT_TOKEN", lambda f: "xo" + "xb-" + f.chars(string.digits, 12) + "-" + f.chars(string.digits, 13) + "-" + f.chars(ALNUM, 24)),
    ("slack-user", "SLACK_USER_TOKEN", lambda f: "xo" + "xp-" + "-".join(f.chars(string.digits, 12) for _ in range(3)) + "-" + f.hex(32)),
    ("slack-app", "SLACK_APP_TOKEN", lambda f: "xa" + "pp-1-A" + f.chars(string.ascii_uppercase + string.digits, 10) + "-" + f.chars(string.digits, 13) + "-" + f.hex(64)),
    ("stripe-live", "STRIPE_SECRET_KEY", lambda f: "sk" + "_live_" + f.chars(ALNUM, f.rng.randint(24, 99))),
    ("stripe-test", "STRIPE_SECRET_KEY", lambda f: "sk" + "_test_" + f.chars(ALNUM, f.rng.randint(24, 99))),
    ("stripe-restricted", "STRIPE_API_KEY", lambda f: "rk" + f.pick(["_live_", "_test_"]) + f.chars(ALNUM, f.rng.randint(24, 99))),
    ("stripe-webhook", "STRIPE_WEBHOOK_SECRET", lambda f: "wh" + "sec_" + f.chars(ALNUM, 32)),
    ("openai-project", "OPENAI_API_KEY", lambda f: "sk-" + "proj-" + f.chars(URL_SAFE, 74) + "T3Blbk" + "FJ" + f.chars(URL_SAFE, 74)),
    ("openai-service", "OPENAI_API_KEY", lambda f: "sk-" + "svcacct-" + f.chars(URL_SAFE, 74) + "T3Blbk" + "FJ" + f.chars(URL_SAFE, 74)),
    ("openai-legacy", "OPENAI_API_KEY", lambda f: "sk-" + f.chars(ALNUM, 20) + "T3Blbk" + "FJ" + f.chars(ALNUM, 20)),
    ("anthropic", "ANTHROPIC_API_KEY", lambda f: "sk-" + "ant-" + f.pick(["api03-", "admin01-"]) + f.chars(URL_SAFE, 93) + "AA"),
    ("google-api-key", "GOOGLE_API_KEY", lambda f: "AI" + "za" + f.chars(URL_SAFE, 35)),
    ("google-oauth-secret", "GOOGLE_CLIENT_SECRET", lambda f: "GOC" + "SPX-" + f.chars(URL_SAFE, 28)),
    ("google-access-token", "GOOGLE_ACCESS_TOKEN", lambda f: "ya" + "29." + f.chars(URL_SAFE, 120)),
    ("huggingface", "HF_TOKEN", lambda f: "hf" + "_" + f.chars(string.ascii_letters, 34)),
    ("huggingface-org", "HUGGINGFACE_API_KEY", lambda f: "api_" + "org_" + f.chars(string.ascii_letters, 34)),
    ("npm", "NPM_TOKEN", lambda f: "np" + "m_" + f.chars(ALNUM, 36)),
    ("sendgrid", "SENDGRID_API_KEY", lambda f: "S" + "G." + f.chars(URL_SAFE, 22) + "." + f.chars(URL_SAFE, 43)),
    ("twilio-api-key", "TWILIO_API_KEY", lambda f: "S" + "K" + f.hex(32)),
    ("jwt", "ID_TOKEN", Fake.jwt),
    ("pypi", "PYPI_TOKEN", lambda f: "pypi-" + "AgEIcHlwaS5vcmc" + f.chars(URL_SAFE, 150)),
    ("digitalocean", "DIGITALOCEAN_TOKEN", lambda f: "do" + "p_v1_" + f.hex(64)),
    ("docker-hub", "DOCKERHUB_TOKEN", lambda f: "dckr" + "_pat_" + f.chars(URL_SAFE, 27)),
    ("databricks", "DATABRICKS_TOKEN", lambda f: "da" + "pi" + f.hex(32)),
    ("shopify", "SHOPIFY_ACCESS_TOKEN", lambda f: "shp" + f.pick(["at_", "ss_", "ca_", "pa_"]) + f.hex(32)),
    ("vault", "VAULT_TOKEN", lambda f: "hv" + "s." + f.chars(URL_SAFE, 90)),
    ("grafana", "GRAFANA_TOKEN", lambda f: "gl" + "sa_" + f.chars(ALNUM, 32) + "_" + f.hex(8)),
    ("sentry", "SENTRY_AUTH_TOKEN", lambda f: "sntry" + "u_" + f.hex(64)),
    ("replicate", "REPLICATE_API_TOKEN", lambda f: "r8" + "_" + f.chars(ALNUM, 37)),
    ("groq", "GROQ_API_KEY", lambda f: "gs" + "k_" + f.chars(ALNUM, 52)),
    ("linear", "LINEAR_API_KEY", lambda f: "lin_" + "api_" + f.chars(ALNUM, 40)),
    ("postman", "POSTMAN_API_KEY", lambda f: "PM" + "AK-" + f.hex(24) + "-" + f.hex(34)),
    ("telegram", "TELEGRAM_BOT_TOKEN", lambda f: f.chars(string.digits, 10) + ":A" + "A" + f.chars(URL_SAFE, 33)),
    ("age", "SOPS_AGE_KEY", lambda f: "AGE-SECRET-" + "KEY-1" + f.chars("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
]  # fmt: skip

# Where a token turns up. {s}: the token; {env}: its variable; {key}, {flag}: a name for it.
ANYWHERE = {
    "env": "# .env\nDEBUG=false\n{env}={s}\n",
    "env-quoted": 'export {env}="{s}"\n',
    "docker-env": "docker run --rm -e {env}={s} app:1.4.2\n",
    "json": '{{"service": "api", "{key}": "{s}", "timeout": 30}}\n',
    "yaml": "service:\n  {key}: {s}\n  retries: 3\n",
    "cli-flag": "$ deploy --{flag} {s} --region eu-west-1\n",
    "cli-flag-eq": "$ deploy --{flag}={s} --dry-run\n",
    "kwarg": 'client = Client({key}="{s}", timeout=30)\n',
    "positional": 'client = Client("{s}")\n',
    "bearer": "curl -sS -H 'Authorization: Bearer {s}' https://api.example.com/v1/me\n",
    "query": "GET /v1/items?page=2&access_token={s} HTTP/1.1\n",
    "log": "2024-05-01T12:00:03Z WARN auth rejected credential {s} (401 Unauthorized)\n",
    "traceback": (
        'Traceback (most recent call last):\n  File "/srv/app/sync.py", line 88, in push\n'
        '    raise AuthError(f"revoked: {{key}}")\napp.errors.AuthError: revoked: {s}\n'
    ),
    "prose": "The deploy failed because {s} was revoked; rotate it and retry.",
    "markdown": "| name | value |\n|---|---|\n| {env} | `{s}` |\n",
}
# A name under which each kind of generic credential is stored.
TOKEN_NAMES = ("token", "api_key", "apiKey", "secret", "client_secret", "access_token", "auth_token",
               "secret_key", "private_token", "refresh_token", "webhook_secret", "session_token")  # fmt: skip
PASSWORD_NAMES = ("password", "db_password", "passwd", "admin_password", "passphrase", "smtp_password")

# A value with nothing to give it away: only the name it is stored under says "secret".
IN_CONTEXT = {
    "env": "{env}={s}\n",
    "env-quoted": "export {env}='{s}'\n",
    "docker-env": "docker run -e {env}={s} -p 8080:80 app\n",
    "json": '{{"name": "svc", "{key}": "{s}", "retries": 3}}\n',
    "json-nested": '{{"auth": {{"{key}": "{s}"}}, "debug": false}}\n',
    "yaml": "backend:\n  url: https://api.example.com\n  {key}: {s}\n",
    "yaml-quoted": 'backend:\n  {key}: "{s}"\n',
    "toml": '[backend]\n{key} = "{s}"\ntimeout = 30\n',
    "ini": "[remote]\n{key} = {s}\n",
    "kwarg": 'session = connect(host="db.example.com", {key}="{s}")\n',
    "dict": 'settings = {{"{key}": "{s}", "debug": True}}\n',
    "cli-flag": "$ app login --{flag} {s} --verbose\n",
    "cli-flag-eq": "$ app login --{flag}={s}\n",
    "cli-flag-quoted": "$ app login --{flag} '{s}'\n",
    "query": "POST https://api.example.com/oauth/callback?state=af0ifjsldkj&{key}={s}&expires_in=3600\n",
}
TOKEN_VALUES: dict[str, Callable[[Fake], str]] = {
    "hex32": lambda f: f.hex(32),
    "hex40": lambda f: f.hex(40),
    "hex64": lambda f: f.hex(64),
    "base64": lambda f: f.b64(30),
    "base64url": lambda f: f.b64url(32),
    "alnum": lambda f: f.chars(ALNUM, 32),
    "letters": lambda f: f.chars(string.ascii_letters, 40),
    "uuid": Fake.uuid,
}


def _env_name(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).upper()


def _flag_name(name: str) -> str:
    return _env_name(name).lower().replace("_", "-")


def _set(template: str, secret: str, name: str, env: str | None = None) -> str:
    return template.format(s=secret, key=name, flag=_flag_name(name), env=env or _env_name(name))


def _url_password(f: Fake) -> str:
    return quote(f.password(), safe="")


def connection_cases(f: Fake) -> list[tuple[str, str, str]]:
    """Passwords in URLs and the connection strings of the usual databases and brokers."""
    user = f.pick(["app", "admin", "deploy", "svc_orders", "postgres"])
    urls = {
        "postgres-url": "DATABASE_URL=postgres://{u}:{p}@db.example.com:5432/orders\n",
        "sqlalchemy": 'engine = create_engine("postgresql+psycopg2://{u}:{p}@localhost/test")\n',
        "mongodb-srv": "MONGO_URI=mongodb+srv://{u}:{p}@cluster0.ab1cd.mongodb.net/?retryWrites=true&w=majority\n",
        "mongodb-replica": "mongodb://{u}:{p}@mongo-0:27017,mongo-1:27017/admin?replicaSet=rs0\n",
        "mysql": "$ mysql --defaults-file=/dev/null mysql://{u}:{p}@127.0.0.1:3306/shop\n",
        "redis-no-user": "REDIS_URL=redis://:{p}@cache.example.com:6379/0\n",
        "rediss": "celery broker: rediss://default:{p}@eu1-keen-cat.upstash.io:6379\n",
        "amqp": "kombu.exceptions.OperationalError: amqp://{u}:{p}@rabbit:5672/%2F refused\n",
        "https-git": "fatal: unable to access 'https://{u}:{p}@git.example.com/app.git/': 403\n",
        "ftp": "curl -T build.zip ftp://{u}:{p}@files.example.com/upload/\n",
        "jdbc-userinfo": "spring.datasource.url=jdbc:mysql://{u}:{p}@db:3306/app\n",
    }
    raw = {
        "jdbc-params": "jdbc:postgresql://db:5432/app?user={u}&password={p}&ssl=true\n",
        "libpq-dsn": 'psycopg.connect("host=db port=5432 dbname=app user={u} password={p} sslmode=require")\n',
        "ado-net": 'Server=tcp:db.example.com,1433;Database=app;User ID={u};Password={p};Encrypt=True;\n',
        "odbc": "DRIVER={{ODBC Driver 18}};SERVER=db;UID={u};PWD={p};TrustServerCertificate=yes\n",
        "netrc": "machine github.com\n  login {u}\n  password {p}\n",
        "netrc-line": "machine api.heroku.com login {u} password {p}\n",
        "curl-user": "curl -u {u}:{p} https://ci.example.com/api/json\n",
    }
    cases = []
    for label, template in urls.items():
        secret = _url_password(f)
        cases.append((label, secret, template.format(u=user, p=secret)))
    for label, template in raw.items():
        secret = f.password().replace(";", "")
        cases.append((label, secret, template.format(u=user, p=secret)))
    return cases


def header_cases(f: Fake) -> list[tuple[str, str, str]]:
    """Credentials in HTTP headers and the files that hold them."""
    login = f"{f.pick(['ci', 'deploy', 'jenkins'])}:{f.password()}"
    basic = base64.b64encode(login.encode()).decode()
    bearer = f.pick([f.b64url(32), f.hex(40), f.chars(ALNUM, 40)])
    return [
        ("curl-bearer", bearer, f"curl -H 'Authorization: Bearer {bearer}' https://api.example.com\n"),
        ("http-dump-bearer", bearer, f"> GET /v2/me HTTP/1.1\n> Host: api.example.com\n> Authorization: Bearer {bearer}\n"),
        ("python-headers", bearer, f'headers = {{"Authorization": "Bearer {bearer}", "Accept": "application/json"}}\n'),
        ("json-log-bearer", bearer, f'{{"level": "debug", "headers": {{"authorization": "Bearer {bearer}"}}}}\n'),
        ("bare-bearer", bearer, f"retrying request with Bearer {bearer} after 401\n"),
        ("github-token-scheme", (hex40 := f.hex(40)), f"Authorization: token {hex40}\n"),
        ("basic", basic, f"Authorization: Basic {basic}\n"),
        ("proxy-basic", basic, f"curl --proxy-header 'Proxy-Authorization: Basic {basic}' https://example.com\n"),
        ("wget-header", bearer, f'wget --header="Authorization: Bearer {bearer}" https://example.com/a.tgz\n'),
        ("x-api-key", (key := f.hex(32)), f"curl -H 'X-API-Key: {key}' https://api.example.com/v1\n"),
        ("x-auth-token", (tok := f.b64url(24)), f"X-Auth-Token: {tok}\nAccept: */*\n"),
        ("private-token", (tok2 := f.chars(ALNUM, 24)), f'curl --header "PRIVATE-TOKEN: {tok2}" https://gitlab.example.com/api/v4/projects\n'),
        ("cookie", (sid := f.b64url(32)), f"Cookie: theme=dark; sessionid={sid}; lang=en\n"),
        ("set-cookie", (sid2 := f.hex(48)), f"Set-Cookie: session={sid2}; Path=/; HttpOnly; Secure\n"),
        ("docker-config-auth", basic, f'{{"auths": {{"registry.example.com": {{"auth": "{basic}"}}}}}}\n'),
        ("npmrc-auth", basic, f"//registry.example.com/:_auth={basic}\nalways-auth=true\n"),
        ("azure-sas", (sig := quote(f.b64(32), safe="")),
         f"https://acct.blob.core.windows.net/c/b.zip?sv=2022-11-02&se=2024-06-01&sp=r&sig={sig}\n"),
        ("s3-presigned", (sig2 := f.hex(64)),
         f"https://bucket.s3.amazonaws.com/a.zip?X-Amz-Expires=3600&X-Amz-Signature={sig2}\n"),
    ]  # fmt: skip


def cloud_cases(f: Fake) -> list[tuple[str, str, str]]:
    """Secrets with no prefix of their own that cloud tools print next to one that has."""
    aws_id = "AK" + "IA" + f.chars(string.ascii_uppercase + string.digits, 16)
    aws_secret = f.aws_secret
    sid, auth = "A" + "C" + f.hex(32), f.hex(32)
    azure = f.b64(64)
    return [
        ("aws-env", (s1 := aws_secret()), f"AWS_ACCESS_KEY_ID={aws_id}\nAWS_SECRET_ACCESS_KEY={s1}\n"),
        ("aws-credentials-file", (s2 := aws_secret()), f"[default]\naws_access_key_id = {aws_id}\naws_secret_access_key = {s2}\n"),
        ("aws-sts-json", (s3 := aws_secret()), f'{{"Credentials": {{"AccessKeyId": "{aws_id}", "SecretAccessKey": "{s3}"}}}}\n'),
        ("aws-boto3", (s4 := aws_secret()), f'boto3.client("s3", aws_access_key_id="{aws_id}", aws_secret_access_key="{s4}")\n'),
        ("aws-configure", (s5 := aws_secret()), f"AWS Access Key ID [None]: {aws_id}\nAWS Secret Access Key [None]: {s5}\n"),
        ("aws-csv", (s6 := aws_secret()), f"Access key ID,Secret access key\n{aws_id},{s6}\n"),
        ("aws-cli-set", (s7 := aws_secret()), f"$ aws configure set aws_secret_access_key {s7}\n"),
        ("twilio-env", auth, f"TWILIO_ACCOUNT_SID={sid}\nTWILIO_AUTH_TOKEN={auth}\n"),
        ("twilio-client", auth, f'client = Client("{sid}", "{auth}")\n'),
        ("twilio-url", auth, f"curl https://{sid}:{auth}@api.twilio.com/2010-04-01/Accounts.json\n"),
        ("azure-storage", azure, f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={azure};EndpointSuffix=core.windows.net\n"),
        ("azure-service-bus", (sb := f.b64(32)), f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={sb}\n"),
    ]  # fmt: skip


def command_cases(f: Fake) -> list[tuple[str, str, str]]:
    """Passwords and tokens handed to a command or set in code, where only usage tells."""
    pw, tok = f.password().replace("'", ""), f.chars(ALNUM, 32)
    return [
        ("docker-login", pw, f"$ docker login -u ci -p {pw} registry.example.com\n"),
        ("sshpass", pw, f"sshpass -p '{pw}' ssh deploy@build-01\n"),
        ("mysql-glued", pw, f"$ mysql -h db -u root -p{pw} shop < dump.sql\n"),
        ("pgpassword", pw, f"PGPASSWORD={pw} psql -h db -U app -c 'select 1'\n"),
        ("kubectl-literal", pw, f"kubectl create secret generic db --from-literal=password={pw}\n"),
        ("gh-secret-set", tok, f"gh secret set DEPLOY_TOKEN --body {tok} --repo acme/app\n"),
        ("environ-subscript", tok, f"os.environ['SERVICE_API_KEY'] = '{tok}'\n"),
        ("go-short-decl", pw, f'password := "{pw}"\n'),
        ("k8s-env", tok, f"env:\n  - name: API_TOKEN\n    value: {tok}\n  - name: LOG_LEVEL\n    value: info\n"),
        ("azure-functions-header", tok, f"curl -H 'x-functions-key: {tok}' https://fn.azurewebsites.net/api/run\n"),
        ("pip-index-url", tok, f"pip install --index-url https://__token__:{tok}@pypi.example.com/simple app\n"),
    ]


def pem_cases(f: Fake) -> list[tuple[str, str, str]]:
    """Private key blocks, raw and as they sit inside JSON, YAML and env files."""
    cases = []
    for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY",
                  "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY", "PGP PRIVATE KEY BLOCK"):  # fmt: skip
        body = f.pem_body()
        block = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
        escaped = block.replace("\n", "\\n")
        indented = block.replace("\n", "\n    ")
        cases += [
            (f"pem-file {label}", body, f"$ cat ~/.ssh/id_deploy\n{block}\n$ ssh-add -l\n"),
            (f"pem-json {label}", body, f'{{"type": "service_account", "private_key": "{escaped}\\n", "client_id": "1"}}\n'),
            (f"pem-yaml {label}", body, f"tls:\n  key: |\n    {indented}\n  cert: server.crt\n"),
            (f"pem-env {label}", body, f'SSH_PRIVATE_KEY="{escaped}"\n'),
            (f"pem-truncated {label}", body[:300], f"{block[:400]}\n... [output truncated]\n"),
        ]
    return cases


def recall_corpus(seed: int = 20240611) -> list[tuple[str, str, str]]:
    """(case id, secret, text holding it), a few hundred of them."""
    f = Fake(seed)
    cases = []
    for label, env, make in PREFIXED:
        for where, template in ANYWHERE.items():
            secret = make(f)
            cases.append((f"{label}/{where}", secret, _set(template, secret, "api_key", env)))
    for shape, make in TOKEN_VALUES.items():
        for where, template in IN_CONTEXT.items():
            secret, name = make(f), f.pick(TOKEN_NAMES)
            cases.append((f"{shape}/{name}/{where}", secret, _set(template, secret, name)))
    for where, template in IN_CONTEXT.items():
        for _ in range(3):
            secret, name = f.password(), f.pick(PASSWORD_NAMES)
            if "query" in where:
                secret = quote(secret, safe="")
            cases.append((f"password/{name}/{where}", secret, _set(template, secret, name)))
    for make_cases in (connection_cases, header_cases, cloud_cases, command_cases):
        for _ in range(3):
            cases += make_cases(f)
    cases += pem_cases(f)
    jwt = f.jwt()
    cases += [
        ("jwt-cookie", jwt, f"Cookie: __Secure-next-auth.session-token={jwt}\n"),
        ("jwt-fragment", (jwt2 := f.jwt()), f"302 Location: https://app.example.com/cb#id_token={jwt2}&state=x\n"),
        ("jwt-local-storage", (jwt3 := f.jwt()), f'localStorage.setItem("session", "{jwt3}");\n'),
        ("slack-webhook", (hook := f"T{f.chars(string.ascii_uppercase + string.digits, 10)}/B{f.chars(string.ascii_uppercase + string.digits, 10)}/{f.chars(ALNUM, 24)}"),
         f"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/{hook}\n"),
        ("slack-webhook-code", (hook2 := f"T{f.chars(string.ascii_uppercase, 8)}/B{f.chars(string.ascii_uppercase, 9)}/{f.chars(ALNUM, 24)}"),
         f"requests.post('https://hooks.slack.com/services/{hook2}', json=msg)\n"),
    ]  # fmt: skip
    return cases


def _leaks(secret: str, out: str) -> bool:
    """Whether any ten-character piece of the secret survived."""
    width = min(10, len(secret))
    pieces = secret.split()
    return any(
        piece[i : i + width] in out for piece in pieces for i in range(max(1, len(piece) - width + 1))
    )


def test_recall_over_a_corpus_of_real_secret_formats_is_at_least_99_percent() -> None:
    corpus = recall_corpus()
    missed = []
    for case_id, secret, text in corpus:
        assert _leaks(secret, text), case_id  # the case really holds its secret
        out = redact(text)
        if _leaks(secret, out) or "[REDACTED:" not in out:
            missed.append(f"{case_id}: {out.strip()[:160]!r}")

    recall = 1 - len(missed) / len(corpus)
    print(f"\nredaction recall: {len(corpus) - len(missed)}/{len(corpus)} = {recall:.4f}")
    assert len(corpus) >= 500
    assert recall >= 0.99, "\n".join(missed)


def test_every_format_in_the_corpus_is_caught_wherever_it_stands() -> None:
    """No format is given up on: each one is caught in nearly every context."""
    corpus = recall_corpus(seed=7)
    by_format: dict[str, list[bool]] = {}
    for case_id, secret, text in corpus:
        by_format.setdefault(case_id.split("/")[0], []).append(not _leaks(secret, redact(text)))

    weak = {name: f"{sum(hits)}/{len(hits)}" for name, hits in by_format.items() if sum(hits) < len(hits) - 1}
    assert weak == {}


def test_the_three_tokens_of_the_issue_are_caught_outside_an_assignment() -> None:
    f = Fake(1)
    hugging = "hf" + "_" + f.chars(string.ascii_letters, 34)
    npm = "np" + "m_" + f.chars(ALNUM, 36)
    sendgrid = "S" + "G." + f.chars(URL_SAFE, 22) + "." + f.chars(URL_SAFE, 43)
    text = (
        f'login(token="{hugging}")\nnpm error 401: token {npm} has expired\n'
        f'sg = SendGridAPIClient("{sendgrid}")\n'
    )

    assert redact(text) == (
        'login(token="[REDACTED:huggingface_token]")\n'
        "npm error 401: token [REDACTED:npm_token] has expired\n"
        'sg = SendGridAPIClient("[REDACTED:sendgrid_key]")\n'
    )


# --- ordinary text at scale ----------------------------------------------------------------


def ordinary_corpus(seed: int = 20240611) -> dict[str, str]:
    """Developer output full of hashes, ids, digests and base64 that hide nothing."""
    f = Fake(seed)
    sha, short = f.hex(40), f.hex(7)
    digest = f.hex(64)
    data = f.b64(240)
    return {
        "git-log": "\n".join(f"{f.hex(7)} {msg}" for msg in ("Fix token refresh", "Bump numpy to 1.26.4",
                                                             "Add api_key validation", "Merge branch 'main'")),
        "git-rev-parse": f"$ git rev-parse HEAD\n{sha}\n$ git describe --tags\nv2.3.1-14-g{short}\n",
        "git-diff-index": f"diff --git a/src/auth.py b/src/auth.py\nindex {short}..{f.hex(7)} 100644\n",
        "git-commit-url": f"See https://github.com/acme/app/commit/{sha} and https://github.com/acme/app/pull/812\n",
        "merge-conflict": f"<<<<<<< HEAD\ntoken = load_token()\n=======\ntoken = refresh_token(old)\n>>>>>>> {sha}\n",
        "pip-hashes": (f"requests==2.31.0 \\\n    --hash=sha256:{digest} \\\n    --hash=sha256:{f.hex(64)}\n"
                       "Successfully installed requests-2.31.0 urllib3-2.2.1\n"),
        "poetry-lock": f'files = [\n    {{file = "idna-3.7-py3-none-any.whl", hash = "sha256:{f.hex(64)}"}},\n]\n',
        "package-lock": (f'"node_modules/left-pad": {{\n  "version": "1.3.0",\n  "resolved": '
                         f'"https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz",\n  "integrity": "sha512-{f.b64(64)}"\n}}\n'),
        "go-sum": f"github.com/pkg/errors v0.9.1 h1:{f.b64(32)}\ngithub.com/pkg/errors v0.9.1/go.mod h1:{f.b64(32)}\n",
        "cargo-lock": f'[[package]]\nname = "serde"\nversion = "1.0.203"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "{f.hex(64)}"\n',
        "docker-pull": (f"3.11-slim: Pulling from library/python\n{f.hex(12)}: Pull complete\nDigest: sha256:{digest}\n"
                        f"Status: Downloaded newer image for python:3.11-slim\nimage: postgres:16.2@sha256:{f.hex(64)}\n"),
        "uuids": (f"run_id={f.uuid()} request_id={f.uuid()} trace_id={f.hex(32)} span_id={f.hex(16)}\n"
                  f'{{"id": "{f.uuid()}", "commit": "{sha}", "checksum": "md5:{f.hex(32)}"}}\nuid: {f.uuid()}\n'),
        "http-response": (f"< HTTP/1.1 200 OK\n< ETag: \"{f.hex(32)}\"\n< X-Request-Id: {f.uuid()}\n"
                          f"< Content-MD5: {f.b64(16)}\n< X-GitHub-Request-Id: {f.hex(4).upper()}:{f.hex(6).upper()}:{f.hex(8).upper()}\n"),
        "base64-data-uri": f'<img src="data:image/png;base64,{data}" alt="chart">\n',
        "base64-github-content": f'{{"name": "README.md", "encoding": "base64", "content": "{data[:60]}\\n{data[60:120]}\\n"}}\n',
        "base64-shell": f"$ echo '{f.b64(24)}' | base64 -d > fixture.bin\n",
        "base64-mime": f"Content-Type: application/pdf\nContent-Transfer-Encoding: base64\n\n{data[:76]}\n{data[76:152]}\n",
        "ssh-public-key": f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{f.b64(24)} ci@build-runner\n",
        "certificate": f"-----BEGIN CERTIFICATE-----\n{f.pem_body()}\n-----END CERTIFICATE-----\n",
        "public-key-pem": f"-----BEGIN PUBLIC KEY-----\n{f.pem_body()}\n-----END PUBLIC KEY-----\n",
        "paths": (f"/home/dev/.cache/huggingface/hub/models--bert-base-uncased/snapshots/{sha}/config.json\n"
                  "node_modules/.pnpm/lodash@4.17.21/node_modules/lodash/lodash.js\n"
                  f"~/.npm/_cacache/content-v2/sha512/{f.hex(2)}/{f.hex(2)}/{f.hex(124)}\n"
                  "C:\\Users\\dev\\AppData\\Local\\Temp\\pytest-of-dev\\pytest-42\\test_token0\\\n"),
        "test-ids": ("tests/test_api.py::TestTokens::test_refresh_token[expired-bearer] PASSED\n"
                     "tests/test_auth.py::test_password_reset[admin-short] FAILED\n"
                     f"tests/test_store.py::test_digest[sha256-{f.hex(64)}] PASSED\n"
                     "tests/test_keys.py::test_api_key_from_env[missing] SKIPPED (needs network)\n"),
        "traceback": (
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.11/site-packages/huggingface_hub/utils/_validators.py", line 114, in _inner_fn\n'
            "    return fn(*args, **kwargs)\n"
            '  File "/srv/app/models.py", line 12, in load\n'
            "    path = hf_hub_download(repo_id=repo, filename=name, token=token)\n"
            "KeyError: 'OPENAI_API_KEY'\n"
            "TypeError: Client.__init__() got an unexpected keyword argument 'api_key'\n"
            "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-665f0e2a-"
            f"{f.hex(24)})\n"
        ),
        "versions": ("Python 3.11.7\nnumpy==1.26.4 torch==2.3.0+cu121 v2.0.0-rc.1+build.5\n"
                     "go version go1.22.3 linux/amd64\nnode v20.11.1 npm 10.2.4\nrustc 1.77.2 (25ef9e3d8 2024-04-09)\n"),
        "npm-env": "npm_config_cache=/home/dev/.npm\nnpm_package_version=1.4.2\nnpm_lifecycle_event=test\n",
        "code": (
            'hf_token = os.environ.get("HF_TOKEN")\napi_key: str | None = None\n'
            "token_ids = tokenizer.encode(text)\n"
            "if password_hash != sha256(password.encode()).hexdigest():\n"
            f'    cache_key = "{f.hex(40)}"\nidempotency_key = "{f.uuid()}"\nmax_tokens = 4096\n'
            'secret_name = "db-credentials"\ntoken_type = "Bearer"\n'
            'parser.add_argument("--token", help="API token (default: $APP_TOKEN)")\n'
        ),
        "cli-help": ("usage: deploy [-h] [--token TOKEN] [--api-key API_KEY] [--password PASSWORD]\n"
                     "              [--token-file PATH] [--password-stdin]\n"
                     "  --token TOKEN        the API token; see --token-file to read it from a file\n"),
        "json-metrics": f'{{"token_count": 1234, "tokens_used": 5678, "token_type": "Bearer", "expires_in": 3599, "key": "{f.hex(40)}"}}\n',
        "query-strings": f"GET /search?q=api+key&sort=created&sha={sha}&page=2 HTTP/1.1\nhttps://pypi.org/simple/requests/#sha256={digest}\n",
        "near-misses": (
            "$ mysql -u root -p shop\n$ pytest -p no:cacheprovider -q\n"
            "env:\n  - name: LOG_LEVEL\n    value: debug\n  - name: API_TOKEN\n    valueFrom:\n"
            "      secretKeyRef: {name: api, key: token}\n"
            "os.environ['API_KEY'] = api_key\nok := password == \"\"\nx-cache-key: v2-5f3a9c1e77\n"
            "$ ssh-add --ssh-key deploy_key.pub\n$ docker build --secret id=npmrc,src=$HOME/.npmrc .\n"
            "Pass --api-key argument or --client-secret parameter; see --password PASSWORD.\n"
            "The session cookie: set on login. Cookie: none\n"
        ),
        "prose": ("The API uses Bearer authentication; pass the key with --api-key or set it in the\n"
                  "environment. Authorization: required. Tokens expire after 3600 s. See SG.4.2 and\n"
                  "sk-learn-compatible estimators.\n"),
    }  # fmt: skip


def test_ordinary_developer_output_is_left_exactly_as_it_was() -> None:
    changed = {}
    for name, text in ordinary_corpus().items():
        out = redact(text)
        if out != text:
            changed[name] = [(a, b) for a, b in zip(text.splitlines(), out.splitlines()) if a != b]

    print(f"\nordinary texts changed by redaction: {len(changed)}/{len(ordinary_corpus())}")
    assert changed == {}
