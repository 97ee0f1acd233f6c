"""Every vendor's secret format, and the personal data a reflection must not keep, are
redacted; ordinary code, test output and prose come back unchanged.

A representative subset of `bench/redaction_corpus.txt` (the bench prints recall and false
positives over all of it). Tokens are drawn from a seeded generator and glued from pieces,
so no file here looks like a live credential to a secret scanner.
"""

from __future__ import annotations

import random
import string

import pytest

from reflection.redact import placeholder, redact

_rng = random.Random(20260301)
ALNUM = string.ascii_letters + string.digits


def draw(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URL_SAFE = ALNUM + "-_"
AWS_ID = "AK" + "IA" + draw(string.ascii_uppercase + string.digits, 16)
AWS_SECRET = draw(B64, 40)

# (case, secret, the text a failing test or a tool prints around it)
VENDOR = [
    ("aws key pair", AWS_SECRET, f"using aws_access_key_id={AWS_ID} aws_secret_access_key={AWS_SECRET}\n"),
    ("aws key id", AWS_ID, f"botocore.exceptions.ClientError: InvalidAccessKeyId for key {AWS_ID}\n"),
    ("github classic", (t := "gh" + "p_" + draw(ALNUM, 36)), f"origin\thttps://{t}@github.com/acme-corp/app.git\n"),
    ("github fine-grained", (t := "github_" + "pat_" + draw(ALNUM, 22) + "_" + draw(ALNUM, 59)),
     f"The token {t} has expired.\n"),
    ("github app", (t := "gh" + "s_" + draw(ALNUM, 36)), f"git clone https://x-access-token:{t}@github.com/a/b\n"),
    ("gitlab routable", (t := "gl" + "pat-" + draw(URL_SAFE, 27) + ".01." + draw(HEX, 9)),
     f"remote: HTTP Basic: Access denied for token {t}\n"),
    ("slack bot", (t := "xo" + "xb-" + draw(string.digits, 11) + "-" + draw(string.digits, 13) + "-" + draw(ALNUM, 24)),
     f"E   slack_sdk.errors.SlackApiError: invalid_auth for {t}\n"),
    ("slack user", (t := "xo" + "xp-" + draw(string.digits, 11) + "-" + draw(string.digits, 12) + "-" + draw(HEX, 32)),
     f'client = WebClient(token="{t}")\n'),
    ("slack webhook", (t := "T" + draw(ALNUM, 10) + "/B" + draw(ALNUM, 10) + "/" + draw(ALNUM, 24)),
     f"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/{t}\n"),
    ("stripe live", (t := "sk" + "_live_" + draw(ALNUM, 24)), f"charging with {t} failed: card_declined\n"),
    ("stripe test", (t := "sk" + "_test_" + draw(ALNUM, 24)), f'stripe.api_key = "{t}"\n'),
    ("stripe restricted", (t := "rk" + "_live_" + draw(ALNUM, 24)), f"Invalid API Key provided: {t}\n"),
    ("google api key", (t := "AI" + "za" + draw(URL_SAFE, 35)), f"GET /geocode/json?address=x&key={t} 403\n"),
    ("openai", (t := "sk-" + "proj-" + draw(URL_SAFE, 74) + "T3Blbk" + "FJ" + draw(URL_SAFE, 74)),
     f"OPENAI_API_KEY={t}\n"),
    ("anthropic", (t := "sk-" + "ant-api03-" + draw(URL_SAFE, 93) + "AA"), f"DEBUG using key {t} for claude\n"),
    ("twilio", (t := draw(HEX, 32)), f'client = Client("AC{draw(HEX, 32)}", "{t}")\n'),
    ("sendgrid", (t := "S" + "G." + draw(URL_SAFE, 22) + "." + draw(URL_SAFE, 43)), f'SendGridAPIClient("{t}")\n'),
    ("npm", (t := "np" + "m_" + draw(ALNUM, 36)), f"//registry.npmjs.org/:_authToken={t}\n"),
    ("pypi", (t := "pypi-" + "AgEIcHlwaS5vcmc" + draw(URL_SAFE, 150)), f"Uploading with {t}: 403\n"),
    ("docker hub", (t := "dckr" + "_pat_" + draw(URL_SAFE, 27)), f'echo "{t}" | docker login -u ci --password-stdin\n'),
    ("jfrog api key", (t := "AK" + "Cp" + draw(ALNUM, 69)), f'curl -H "X-JFrog-Art-Api: {t}" https://acme.jfrog.io\n'),
    ("jfrog reference token", (t := "cmVmdGtu" + "OjAxOjE3" + draw(ALNUM, 48)),
     f"docker login acme.jfrog.io -u ci --password {t}\n"),
    ("azure storage", (t := draw(B64, 86) + "=="),
     f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={t};EndpointSuffix=core.windows.net\n"),
    ("azure client secret", (t := draw(ALNUM, 3) + "8" + "Q~" + draw(URL_SAFE, 31)),
     f"ClientSecretCredential failed with secret {t}: AADSTS7000215\n"),
    ("jwt", (t := "ey" + "JhbGciOiJIUzI1NiJ9.ey" + draw(URL_SAFE, 60) + "." + draw(URL_SAFE, 43)),
     f"E       AssertionError: assert '{t}' == ''\n"),
    ("pem", (t := draw(B64, 64)), f"-----BEGIN RSA " f"PRIVATE KEY-----\n{t}\n{draw(B64, 40)}==\n-----END RSA PRIVATE KEY-----\n"),
    ("database url", (t := "Tr0ub4dor-" + draw(ALNUM, 8)), f"could not connect to postgresql://app:{t}@db.example.com/app\n"),
    ("basic auth url", (t := draw(ALNUM, 16)), f"fatal: unable to access 'https://deploy:{t}@git.example.com/a.git/'\n"),
    ("env secret key base", (t := draw(HEX, 128)), f"SECRET_KEY_BASE={t}\n"),
    ("env personal access token", (t := draw(ALNUM, 40)), f"RELEASE_PAT={t}\n"),
]  # fmt: skip

PERSONAL = [
    ("git log author", ["Jane Doe", "jane.doe@acme-corp.com"], "Author: Jane Doe <jane.doe@acme-corp.com>\n"),
    ("trailer", ["Maria García-López", "maria@example.org"], "Co-authored-by: Maria García-López <maria@example.org>\n"),
    ("lower-case committer", ["jdoe"], "Committer: jdoe <jdoe@build-01.acme-corp.local>\n"),
    ("git config", ["Jane Q. Doe"], '$ git config --global user.name "Jane Q. Doe"\n'),
    ("git config list", ["Jane Doe"], "user.name=Jane Doe\nuser.email=jane@example.com\n"),
    ("git blame", ["Jane Doe"], "^4f2a9c1 (Jane Doe 2026-03-02 10:00:00 +0100 12)     return a - b\n"),
    ("docstring author", ["John van der Berg"], '"""Billing.\n\nAuthor: John van der Berg\n"""\n'),
    ("pyproject", ["Jane Doe"], 'authors = [{name = "Jane Doe", email = "jane@example.com"}]\n'),
    ("phone e164", ["+14155550123"], "E       AssertionError: assert '+14155550123' == ''\n"),
    ("phone spaced", ["+44 20 7946 0958"], "Contact the on-call engineer at +44 20 7946 0958.\n"),
    ("phone us", ["(415) 555-0142", "415-555-0199"], 'call (415) 555-0142 or "415-555-0199"\n'),
    ("internal host", ["db.internal"], 'could not translate host name "db.internal" to address\n'),
    ("ci host", ["build-01.ci.acme-corp.com"], "unable to access 'https://build-01.ci.acme-corp.com/app.git/'\n"),
    ("host of a url with a login", ["db-01.int.acme-corp.com"], "redis://:hunter2@db-01.int.acme-corp.com:6379/0\n"),
    ("corp host", ["jenkins.corp"], "ssh: connect to host jenkins.corp port 22: Connection refused\n"),
]  # fmt: skip

CLEAN = {
    "pytest": ("tests/test_calc.py:9: AssertionError\nFAILED tests/test_calc.py::test_add - assert 0 == -2\n"
               "========================= 1 failed, 11 passed in 0.12s =========================\n"),
    "pattern constants": 'URL_PAT = "(?:{scheme}://)?{host}(?::{port})?"\nSEARCH_PAT = re.compile(r"^\\s+")\n',
    "code named for secrets": ('api_key = env.get("API_KEY")\npassword = settings.db_password\n'
                               'author_name: str = ""\nuser.name = 123\nparser.add_argument("--name", default="Jane")\n'),
    "numbers that are not phones": ("assert total == 4155550123\nE   assert [100, 200, 3000] == [100, 200, 300]\n"
                                    "np.array(['+1980-02-29 01:02:03'])\narray([+1.12345679+1.12345679j])\n"
                                    "@@ -12,7 +12,8 @@ uuid 123e4567-e89b-12d3-a456-426614174000 released 2026-03-02\n"),
    "public hosts": ("https://api.dev.example-vendor.com and https://files.pythonhosted.org/packages/x.whl\n"
                     "https://dev.mysql.com/doc/ https://stream-b.svc.rno2.c.example-cdn.net/v1\n"),
    "file names": "src/Button.local.tsx config/settings.internal.yaml site.corp.json icon@2x.png\n",
    "prose": ("The Author of a commit is set from user.name and user.email in git config.\n"
              "Signed-off-by trailers certify the origin. Ask the Release Manager before tagging.\n"),
    "git commands without values": '$ git config user.name\ngit commit --author="$AUTHOR" -m "release"\n',
    "already redacted": "Author: [REDACTED:name] <[REDACTED:email]> on [REDACTED:internal_host]\n",
}  # fmt: skip


def leaks(secret: str, text: str) -> bool:
    """Whether any 8-character slice of `secret` (all of it, if shorter) is in `text`."""
    width = min(8, len(secret))
    return any(secret[i : i + width] in text for i in range(len(secret) - width + 1))


@pytest.mark.parametrize(("secret", "text"), [c[1:] for c in VENDOR], ids=[c[0] for c in VENDOR])
def test_every_vendor_format_is_redacted(secret: str, text: str) -> None:
    assert secret in text

    out = redact(text)

    assert not leaks(secret, out), out
    assert "[REDACTED:" in out


@pytest.mark.parametrize(("spans", "text"), [c[1:] for c in PERSONAL], ids=[c[0] for c in PERSONAL])
def test_personal_data_and_internal_hosts_are_redacted(spans: list[str], text: str) -> None:
    out = redact(text)

    for span in spans:
        assert span not in out, out
    assert redact(out) == out


@pytest.mark.parametrize("text", CLEAN.values(), ids=CLEAN.keys())
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_a_name_goes_and_the_line_around_it_stays() -> None:
    text = "Signed-off-by: John Smith <john.smith@example.com>\nPlease ping Jane Doe <jane@example.com>.\n"

    assert redact(text) == (
        f"Signed-off-by: {placeholder('name')} <{placeholder('email')}>\n"
        f"Please ping {placeholder('name')} <{placeholder('email')}>.\n"
    )
