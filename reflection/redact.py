"""Strip secrets from text before it reaches a model, a log or a file.

`redact(text)` replaces each secret with a typed placeholder such as
`[REDACTED:openai_key]`, so a reader (human or model) still knows what was there.
`redact_data(obj)` does the same for every string inside nested dicts and lists, and
also redacts a string stored under a secret-looking key (`{"password": "..."}`).

The rules run in a fixed order, most specific first: a provider token inside an
`API_KEY=...` line is reported as that provider's key, not as a generic secret.
Placeholders never match any rule, so `redact(redact(x)) == redact(x)`.

Every pattern is compiled once and written to scan in linear time: a match may only
start at a token boundary (look-behind), and runs of one character class are
possessive, so a 5 MB log with long unbroken tokens costs one pass per rule. A rule
is skipped outright when its literal trigger does not occur in the text.

Generic `NAME=value` assignments are the fuzzy part. A value is redacted only when
the name ends in a secret word (`*_TOKEN`, `*_SECRET`, `PASSWORD`, `api_key`,
`client_secret`, ...; a bare `*_key` in lower-case code needs a qualifier such as
`api_` or `secret_`) and the value looks like a credential: at least 8 characters,
no whitespace, not a placeholder (`your-key-here`, `xxx`, `${VAR}`, `<...>`), not a
path, and, outside config syntax (env lines, YAML lines, quoted JSON keys, upper-case
names), not a plain identifier and not free of digits and symbols. So `MAX_TOKENS=1500`,
`password=settings.db_password` and `api_key: SecretStr` are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "placeholder", "redact", "redact_data"]

Replacer = Callable[[re.Match[str]], str]


def placeholder(kind: str) -> str:
    """The text that stands in for a secret of this kind."""
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True, slots=True)
class _Rule:
    """One kind of secret: where it is, and what replaces it."""

    kind: str
    pattern: re.Pattern[str]
    # Lower-case literals, one of which every match contains: a cheap pre-filter.
    triggers: tuple[str, ...]
    replace: Replacer

    def apply(self, text: str) -> str:
        return self.pattern.sub(self.replace, text)


def _splice(match: re.Match[str], group: str, kind: str) -> str:
    """The match with only `group` replaced by the placeholder."""
    whole = match.group(0)
    start, end = match.start(group) - match.start(), match.end(group) - match.start()
    return whole[:start] + placeholder(kind) + whole[end:]


def _replace_secret_group(kind: str) -> Replacer:
    """The default: the group named "secret" goes, or the whole match if there is none."""

    def replace(match: re.Match[str]) -> str:
        if "secret" in match.re.groupindex:
            return _splice(match, "secret", kind)
        return placeholder(kind)

    return replace


# --- values that are not secrets -------------------------------------------------------

_PLACEHOLDER_VALUE = re.compile(
    r"""^[\[<{$%]              # [REDACTED:..], <your-key>, {{ secret }}, ${VAR}, $VAR, %(x)s
    | ^(.)\1*$                 # one character repeated: xxxxxxxx, ********
    | x{4} | \*{3} | \.{3}     # masked or elided
    | your | (?:^|[-_.])here$
    | change[-_]?me | replace[-_]?me | placeholder | example | dummy | redacted
    | ^(?:none|null|nil|true|false|undefined)$
    """,
    re.IGNORECASE | re.VERBOSE,
)
_ENV_REFERENCE = re.compile(r"[A-Z]+(?:_[A-Z0-9]+)+")  # "OPENAI_API_KEY" names a variable
_PATH = re.compile(r"(?:~|\.\.?)?/(?:[\w.@-]+/)*[\w.@-]*|[A-Za-z]:\\[^\s]*")
_CODE_REFERENCE = re.compile(r"[A-Za-z_]+(?:\.[A-Za-z_]+)*")  # settings.db_password, SecretStr
_DIGIT_OR_SYMBOL = re.compile(r"[^A-Za-z_.\-]")


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER_VALUE.search(value) or _ENV_REFERENCE.fullmatch(value))


def _credential_like(value: str, *, quoted: bool, config: bool, env_line: bool) -> bool:
    """Whether a value assigned to a secret-named key is worth hiding."""
    if len(value) < 8 or any(ch.isspace() for ch in value):
        return False  # too short to be a credential, or prose such as an error message
    if _is_placeholder(value) or _PATH.fullmatch(value):
        return False
    if not quoted and _CODE_REFERENCE.fullmatch(value) and (not env_line or "." in value):
        return False  # a variable, attribute or type, not a literal
    return config or bool(_DIGIT_OR_SYMBOL.search(value))


# --- which names hold secrets ----------------------------------------------------------

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "pass"})
_TOKEN_WORDS = frozenset({"token"})
_SECRET_WORDS = frozenset({"secret", "credential", "credentials", "apikey"})
# `cache_key`, `sort_key`, `primary_key` are code; these qualifiers make a `*_key` secret.
_KEY_QUALIFIERS = frozenset(
    {
        "api", "secret", "private", "access", "signing", "sign", "encryption", "master",
        "auth", "client", "app", "license", "service", "account", "webhook", "hmac",
        "session", "admin", "deploy", "consumer", "subscription", "integration", "ssh",
        "gpg", "pgp", "aes", "rsa", "jwt", "cipher", "shared", "root", "write", "ingest",
    }
)  # fmt: skip


def _secret_kind(name: str) -> str | None:
    """The placeholder kind for a value stored under `name`, or None if not secret."""
    words = [word.lower() for word in _WORD.findall(name)]
    if not words:
        return None
    last, shouting = words[-1], name.upper() == name
    if last in _PASSWORD_WORDS:
        return "password" if last != "pass" or len(words) > 1 else None
    if last in _TOKEN_WORDS:
        return "token"
    if last in _SECRET_WORDS:
        return "secret"
    if last == "key" and len(words) > 1 and (shouting or words[-2] in _KEY_QUALIFIERS):
        return "secret"
    return None


# --- generic assignments ---------------------------------------------------------------

_ASSIGNMENT = re.compile(
    r"""(?<![\w.-])
    (?P<name>[\w.-]*?(?i:key|token|secret|passw(?:or)?d|pwd|pass(?:phrase)?|credentials?))
    (?P<kq>\\?["']?)
    (?P<sep>[ \t]*[:=][ \t]*)
    (?![=:])
    (?: (?P<vq>\\?["'])(?P<qv>[^"'\\\n]++)(?P=vq)
      | (?P<uv>[^\s"'`,;&()<>\[\]{}|\\]++) )
    """,
    re.VERBOSE,
)
_ENV_LINE_PREFIXES = frozenset({"", "export", "-"})


def _line_prefix(match: re.Match[str]) -> str | None:
    """What precedes the match on its line, if that is short; None otherwise."""
    start = match.start()
    head = match.string[max(0, start - 16) : start]
    newline = head.rfind("\n")
    if newline < 0 and start > 16:
        return None
    return head[newline + 1 :].strip()


def _replace_assignment(match: re.Match[str]) -> str:
    name = match["name"]
    kind = _secret_kind(name)
    if kind is None:
        return match[0]
    quoted = match["qv"] is not None
    value = match["qv"] if quoted else match["uv"]
    follows = match.string[match.end() : match.end() + 1]
    if not quoted and (value.lower() == name.lower() or follows in ("(", "[")):
        return match[0]  # `token=token`, `password=get_password(...)`: code, not data
    at_line_start = _line_prefix(match) in _ENV_LINE_PREFIXES
    config = bool(match["kq"]) or name.isupper() or name.startswith("-") or at_line_start
    env_line = at_line_start and match["sep"] == "="
    if not _credential_like(value, quoted=quoted, config=config, env_line=env_line):
        return match[0]
    return _splice(match, "qv" if quoted else "uv", kind)


# --- headers, hosts, addresses ---------------------------------------------------------

_AUTH_SCHEMES = {"bearer": "bearer_token", "basic": "basic_auth"}


def _replace_authorization(match: re.Match[str]) -> str:
    secret, scheme = match["secret"], (match["scheme"] or "").lower()
    if _is_placeholder(secret) or secret.isalpha() and (secret.islower() or not scheme):
        return match[0]  # "Authorization: required", "Basic authentication": prose
    return _splice(match, "secret", _AUTH_SCHEMES.get(scheme, "authorization"))


def _replace_bare_bearer(match: re.Match[str]) -> str:
    if not any(ch.isdigit() for ch in match["secret"]):
        return match[0]  # "Bearer authentication-required": words, not a token
    return _splice(match, "secret", "bearer_token")


def _replace_openai(match: re.Match[str]) -> str:
    if re.fullmatch(r"[a-z]+(?:-[a-z]+)*", match["body"]):
        return match[0]  # "sk-learn-compatible-estimators": kebab-case words
    return placeholder("openai_key")


_NOT_MAIL_TLDS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp"})  # icon@2x.png


def _replace_email(match: re.Match[str]) -> str:
    tld = match["domain"].rsplit(".", 1)[-1]
    if not (tld.isalpha() and len(tld) >= 2) or tld.lower() in _NOT_MAIL_TLDS:
        return match[0]
    after = match.string[match.end() : match.end() + 2]
    if after.startswith(":") and after[1:2] not in ("", " ", "\t", "\n"):
        return match[0]  # git@github.com:org/repo.git is an ssh remote, not an address
    return placeholder("email")


def _replace_private_ip(match: re.Match[str]) -> str:
    if any(int(octet) > 255 for octet in match[0].split(".")):
        return match[0]
    return placeholder("private_ip")


# Attribute access such as `threading.local` or `self.internal` looks like a host name.
_CODE_RECEIVERS = frozenset({"self", "cls", "this", "threading", "super", "ctx", "obj"})


def _replace_internal_host(match: re.Match[str]) -> str:
    first_label = match[0].split(".", 1)[0].lower()
    if first_label in _CODE_RECEIVERS or match.string[match.end() : match.end() + 1] == "(":
        return match[0]
    return placeholder("internal_host")


# --- the rules, most specific first ----------------------------------------------------

_B = r"(?<![\w-])"  # a token starts here: not inside a word or a dashed name


def _rule(
    kind: str, pattern: str, triggers: tuple[str, ...], replace: Replacer | None = None
) -> _Rule:
    return _Rule(kind, re.compile(pattern), triggers, replace or _replace_secret_group(kind))


# Base64 lines, headers (Proc-Type: 4,ENCRYPTED) and escaped newlines, but no run of
# five dashes: the body ends at the next BEGIN or END line, so a scan never restarts.
_PEM_BODY = r"(?:[A-Za-z0-9+/=\s\\:,.]++|-(?!----))*+"
_RULES: tuple[_Rule, ...] = (
    _rule(
        "private_key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
        + _PEM_BODY
        + r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----",
        ("private key",),
    ),
    # A block cut off before its END line (a truncated log): hide the base64 lines.
    _rule(
        "private_key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?:\s|\\[rn])+[A-Za-z0-9+/=]{16,}+)*",
        ("private key",),
    ),
    _rule(
        "slack_webhook",
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9/_-]+)",
        ("hooks.slack.com",),
    ),
    _rule("jwt", _B + r"eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+", ("eyj",)),
    _rule("anthropic_key", _B + r"sk-ant-[A-Za-z0-9_-]{20,}+", ("sk-ant-",)),
    _rule("openai_key", _B + r"sk-(?P<body>[A-Za-z0-9_-]{20,}+)", ("sk-",), _replace_openai),
    _rule(
        "github_token",
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}+|github_pat_[A-Za-z0-9_]{22,}+)",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _rule("gitlab_token", _B + r"glpat-[A-Za-z0-9_-]{20,}+", ("glpat-",)),
    _rule("slack_token", _B + r"(?:xox[abeprs]|xapp)-[A-Za-z0-9-]{10,}+", ("xox", "xapp-")),
    _rule("google_api_key", _B + r"AIza[0-9A-Za-z_-]{35}(?![\w-])", ("aiza",)),
    _rule(
        "stripe_key",
        _B + r"(?:(?:sk|rk)_(?:live|test)|pk_live)_[A-Za-z0-9]{10,}+",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_"),
    ),
    _rule(
        "aws_access_key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        ("akia", "asia", "abia", "acca"),
    ),
    _rule(
        "aws_secret_key",
        r"(?i:aws[_-]?secret[_-]?(?:access[_-]?)?key)[^\n]{0,40}?"
        r"(?<![A-Za-z0-9/+])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("aws",),
    ),
    _rule(
        "url_credentials",
        r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]*+://"
        r"(?P<secret>[^\s/?#@:'\"<>\[\]\\]++:[^\s/?#@'\"<>\[\]\\]++"
        r"|(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{20,}+)@",
        ("://",),
    ),
    _rule(
        "authorization",
        r"(?i:(?:proxy-)?authorization)\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?[ \t]*"
        r"(?:(?P<scheme>(?i:bearer|basic|token|digest|bot|negotiate|apikey))[ \t]+)?"
        r"(?P<secret>[^\s\"'\\,;]{8,}+)",
        ("authorization",),
        _replace_authorization,
    ),
    _rule(
        "bearer_token",
        _B + r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}+=*)",
        ("bearer",),
        _replace_bare_bearer,
    ),
    _rule(
        "basic_auth",  # curl -u user:password
        r"(?<![\w-])(?:-u|--user)(?:[ \t]+|=)[\"']?(?P<secret>[^\s\"':@\[]+:[^\s\"']+)",
        ("-u", "--user"),
    ),
    _Rule(
        "secret",
        _ASSIGNMENT,
        ("key", "token", "secret", "pass", "pwd", "credential"),
        _replace_assignment,
    ),
    _rule(
        "email",
        r"(?<![\w.+%-])[A-Za-z0-9._%+-]++@(?P<domain>[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)+)",
        ("@",),
        _replace_email,
    ),
    _rule(
        "private_ip",
        r"(?<![\w.])(?:10(?:\.\d{1,3}){3}|172\.(?:1[6-9]|2\d|3[01])(?:\.\d{1,3}){2}"
        r"|192\.168(?:\.\d{1,3}){2})(?!\d|\.\d)",
        ("10.", "172.", "192.168."),
        _replace_private_ip,
    ),
    _rule(
        "internal_host",
        r"(?<![\w.-])(?:[A-Za-z0-9-]++\.)+(?i:internal|localdomain|local|corp|lan|intranet)"
        r"(?![\w-]|\.[A-Za-z0-9])",
        (".internal", ".local", ".corp", ".lan", ".intranet"),
        _replace_internal_host,
    ),
)

KINDS: frozenset[str] = frozenset(
    {rule.kind for rule in _RULES} | {"password", "token", "bearer_token", "basic_auth"}
)
"""Every kind a placeholder can name."""


def redact(text: str) -> str:
    """`text` with every secret replaced by `[REDACTED:<kind>]`; idempotent."""
    lowered = text.lower()
    for rule in _RULES:
        if any(trigger in lowered for trigger in rule.triggers):
            text = rule.apply(text)
    return text


def redact_data(obj: Any) -> Any:
    """A copy of a JSON-like value with every string redacted; keys are kept.

    Mappings become dicts, lists and tuples keep their type, other values are returned
    as they are. A string under a secret-named key (`password`, `apiKey`, ...) is
    replaced whole when it looks like a credential, since the key is its only context.
    """
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {key: _redact_entry(key, value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [redact_data(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(redact_data(item) for item in obj)
    return obj


def _redact_entry(key: Any, value: Any) -> Any:
    if isinstance(key, str) and isinstance(value, str):
        kind = _secret_kind(key)
        if kind and _credential_like(value, quoted=True, config=True, env_line=False):
            return placeholder(kind)
    return redact_data(value)
