"""Strip secrets from text before it reaches a model, a log or a file.

`redact(text)` replaces each secret with a typed placeholder such as
`[REDACTED:openai_key]`, so a reader (human or model) still knows what was there.
`redact_data(obj)` does the same for every string inside nested dicts and lists, and
also redacts a string stored under a secret-looking key (`{"password": "..."}`).

The rules run in a fixed order, most specific first: a provider token inside an
`API_KEY=...` line is reported as that provider's key, not as a generic secret.
Placeholders never match any rule, so `redact(redact(x)) == redact(x)`.

A value a rule hides in one place is hidden wherever else it stands in the same text (or
the same `redact_data` object): the password of a config line also leaves the assertion
message that quotes it. Only a value specific enough goes so: short values and plain
words (`password: "production"`) could be ordinary text elsewhere, and personal data is
already found by its form (addresses, numbers, hosts) or, for names, only by its place.

Every pattern is compiled once and written to scan in linear time: a match may only
start at a token boundary (look-behind), and runs of one character class are
possessive, so a 5 MB log with long unbroken tokens costs one pass per rule. A rule
is skipped outright when its literal trigger does not occur in the text.

A provider's token with a prefix of its own (`ghp_`, `hf_`, `npm_`, `SG.`, ...) is
found wherever it stands. Anything else is found by where it stands: after an
`Authorization:` scheme or in a Cookie header, as the user:password of a URL, as the
password of a connection string, a netrc entry or a command (`docker login -p`), as
the signature of a signed URL, or as the value of a secret-named key or flag. Hashes,
ids and base64 data elsewhere are left alone, because nothing says they are secret.

Personal data and internal infrastructure go the same way: e-mail addresses, phone
numbers, private IP addresses, internal host names (`*.internal`, `*.corp`, `*.local`,
or a label such as `ci` or `int` inside a company's domain), and people's names where
their place says they are one (before an address, in a commit's author and trailer
lines, in git's config, in `git blame`, under an author key).

Generic `NAME=value` assignments (and `--name value` flags) are the fuzzy part. A
value is redacted only when the name ends in a secret word (`*_TOKEN`, `*_SECRET`,
`PASSWORD`, `api_key`, `client_secret`, ...; a bare `*_key` in lower-case code needs a
qualifier such as `api_` or `secret_`) and the value looks like a credential: at least
8 characters, no whitespace, not a placeholder (`your-key-here`, `xxx`, `${VAR}`,
`<...>`), and either random-looking (mixed case throughout, few repeated characters)
or not a path or key file and, outside config syntax (env lines, YAML lines, quoted
JSON keys, upper-case names), not a plain identifier and not free of digits and
symbols. So `MAX_TOKENS=1500`, `password=settings.db_password`, `api_key: SecretStr`
and `--password PASSWORD` are left alone.
"""

from __future__ import annotations

import base64
import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reflection.personal_numbers import card_number, iban, national_id
from reflection.prose_names import name_words
from reflection.redaction_policy import current_policy
from reflection.secret_values import known_secrets, placeholder, trie_pattern

__all__ = ["KINDS", "TOKEN_KINDS", "looks_like_credential", "placeholder", "redact", "redact_data", "secret_name",
           "tokens_in"]

Replacer = Callable[[re.Match[str]], str]


@dataclass(slots=True)
class _Rule:
    """One kind of secret: where it is, and what replaces it.

    Its patterns are compiled the first time a text triggers the rule: most texts trigger
    none, and compiling all of them would cost every fresh process about 13 ms.
    """

    kind: str
    pattern: re.Pattern[str] | str
    # Lower-case literals, one of which every match contains: a cheap pre-filter.
    triggers: tuple[str, ...]
    replace: Replacer
    # A search every text with a match also matches, far cheaper than the pattern's own
    # (for a pattern that tries each word, where the trigger is common).
    needs: re.Pattern[str] | str | None = None

    def compile(self) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
        """The rule's patterns, compiled once (two threads may both compile: the same result)."""
        if isinstance(self.pattern, str):
            self.pattern = re.compile(self.pattern)
        if isinstance(self.needs, str):
            self.needs = re.compile(self.needs)
        return self.pattern, self.needs

    def apply(self, text: str, found: dict[str, str]) -> str:
        """`text` with the rule's secrets replaced; each value replaced is added to `found`."""
        pattern, needs = self.compile()
        if needs is not None and needs.search(text) is None:
            return text

        def replace(match: re.Match[str]) -> str:
            new = self.replace(match)
            if new != match[0]:
                _note(match[0], new, found)
            return new

        return pattern.sub(replace, text)


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
    | change[-_]?me | replace[-_]?me | placeholder | redacted
    | ^(?:none|null|nil|true|false|undefined)$
    """,
    re.IGNORECASE | re.VERBOSE,
)
# A value made only of these words is a placeholder (`example-key`, `dummy_token`,
# `YOUR_API_KEY_HERE`); "example" or "dummy" inside a longer value is not enough: a real
# key may hold them (`...EXAMPLEKEY9`), and a planted one would pass for a sample.
_PLACEHOLDER_WORDS = frozenset(
    {"example", "examples", "dummy", "sample", "fake", "demo", "test", "testing", "placeholder", "your", "my",
     "our", "the", "a", "some", "not", "real", "key", "keys", "api", "token", "secret", "password", "pass",
     "value", "here", "goes", "insert", "put", "replace", "change", "me", "foo", "bar", "baz", "access", "id",
     "client", "app", "private", "public", "sk", "pk", "xxx"}
)  # fmt: skip
_PLACEHOLDER_STRONG = frozenset({"example", "examples", "dummy", "sample", "fake", "demo", "placeholder"})
# The example credentials of vendors' documentation: whole values anyone may print.
_DOCUMENTED_EXAMPLES = frozenset({"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"})
_ENV_REFERENCE = re.compile(r"[A-Z]+(?:_[A-Z0-9]+)+")  # "OPENAI_API_KEY" names a variable
_PATH = re.compile(r"(?:~|\.\.?)?/(?:[\w.@-]+/)*[\w.@-]*|[A-Za-z]:\\[^\s]*")
# `--ssh-key deploy_key.pub`, `PRIVATE_KEY=server.pem`: where the secret is, not the secret.
_KEY_FILE = re.compile(
    r"[\w.-]+\.(?:pem|pub|key|crt|cer|der|p12|pfx|jks|gpg|asc|json|ya?ml|txt|env)"
)
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_-]+")
_CODE_REFERENCE = re.compile(r"[A-Za-z_]+(?:\.[A-Za-z_]+)*")  # settings.db_password, SecretStr
_DIGIT_OR_SYMBOL = re.compile(r"[^A-Za-z_.\-]")


def _is_placeholder(value: str) -> bool:
    if _PLACEHOLDER_VALUE.search(value) or _ENV_REFERENCE.fullmatch(value) or value in _DOCUMENTED_EXAMPLES:
        return True
    words = {word.lower() for word in _WORD.findall(value)}
    return bool(words & _PLACEHOLDER_STRONG) and words <= _PLACEHOLDER_WORDS and not re.search(r"[^\w.-]", value)


def _entropy(text: str) -> float:
    """Shannon entropy of the characters of `text`, in bits per character."""
    counts = Counter(text).values()
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts)


def _looks_random(value: str) -> bool:
    """A generated token, even one that no digit gives away or that starts like a path.

    HuggingFace tokens and many API secrets are mixed-case letters; base64 may start
    with "/". A camelCase name has few capitals and repeats its letters, a path has
    dots or lower-case words; a generated token has about as many capitals as small
    letters and rarely repeats one.
    """
    if len(value) < 20 or not _TOKEN_CHARS.fullmatch(value):
        return False  # short, or has dots: `self.AuthProvider` is code
    upper = sum(ch.isupper() for ch in value)
    lower = sum(ch.islower() for ch in value)
    return min(upper, lower) >= len(value) / 4 and _entropy(value) >= 3.5


def _credential_like(value: str, *, quoted: bool, config: bool, env_line: bool) -> bool:
    """Whether a value assigned to a secret-named key is worth hiding."""
    if len(value) < 8 or any(ch.isspace() for ch in value):
        return False  # too short to be a credential, or prose such as an error message
    if _is_placeholder(value):
        return False
    if _looks_random(value):
        return True
    if _PATH.fullmatch(value) or _KEY_FILE.fullmatch(value):
        return False
    if not quoted and _CODE_REFERENCE.fullmatch(value) and (not env_line or "." in value):
        return False  # a variable, attribute or type, not a literal
    return config or bool(_DIGIT_OR_SYMBOL.search(value))


# --- which names hold secrets ----------------------------------------------------------

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "pass"})
_TOKEN_WORDS = frozenset({"token"})
# `GH_PAT`, `AZURE_DEVOPS_EXT_PAT`: a personal access token, named so in upper case only
# (a lower-case `pat` is as often a regex pattern).
_SHOUTED_TOKEN_WORDS = frozenset({"pat"})
# `SECRET_KEY_BASE`, `SIGNING_KEY_HEX`: the encoding after the name does not make it less secret.
_ENCODING_SUFFIX = re.compile(r"[_.-](?i:base(?:64)?|b64|hex)$")
_SECRET_WORDS = frozenset({"secret", "credential", "credentials", "apikey"})
# `cache_key`, `sort_key`, `primary_key` are code; these qualifiers make a `*_key` secret.
_KEY_QUALIFIERS = frozenset(
    {
        "api", "secret", "private", "access", "signing", "sign", "encryption", "master",
        "auth", "client", "app", "license", "service", "account", "webhook", "hmac",
        "session", "admin", "deploy", "consumer", "subscription", "integration", "ssh",
        "gpg", "pgp", "aes", "rsa", "jwt", "cipher", "shared", "root", "write", "ingest",
        "functions",
    }
)  # fmt: skip


@functools.lru_cache(maxsize=4096)  # keys repeat: every message of a conversation has the same ones
def _secret_kind(name: str) -> str | None:
    """The placeholder kind for a value stored under `name`, or None if not secret."""
    shouting = name.upper() == name
    words = [word.lower() for word in _WORD.findall(_ENCODING_SUFFIX.sub("", name))]
    if not words:
        return None
    last = words[-1]
    if last in _PASSWORD_WORDS:
        return "password" if last != "pass" or len(words) > 1 else None
    if last.endswith(("password", "passwd")):  # PGPASSWORD, dbpassword: one word
        return "password"
    if last in _TOKEN_WORDS or shouting and last in _SHOUTED_TOKEN_WORDS:
        return "token"
    if last in _SECRET_WORDS:
        return "secret"
    if last == "key" and len(words) > 1 and (shouting or words[-2] in _KEY_QUALIFIERS):
        return "secret"
    return None


# --- generic assignments ---------------------------------------------------------------

_ASSIGNMENT = re.compile(
    r"""(?<![\w.-])
    (?P<name>[\w.-]*?(?:(?i:key|token|secret|passw(?:or)?d|pwd|pass(?:phrase)?|credentials?)
                        (?:_(?i:base(?:64)?|b64|hex))?|PAT))
    (?P<kq>\\?["']?)\]?
    (?P<sep>[ \t]*(?::=|[:=])[ \t]*)
    (?![=:])
    (?: (?P<vq>\\?["'])(?P<qv>[^"'\\\n]++)(?P=vq)
      | (?P<uv>[^\s"'`,;&()<>\[\]{}|\\]++) )
    """,
    re.VERBOSE,
)
# What every _ASSIGNMENT match holds: its name's secret word, then the separator. "pass"
# and "pat" are in "passed" and "path", and _ASSIGNMENT tries each word of such a text.
_ASSIGNED = re.compile(
    r"""(?:(?i:key|token|secret|passw(?:or)?d|pwd|pass(?:phrase)?|credentials?)"""
    r"""(?:_(?i:base(?:64)?|b64|hex))?|PAT)\\?["']?\]?[ \t]*[:=]"""
)
_ENV_LINE_PREFIXES = frozenset({"", "export", "-"})
_PAT_VALUE = re.compile(r"[A-Za-z0-9_-]{20,}")  # what a personal access token is made of


# `--token VALUE`: a flag and its value, apart. The value is judged as code would be
# (no config syntax vouches for it), so `--password is required` stays prose.
_FLAG_VALUE = re.compile(
    r"""(?<![\w-])
    (?P<name>--?[\w-]*?(?i:key|token|secret|passw(?:or)?d|pwd|passphrase|credentials?))
    [ \t]++
    (?: (?P<vq>["'])(?P<qv>[^"'\s]++)(?P=vq)
      | (?P<uv>(?!--)[^\s"'`,;&()<>\[\]{}|\\]++) )
    """,
    re.VERBOSE,
)
_SHORT_FLAG = re.compile(r"-[A-Za-z][\w-]*")


def _replace_flag_value(match: re.Match[str]) -> str:
    kind = _secret_kind(match["name"])
    quoted = match["qv"] is not None
    value = match["qv"] if quoted else match["uv"]
    if kind is None or "=" in value.rstrip("="):  # `--secret id=npmrc,src=...` names one
        return match[0]
    if _SHORT_FLAG.fullmatch(value) and not _looks_random(value):
        return match[0]  # `--token -v`: the next flag; a token may start with "-" too
    if not _credential_like(value, quoted=quoted, config=False, env_line=False):
        return match[0]
    return _splice(match, "qv" if quoted else "uv", kind)


def _replace_named_value(match: re.Match[str]) -> str:
    """`- name: API_TOKEN` / `value: ...`: the value under a secret-looking name."""
    kind = _secret_kind(match["name"])
    value = match["secret"]
    if kind is None or not _credential_like(value, quoted=True, config=True, env_line=False):
        return match[0]
    return _splice(match, "secret", kind)


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
    if name.endswith("PAT") and not _PAT_VALUE.fullmatch(value):
        return match[0]  # `URL_PAT = "(?:...)"`: a constant named for a pattern
    at_line_start = _line_prefix(match) in _ENV_LINE_PREFIXES
    config = bool(match["kq"]) or name.isupper() or name.startswith("-") or at_line_start
    # `API_KEY=value` tight against an upper-case name is a shell or env assignment even
    # mid-line (`docker run -e`, `env X=1 cmd`): its bare word is a literal, not code.
    env_line = match["sep"] == "=" and (at_line_start or name.isupper())
    if not _credential_like(value, quoted=quoted, config=config, env_line=env_line):
        return match[0]
    return _splice(match, "qv" if quoted else "uv", kind)


# --- headers, hosts, addresses ---------------------------------------------------------

_AUTH_SCHEMES = {"bearer": "bearer_token", "basic": "basic_auth"}


def _replace_authorization(match: re.Match[str]) -> str:
    secret, scheme = match["secret"], (match["scheme"] or "").lower()
    word = secret.rstrip(".:!?)")
    if _is_placeholder(secret) or word.isalpha() and (word.islower() or not scheme):
        return match[0]  # "Authorization: required.", "Basic authentication": prose
    return _splice(match, "secret", _AUTH_SCHEMES.get(scheme, "authorization"))


def _replace_bare_bearer(match: re.Match[str]) -> str:
    secret = match["secret"]
    if not any(ch.isdigit() for ch in secret) and not _looks_random(secret):
        return match[0]  # "Bearer authentication-required": words, not a token
    return _splice(match, "secret", "bearer_token")


def _replace_openai(match: re.Match[str]) -> str:
    if re.fullmatch(r"[a-z]+(?:-[a-z]+)*", match["body"]):
        return match[0]  # "sk-learn-compatible-estimators": kebab-case words
    return placeholder("openai_key")


def _replace_encoded_login(match: re.Match[str]) -> str:
    """`"auth": "<base64>"` (docker config.json, .npmrc `_auth`) when it hides `user:pass`."""
    try:
        login = base64.b64decode(match["secret"], validate=True).decode()
    except ValueError:  # not base64, or not text: some other value
        return match[0]
    user, colon, password = login.partition(":")
    if not (user and colon and password and login.isprintable()):
        return match[0]
    return _splice(match, "secret", "basic_auth")


# Cookie attributes say how to keep the cookie, not what is in it.
_COOKIE_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "priority", "version", "comment"}
)
_COOKIE_PAIR = re.compile(r"(?P<name>[^\s=;,]++)=(?P<value>[^\s;,\"']++)")


def _replace_cookies(match: re.Match[str]) -> str:
    """A session id is a password with an expiry date: hide every value of a Cookie header."""

    def one(pair: re.Match[str]) -> str:
        name, value = pair["name"], pair["value"]
        if name.lower() in _COOKIE_ATTRIBUTES or len(value) < 8 or _is_placeholder(value):
            return pair[0]
        return f"{name}={placeholder('cookie')}"

    start = match.start("secret") - match.start()
    return match[0][:start] + _COOKIE_PAIR.sub(one, match["secret"])


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


# --- people and machines --------------------------------------------------------------
#
# A name is only recognised where it stands for a person by position: before an e-mail
# address, in a commit's author or trailer lines, in git's own config, in `git blame`, and
# under an author key. Capitalised words elsewhere are left alone: "Release Manager" is
# prose, and a false name costs a reader more than it protects.

_CAP, _SMALL = "A-ZÀ-ÖØ-Þ", "a-zß-öø-ÿ"
_NAME_WORD = rf"[{_CAP}][{_SMALL}]+(?:[-'’][{_CAP}]?[{_SMALL}]+)*"  # Jane, García-López, O'Neil
_NAME_LINK = rf"[{_CAP}]\.|(?:van|von|der|den|de|del|della|di|da|du|dos|la|le|bin|al|ter|ten)(?![\w.-])"
_PERSON = rf"{_NAME_WORD}(?:[ \t]+(?:{_NAME_LINK}|{_NAME_WORD})){{0,3}}?[ \t]+{_NAME_WORD}"
_AT_ADDRESS = r"(?=[ \t]*<(?:[^<>\s@]++@[^<>\s]++|\[REDACTED:email\])>)"  # ` <jane@x>` follows
# Lines that name a person: trailers, `git log`/`git show` headers, raw commit objects.
_PERSON_LABEL = (
    r"(?im:^[ \t>#*/-]*:?(?:(?:co-authored|signed-off|reviewed|acked|tested|reported|suggested|helped)-by"
    r"|authors?|committer|tagger|maintainers?)(?:[ \t]*:[ \t]*|[ \t]+))"
)
# A quoted name, up to its closing quote or an address: `"Jane Doe <jane@x>"`.
_QUOTED = r"(?P<q>[\"'])(?P<secret>{first}[^\"'\n<]{{0,79}}?)[ \t]*(?=<|(?P=q))"
_QUOTED_NAME = _QUOTED.format(first=r"[^\s\"'$%{<\[]")  # not `"$AUTHOR"`, `"{{ author }}"`
_QUOTED_CAPITALISED = _QUOTED.format(first=f"[{_CAP}]")


def _replace_unquoted_or_quoted(kind: str) -> Replacer:
    """The quoted value (group "qv") or the bare one ("uv"), whichever matched."""

    def replace(match: re.Match[str]) -> str:
        return _splice(match, "qv" if match["qv"] is not None else "uv", kind)

    return replace


def _checked(kind: str, check: Callable[[str], bool]) -> Replacer:
    """The whole match, when `check` says it is one."""

    def replace(match: re.Match[str]) -> str:
        return placeholder(kind) if check(match[0]) else match[0]

    return replace


def _replace_phone(match: re.Match[str]) -> str:
    digits = sum(ch.isdigit() for ch in match[0])
    return placeholder("phone") if 8 <= digits <= 15 else match[0]


# Labels of a host name that say it is inside a company: `build-01.ci.acme-corp.com`.
# Not `dev`, `prod`, `staging` or `svc`: public APIs use them too (`api.dev.<vendor>.com`).
_INTERNAL_LABELS = frozenset(
    {"internal", "intranet", "corp", "int", "priv", "private", "lan", "local", "ci", "build", "builds",
     "jenkins", "vpn", "dmz", "mgmt", "infra", "onprem"}
)  # fmt: skip
# Public suffixes a company's hosts end in; not `.py`, `.sh`, `.pl`, `.rs`, `.md`: file names.
_HOST_SUFFIXES = ("com", "net", "org", "io", "dev", "app", "ai", "cloud", "co", "tech", "info", "biz",
                  "us", "uk", "de", "fr", "nl", "eu", "ca", "au", "jp", "ch", "se", "no", "fi", "dk",
                  "es", "it", "be", "at", "cz", "nz", "ie", "sg")  # fmt: skip
_LABEL_NUMBER = re.compile(r"-?\d+$")  # build-01, ci2


# Environments a numbered machine lives in: `db01.prod.acme-corp.com` (not `api.dev.<vendor>.com`).
_ENVIRONMENT_LABELS = frozenset({"prod", "production", "staging", "stage", "stg", "dev", "qa", "uat", "test"})
_MACHINE = re.compile(r"[a-z]+-?\d+[a-z]?")  # db01, web-3, node12a


def _replace_labelled_host(match: re.Match[str]) -> str:
    """A host inside a company's domain by its labels: an internal one before the domain
    (`build-01.ci.acme-corp.com`, `jenkins.acme-corp.com`, `intranet.acme.com`), or a
    numbered machine in an environment (`db01.prod.acme-corp.com`)."""
    labels = match[0].lower().split(".")
    inside = labels[:-2]
    internal = any(_LABEL_NUMBER.sub("", label) in _INTERNAL_LABELS for label in inside)
    machine = len(inside) >= 2 and _MACHINE.fullmatch(inside[0]) and _ENVIRONMENT_LABELS & set(inside[1:])
    if not (internal or machine):
        return match[0]
    return _replace_internal_host(match)


# --- the rules, most specific first ----------------------------------------------------

_B = r"(?<![\w-])"  # a token starts here: not inside a word or a dashed name


def _rule(
    kind: str, pattern: str, triggers: tuple[str, ...], replace: Replacer | None = None, needs: str | None = None
) -> _Rule:
    replace = replace or _replace_secret_group(kind)
    return _Rule(kind, pattern, triggers, _keeping_names(replace) if kind == "name" else replace, needs)


def _keeping_names(replace: Replacer) -> Replacer:
    """`replace`, leaving a name the project's `redaction.keepNames` lets stand."""

    def keeping(match: re.Match[str]) -> str:
        new = replace(match)
        policy = current_policy()
        if policy is None or not policy.keep_names or new == match[0]:
            return new
        before, _, after = new.partition(placeholder("name"))
        return match[0] if policy.keeps(match[0][len(before) : len(match[0]) - len(after)]) else new

    return keeping


def _replace_token(kind: str) -> Replacer:
    """The whole match, unless it starts inside a longer word.

    The same test as the look-behind `_B`, made after the match: a pattern that starts
    with its literal prefix lets `re` jump from one occurrence to the next.
    """

    def replace(match: re.Match[str]) -> str:
        before = match.string[match.start() - 1 : match.start()]
        if before and (before.isalnum() or before in "_-"):
            return match[0]
        return placeholder(kind)

    return replace


# Tokens a provider marks with a prefix of its own, found wherever they stand:
# (kind, the token, lower-case triggers).
_PREFIXED_TOKENS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("huggingface_token", r"(?:hf_|api_org_)[A-Za-z0-9]{30,}+", ("hf_", "api_org_")),
    ("npm_token", r"npm_[A-Za-z0-9]{36,}+", ("npm_",)),
    ("sendgrid_key", r"SG\.[\w-]{16,}+\.[\w-]{16,}+", ("sg.",)),
    ("twilio_key", r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])", ("sk",)),
    ("pypi_token", r"pypi-AgE[\w-]{50,}+", ("pypi-age",)),
    ("google_oauth", r"(?:GOCSPX-[\w-]{24,}+|ya29\.[\w-]{20,}+)", ("gocspx-", "ya29.")),
    ("webhook_secret", r"whsec_[A-Za-z0-9+/=]{24,}+", ("whsec_",)),
    ("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}", ("_v1_",)),
    ("dockerhub_token", r"dckr_pat_[\w-]{24,}+", ("dckr_pat_",)),
    ("databricks_token", r"dapi[a-f0-9]{32}(?:-\d)?+", ("dapi",)),
    ("shopify_token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
     ("shpat_", "shpss_", "shpca_", "shppa_")),
    ("vault_token", r"hv[sbr]\.[\w-]{24,}+", ("hvs.", "hvb.", "hvr.")),
    ("grafana_token", r"(?:glsa_[A-Za-z0-9]{32}_[a-fA-F0-9]{8}|glc_[A-Za-z0-9+/]{32,}+=*+)",
     ("glsa_", "glc_")),
    ("sentry_token", r"sntry[su]_[\w+/=]{40,}+", ("sntry",)),
    ("replicate_token", r"r8_[A-Za-z0-9]{37,}+", ("r8_",)),
    ("groq_key", r"gsk_[A-Za-z0-9]{48,}+", ("gsk_",)),
    ("linear_key", r"lin_(?:api|oauth)_[A-Za-z0-9]{40,}+", ("lin_api_", "lin_oauth_")),
    ("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ("pmak-",)),
    ("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}", ("age-secret-key-1",)),
    ("telegram_bot_token", r"\d{8,10}:AA[\w-]{33}(?![\w-])", (":aa",)),
    # JFrog: an API key, and a reference token (base64 of "reftkn:01:...").
    ("jfrog_token", r"(?:AKCp[A-Za-z0-9]{60,}+|cmVmdGtu[A-Za-z0-9+/]{40,}+=*+)", ("akcp", "cmvmdgtu")),
)  # fmt: skip

# Names in prose (reflection/prose_names.py): capitalised words where a person stands.
_NAMES = rf"{_NAME_WORD}(?![\w'’-])(?:[ \t]+(?:{_NAME_LINK}|{_NAME_WORD}(?![\w'’-]))){{0,3}}"
_NAME_END = r"(?![\w(\[]|\.\w)"  # not a call, an index or an attribute: `with Session(engine)`


def _replace_prose_name(least: int) -> Replacer:
    """The leading words of group "secret" that make a name (at least `least` of them)."""

    def replace(match: re.Match[str]) -> str:
        words = match["secret"].split()
        count = name_words(words, least=least)
        if not count:
            return match[0]
        head = match.start("secret") - match.start()
        end = head + [word.end() for word in re.finditer(r"\S+", match["secret"])][count - 1]
        return match[0][:head] + placeholder("name") + match[0][end:]

    return replace


_PROSE_PEOPLE: tuple[_Rule, ...] = (
    # "Confirmed with Jane Doe", "a patch from Priya Natarajan", "reported by Tom Baker".
    _rule("name", r"(?<![\w.'’-])(?i:with|from|by|cc|ping|asked|ask|per|contacted|contact|told|emailed|messaged"
          r"|(?:spoke|talked|according|assigned|sent|forwarded|escalated)[ \t]+to)[ \t]+(?P<secret>" + _NAMES + ")"
          + _NAME_END, ("with ", "from ", "by ", "cc ", "ping ", "ask", "per ", "contact", "told ", "emailed ",
                        "messaged ", " to "), _replace_prose_name(2), needs=r"[ \t][A-Z][a-z]+[ \t]+[A-Z]"),
    # "thanks Jane", "Hi Jane,", "Dear Jane Doe": a greeting or a thank-you takes one name.
    _rule("name", r"(?<![\w.'’-])(?i:thanks(?:[ \t]+to)?|thank[ \t]+you|thx|hi|hello|hey|dear|cheers)[ \t,]+"
          r"(?P<secret>" + _NAMES + ")" + _NAME_END, ("thank", "thx", "hi ", "hello", "hey", "dear", "cheers"),
          _replace_prose_name(1)),
    # A sign-off, then the name alone on the next line: "Regards,\nJane Doe".
    _rule("name", r"(?im:^[ \t>]*(?:(?:best|kind|warm)?[ \t]*regards|best|cheers|thanks|thank[ \t]+you|sincerely"
          r"|yours(?:[ \t]+truly)?|--|—|–)[ \t]*[,.!]?[ \t]*\r?\n[ \t>]*)(?P<secret>" + _NAMES + r")[ \t]*(?=\r?\n|$)",
          ("regards", "best", "cheers", "thank", "sincerely", "yours", "--", "—", "–"), _replace_prose_name(1)),
    # A signature line: "-- Emma Johansson".
    _rule("name", r"(?m:^[ \t>]*(?:--|—|–)[ \t]*)(?P<secret>" + _NAMES + r")[ \t]*(?=\r?\n|$)", ("--", "—", "–"),
          _replace_prose_name(2)),
)  # fmt: skip

# Where a person is named (see "people and machines"), most specific first.
_PEOPLE: tuple[_Rule, ...] = (
    _rule("name", _PERSON_LABEL + r"(?P<secret>[^\s<>\[][^\n<>]{0,78}?)" + _AT_ADDRESS,
          ("@", "[redacted:email]")),
    _rule("name", r"(?<![\w.'’-])(?P<secret>" + _PERSON + ")" + _AT_ADDRESS, ("@", "[redacted:email]")),
    _rule("name", r"(?im:^[ \t>#*/-]*:?(?:authors?|committer|maintainers?)[ \t]*:[ \t]*)"
          r"(?P<secret>" + _PERSON + r")[ \t]*(?=\n|$)", ("author", "committer", "maintainer")),
    _rule("name", r"__(?:author|maintainer)__[ \t]*=[ \t]*" + _QUOTED_NAME, ("__author__", "__maintainer__")),
    _rule("name", r"(?<![\w-])(?P<kq>[\"']?)(?:author|maintainer|committer)(?:_?name)?(?P=kq)[ \t]*[:=][ \t]*"
          + _QUOTED_CAPITALISED, ("author", "maintainer", "committer")),
    # `{name = "Jane Doe", email = "..."}` (pyproject.toml), `{"name": ..., "email": ...}`.
    _rule("name", r"(?<![\w-])(?P<kq>[\"']?)name(?P=kq)[ \t]*[:=][ \t]*(?P<q>[\"'])(?P<secret>[^\"'\n]{1,80}?)"
          r"(?P=q)[ \t]*,[ \t]*(?P<eq>[\"']?)e-?mail(?P=eq)[ \t]*[:=]", ("mail",)),
    # git's own record of a person: `git config -l`, `git config user.name "..."`, the
    # [user] section of a .gitconfig, GIT_AUTHOR_NAME, and the lines of `git blame`.
    _rule("name", r"(?m:^user\.name=)(?P<secret>[^\s\[][^\n]*?)[ \t]*(?=\n|$)", ("user.name",)),
    _rule("name", r"(?<![\w-])git[ \t]+[^\n|;&]*?config[^\n|;&]*?[ \t]user\.name[ \t]+"
          r"(?:(?P<vq>[\"'])(?P<qv>[^\"'\n]+)(?P=vq)|(?P<uv>[^\s\"'$\[-]\S*))", ("user.name",),
          _replace_unquoted_or_quoted("name")),
    _rule("name", r"\[user\][ \t]*\n(?:[ \t]*[\w.-]+[ \t]*=[^\n]*\n){0,5}?[ \t]*name[ \t]*=[ \t]*"
          r"(?P<secret>[^\s\[][^\n]*?)[ \t]*(?=\n|$)", ("[user]",)),
    _rule("name", r"(?<![\w-])GIT_(?:AUTHOR|COMMITTER)_NAME="
          r"(?:(?P<vq>[\"'])(?P<qv>[^\"'\n]+)(?P=vq)|(?P<uv>[^\s\"'$]+))",
          ("git_author_name", "git_committer_name"), _replace_unquoted_or_quoted("name")),
    _rule("name", r"\((?P<secret>[^()\n\d\[\s][^()\n\d]{0,59}?)[ \t]+\d{4}-\d\d-\d\d[ \t]+\d\d:\d\d:\d\d"
          r"[ \t]+[+-]\d{4}[ \t]+\d+\)", (":",)),
    # A trailer names a person (or a bot) whether or not an address follows.
    _rule("name", r"(?im:^[ \t>#*/-]*(?:co-authored|signed-off|reviewed|acked|tested|reported|suggested|helped"
          r"|requested|approved)-by[ \t]*:[ \t]*)(?P<secret>[^\s<>\[][^\n<>]{0,78}?)[ \t]*(?=\n|$)", ("-by",)),
    *_PROSE_PEOPLE,
)  # fmt: skip

# A secret word, a few words about it, a verb or colon, then the value: "the database
# password is X", "API key for staging: X", "log in with password X".
_PROSE_SECRET = re.compile(
    r"""(?<![\w-])(?P<name>(?i:pass(?:word|phrase|wd)|secret|token|api[ _-]?key|access[ _-]?key|credentials?))
    (?![\w-])
    (?:[ \t]+(?:[\w-]++[ \t]+){0,4}?(?i:is|was|are|were|reads|becomes|set[ \t]+to)|[ \t]*[:=→]|)
    [ \t]+(?:(?P<vq>["'“‘])(?P<qv>[^"'”’\n]{8,100}+)(?:["'”’])|(?P<uv>[^\s"'`,;()<>\[\]{}|]{8,}+))""",
    re.VERBOSE,
)
_TRAILING = ".,;:!?)"


def _replace_prose_secret(match: re.Match[str]) -> str:
    if match["qv"] is not None:
        value = match["qv"]
        if _is_placeholder(value) or (" " in value and not match["name"].lower().startswith("pass")):
            return match[0]
        return _splice(match, "qv", "password" if match["name"].lower().startswith("pass") else "secret")
    value = match["uv"].rstrip(_TRAILING)
    if not _told_credential(value):
        return match[0]
    whole, start = match[0], match.start("uv") - match.start()
    kind = "password" if match["name"].lower().startswith("pass") else "secret"
    return whole[:start] + placeholder(kind) + whole[start + len(value):]


def _told_credential(value: str) -> bool:
    """A word told as a secret that is one: long, not a placeholder, a path, a URL or code,
    with digits or symbols among its letters, or random-looking."""
    if len(value) < 8 or _is_placeholder(value) or "://" in value or _PATH.fullmatch(value):
        return False
    if _looks_random(value):
        return True
    letters, digits = any(ch.isalpha() for ch in value), any(ch.isdigit() for ch in value)
    symbols = bool(re.search(r"[^\w.-]", value))
    return letters and (digits or symbols) and not _CODE_REFERENCE.fullmatch(value)


# Lines of exactly 64 base64 characters (how PEM wraps a key), each alone on its line or
# after an escaped newline, and the shorter line that ends them.
_KEY_BODY = re.compile(
    r"(?m:^|(?<=\\n))(?P<secret>[A-Za-z0-9+/]{64}(?:(?:\r?\n|\\n)[A-Za-z0-9+/]{1,64}+={0,2})*+)"
    r"(?=$|\r|\\n|\.\.\.|…|[\"'])"
)


def _replace_key_body(match: re.Match[str]) -> str:
    """A key's body lines; a certificate's (public) body is left alone."""
    before = match.string[max(0, match.start() - 40) : match.start()]
    first = match["secret"][:64]
    if "CERTIFICATE" in before or not _looks_random(first):
        return match[0]
    return placeholder("private_key")


def _replace_bare_aws_secret(match: re.Match[str]) -> str:
    value = match["secret"]
    if not any(ch.isdigit() for ch in value) or not _looks_random(value) or _is_placeholder(value):
        return match[0]
    return placeholder("aws_secret_key")


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
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?:\s|\\[rn])+[A-Za-z0-9+/=]{16,}+)*"
        r"(?:(?:\s|\\[rn])+[A-Za-z0-9+/=]{1,15}+(?=\.\.\.|…))?",  # the line a `...` cut short
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
    _rule(
        "gitlab_token",  # personal, deploy, runner, trigger, CI job, OAuth, feed... tokens
        # A routable token ends in `.<version>.<payload length and checksum>`.
        _B + r"(?:gl(?:pat|dt|rt|ptt|cbt|imt|oas|soat|ft|agent|wt)-|GR1348941)[A-Za-z0-9_-]{20,}+"
        r"(?:\.\d{2}\.[0-9a-z]{6,12}+)?",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glimt-", "gloas-", "glsoat-", "glft-",
         "glagent-", "glwt-", "gr1348941"),
    ),  # fmt: skip
    _rule("slack_token", _B + r"(?:xox[abeprs]|xapp)-[A-Za-z0-9-]{10,}+", ("xox", "xapp-")),
    _rule("google_api_key", _B + r"AIza[0-9A-Za-z_-]{35}(?![\w-])", ("aiza",)),
    # An Entra ID (Azure AD) client secret: three characters, a digit, "Q~", the rest.
    _rule("azure_client_secret", r"(?<![\w~.-])[\w.-]{3}\dQ~[\w~.-]{31,34}+(?![\w~-])", ("q~",)),
    _rule(
        "stripe_key",
        _B + r"(?:(?:sk|rk)_(?:live|test)|pk_live)_[A-Za-z0-9]{10,}+",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_"),
    ),
    *(_rule(kind, token, found, _replace_token(kind)) for kind, token, found in _PREFIXED_TOKENS),
    # The secret key has no prefix: it is known by its name, or by the key id before it
    # on the line (`aws configure`, the console's credentials CSV). Runs before the id goes.
    _rule(
        "aws_secret_key",
        r"(?:(?i:aws[_ -]?secret[_ -]?(?:access[_ -]?)?key|secret[_ -]?access[_ -]?key)[^\n]{0,40}?"
        r"|(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}[,;:|\t ]{1,3})"
        r"(?<![A-Za-z0-9/+])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        ("aws", "accesskey", "access_key", "access key", "access-key", "akia", "asia"),
    ),
    _rule(
        "aws_access_key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        ("akia", "asia", "abia", "acca"),
    ),
    # Twilio's auth token is bare hex, told apart from a digest only by the account SID
    # that comes with it: `Client("AC...", "<token>")`.
    _rule(
        "twilio_auth_token",
        r"(?<![A-Za-z0-9])AC[0-9a-f]{32}(?![A-Za-z0-9])[^\n]{0,40}?"
        r"(?<![A-Za-z0-9])(?P<secret>[0-9a-f]{32})(?![A-Za-z0-9])",
        ("ac",),
    ),
    # user:password@ (the user may be empty: redis://:pw@host) up to the last @ before the
    # host, as URL parsers read it, so an unescaped @ in a password does not leak its tail.
    _rule(
        "url_credentials",
        r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]*+://"
        r"(?P<secret>[^\s/?#@:'\"<>\[\]\\]*+:[^\s/?#'\"<>\[\]\\]+"
        r"|(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{20,}+)@",
        ("://",),
    ),
    # A signed URL (Azure SAS, S3 or GCS presigned) opens the object to whoever holds it.
    _rule(
        "url_signature",
        r"(?<=[?&;])(?i:sig|signature|x-amz-signature|x-goog-signature)="
        r"(?P<secret>[^&#\s\"'<>]{16,}+)",
        ("sig",),
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
        "cookie",
        r"(?<![\w-])(?i:(?:set-)?cookie)\\?[\"']?[ \t]*:[ \t]*\\?[\"']?(?P<secret>[^\r\n\"'\\]++)",
        ("cookie",),
        _replace_cookies,
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
    _rule(
        "basic_auth",  # docker config.json "auth", .npmrc _auth: base64 of user:password
        r"(?<![\w-])\\?[\"']?_?auth\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
        r"(?P<secret>[A-Za-z0-9+/]{8,}+={0,2})(?![\w+/=])",
        ("auth",),
        _replace_encoded_login,
    ),
    _rule(
        "password",  # ~/.netrc: machine HOST login USER password SECRET
        r"(?<![\w-])(?:machine[ \t]++\S++|default)\s++login[ \t]++\S++\s++password[ \t]++"
        r"(?P<secret>[^\s\[<{$%]\S*+)",
        ("machine", "default"),
    ),
    # Kubernetes and CI env lists: `- name: API_TOKEN` with `value: ...` on the next line.
    _rule(
        "secret",
        r"(?<![\w-])name:[ \t]*+[\"']?(?P<name>[\w.-]++)[\"']?[ \t]*+\r?\n[ \t]*+value:[ \t]*+"
        r"(?P<q>[\"']?)(?P<secret>[^\s\"']++)(?P=q)",
        ("value:",),
        _replace_named_value,
    ),
    # Commands whose password flag has no secret word in it: `docker login -p PW`,
    # `sshpass -p PW`, and mysql's glued-on `-pPW` (a bare `-p` asks for it instead).
    _rule(
        "password",
        r"(?<![\w-])(?:(?:docker|podman|oras|helm[ \t]+registry)[ \t]+login|sshpass)"
        r"[^\n|;&]{0,200}?[ \t]-p[ \t]+(?P<q>[\"']?)(?P<secret>[^\s\"'$\[-][^\s\"']*+)(?P=q)",
        ("login", "sshpass"),
    ),
    _rule(
        "password",
        r"(?<![\w-])(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)(?![\w-])"
        r"[^\n|;&]{0,200}?[ \t]-p(?P<q>[\"']?)(?P<secret>[^\s\"'$\[-][^\s\"']*+)(?P=q)",
        ("mysql", "mariadb"),
    ),
    _rule(
        "secret",  # gh secret set NAME --body VALUE
        r"(?<![\w-])gh[ \t]+secret[ \t]+set[^\n|;&]{0,200}?[ \t](?:-b|--body)(?:[ \t]+|=)"
        r"(?P<q>[\"']?)(?P<secret>[^\s\"'$\[-][^\s\"']*+)(?P=q)",
        ("secret set",),
    ),
    _Rule(
        "secret",
        _ASSIGNMENT,
        ("key", "token", "secret", "pass", "pwd", "credential", "pat"),
        _replace_assignment,
        _ASSIGNED,
    ),
    _Rule(
        "secret",
        _FLAG_VALUE,
        ("key", "token", "secret", "pass", "pwd", "credential"),
        _replace_flag_value,
    ),
    # "the password is X", "use token X": a secret told in prose, judged by its value.
    _rule("secret", _PROSE_SECRET, ("pass", "secret", "token", "key", "credential"), _replace_prose_secret),
    # Base64 lines of a private key without its BEGIN line, and an AWS secret key without
    # its name or key id: nothing but their form says what they are.
    _rule("private_key", _KEY_BODY, (), _replace_key_body, needs=r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{64}"),
    _rule("aws_secret_key", r"(?<![A-Za-z0-9/+=])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])", (),
          _replace_bare_aws_secret, needs=r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}"),
    *_PEOPLE,  # before the e-mail rule: an address is what tells a name from other words
    _rule(
        "email",
        r"(?<![\w.+%-])[A-Za-z0-9._%+-]++@(?P<domain>[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)+)",
        ("@",),
        _replace_email,
    ),
    # Numbers that identify a person, each checked (reflection/personal_numbers.py): a
    # number of the same form that fails the check is a build number or an id.
    _rule("card", r"(?<![\w.+/-])(?:\d{4}(?:[ -]\d{4}){2}[ -]\d{1,7}|\d{4}[ -]\d{6}[ -]\d{4,5}|\d{13,19})"
          r"(?![\w/]|[.,:-]\d)", (), _checked("card", card_number), needs=r"\d{4}[ -]?\d{4,6}[ -]?\d{4}"),
    _rule("iban", r"(?<!\w)[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}+(?: ?[A-Z0-9]{1,3})?(?!\w)", (),
          _checked("iban", iban), needs=r"[A-Z]{2}\d\d ?[A-Z0-9]{4} ?[A-Z0-9]{4}"),
    _rule("national_id", r"(?<![\w.+/-])\d{3}-\d{2}-\d{4}(?![\w/]|[-.]\d)", (), _checked("national_id", national_id),
          needs=r"\d{3}-\d\d-\d{4}"),
    _rule("national_id", r"(?<!\w)(?:[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]"
          r"|(?:\d{8}|[XYZ]\d{7})-?[A-Z]|[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z]"
          r"|[12] ?\d{2} ?(?:0[1-9]|1[0-2]) ?\d{2} ?\d{3} ?\d{3} ?\d{2})(?!\w)", (),
          _checked("national_id", national_id),
          needs=r"\d\d ?\d\d ?\d\d ?[A-D]\b|\d{7}-?[A-Z]\b|[A-Z]{6}\d\d|\d{3} ?\d{3} ?\d\d\b"),
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
    _rule(
        "internal_host",
        # After "@" too: the e-mail rule has taken the addresses, so what is left is a URL's host.
        r"(?<![\w.-])(?:[A-Za-z0-9][A-Za-z0-9-]*+\.){2,}+(?i:" + "|".join(_HOST_SUFFIXES) + r")"
        r"(?![\w-]|\.[A-Za-z0-9])",
        # rarer than ".com": the labels, and the environments' after a number
        (*(f"{label}." for label in _INTERNAL_LABELS), *(f".{label}." for label in _ENVIRONMENT_LABELS)),
        _replace_labelled_host,
    ),
    # Private IPv6: unique local (fc00::/7) and link-local (fe80::/10) addresses.
    _rule("private_ip", r"(?<![\w:.])(?i:f[cd][0-9a-f]{2}|fe[89ab][0-9a-f])(?::[0-9A-Fa-f]{0,4}){2,7}+(?![\w:])",
          (), needs=r"(?i)f[cde][0-9a-f]{2}:"),
    # +44 20 7946 0958, +14155550123, (415) 555-0142, 415-555-0199, 415.555.0175
    _rule(
        "phone",
        # The "+" first and the look-behind after it: `re` then jumps from one "+" to the next.
        r"\+(?<![\w+/=.-]\+)[1-9](?:\d{0,2}(?:[ .-]\(?\d{1,8}\)?|\(\d{1,5}\)){2,5}+(?![\w/:]|[-.]\d)"
        r"|\d{9,14}(?![\w/.-]))",
        ("+",),
        _replace_phone,
    ),
    _rule(
        "phone",
        r"(?<![\w.+/-])(?:\(\d{3}\)[ \t]?\d{3}[-.]\d{4}|\d{3}-\d{3}-\d{4}|\d{3}\.\d{3}\.\d{4})"
        r"(?![\w/]|[-.]\d)",
        ("-", "."),  # in nearly every text: each ends in the same digits, found much faster
        needs=r"\d{3}[-.]\d{4}",
    ),
)

KINDS: frozenset[str] = frozenset(
    {rule.kind for rule in _RULES} | {"password", "token", "bearer_token", "basic_auth"}
)
"""Every kind a placeholder can name."""


_TRIGGER_WORDS = sorted({trigger for rule in _RULES for trigger in rule.triggers})
# One pass over the text finds every trigger: the look-ahead tries each position, so
# overlapping triggers are all seen; a longer one found implies the shorter ones it starts with.
# The pattern starts with the triggers' first characters (and looks back over the one it
# took), so `re` skips the positions where none can start instead of trying each.
_TRIGGERS = re.compile(
    "[" + re.escape("".join(sorted({word[0] for word in _TRIGGER_WORDS}))) + "](?<=(?=("
    + trie_pattern(_TRIGGER_WORDS) + ")).)"
)
_UNTRIGGERED = frozenset(n for n, rule in enumerate(_RULES) if not rule.triggers)  # their `needs` says
# The rules each trigger found calls for, with those of the shorter triggers it starts with.
_RULES_FOR = {
    word: frozenset(n for n, rule in enumerate(_RULES) if any(word.startswith(t) for t in rule.triggers))
    for word in _TRIGGER_WORDS
}


def redact(text: str) -> str:
    """`text` with every secret replaced by `[REDACTED:<kind>]`; idempotent.

    First the values known as secret (`reflection.secret_values`) go, by value. Then a rule
    runs when one of its triggers occurs in the text as given (lower-cased): one compiled
    search finds them all, then only those rules run, in their order. Then one more pass
    hides the other occurrences of the values they found. A text that quotes another with
    escaped newlines (pytest's view of a file read into one string) is read as lines too,
    so a value a rule finds only there is hidden all the same."""
    values = known_secrets.get()
    if values is not None:
        text = values.mask(text)
    found: dict[str, str] = {}
    if "\\n" in text:
        _apply_rules(text.replace("\\r\\n", "\n").replace("\\n", "\n"), found)
    text = _apply_rules(text, found)
    if values is not None:
        values.learn_found(found)
    return _spreader(found)(text)


def _apply_rules(text: str, found: dict[str, str]) -> str:
    """`text` with what the rules find replaced; the values they replaced are added to `found`."""
    wanted: set[int] = set(_UNTRIGGERED)
    for word in set(_TRIGGERS.findall(text.lower())):
        wanted |= _RULES_FOR[word]
    for n in sorted(wanted):
        text = _RULES[n].apply(text, found)
    policy = current_policy()
    if policy is not None:
        if policy.own_domains:
            text = _HOST.sub(lambda host: placeholder("internal_host") if policy.owns(host[0]) else host[0], text)
        for kind, pattern in policy.extra:
            text = pattern.sub(_replace_secret_group(kind), text)
    return text


# Any dotted name, for the project's own domains (`redaction.ownDomains`) to claim.
_HOST = re.compile(r"(?<![\w.-])[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)++(?![\w-]|\.[A-Za-z0-9])")


def redact_data(obj: Any) -> Any:
    """A copy of a JSON-like value with every string redacted; keys are kept.

    Mappings become dicts, lists and tuples keep their type, other values are returned
    as they are. A string under a secret-named key (`password`, `apiKey`, ...) is
    replaced whole when it looks like a credential, since the key is its only context.
    A secret found in one string is hidden in every other string of the value too.
    """
    found: dict[str, str] = {}
    values = known_secrets.get()
    mask = values.mask if values is not None else str
    redacted = _map_strings(obj, lambda key, text: _redact_entry(key, mask(text), found))
    if values is not None:
        values.learn_found(found)
    if not found:
        return redacted
    spread = _spreader(found)
    return _map_strings(redacted, lambda _key, text: spread(text))


def _map_strings(obj: Any, change: Callable[[Any, str], str], key: Any = None) -> Any:
    """A copy of `obj` with `change(key, text)` for each string; `key` is the mapping key it is under."""
    if isinstance(obj, str):
        return change(key, obj)
    if isinstance(obj, Mapping):
        return {name: _map_strings(value, change, name) for name, value in obj.items()}
    if isinstance(obj, list):
        return [_map_strings(item, change) for item in obj]
    if isinstance(obj, tuple):
        return tuple(_map_strings(item, change) for item in obj)
    return obj


def _redact_entry(key: Any, text: str, found: dict[str, str]) -> str:
    kind = _secret_kind(key) if isinstance(key, str) else None
    if kind and _credential_like(text, quoted=True, config=True, env_line=False):
        _note(text, placeholder(kind), found)
        return placeholder(kind)
    return _apply_rules(text, found)


# --- the same value elsewhere ----------------------------------------------------------

_PLACEHOLDER = re.compile(r"\[REDACTED:(\w+)\]")
# Found by their form wherever they stand, so a rule that left one alone did so on
# purpose (`git@github.com:org/repo`); a name is found only by its place ("Build Bot").
_NOT_SPREAD = frozenset({"email", "phone", "private_ip", "internal_host", "name"})
_SPREAD_MIN = 6  # a shorter value is as likely a word or a number of the text
_SPREAD_LETTERS_MIN = 12  # letters only: `production` is a password in one line, a word in the next


def _note(old: str, new: str, found: dict[str, str]) -> None:
    """Add to `found` (value -> kind) each value of `old` that `new` shows as a placeholder.

    `new` is `old` with some values replaced, the text between them kept (a Cookie header
    has several), so each value ends where the kept text after its placeholder starts."""
    pieces = _PLACEHOLDER.split(new)  # text, kind, text, kind, ..., text
    if not (old.startswith(pieces[0]) and old.endswith(pieces[-1])):
        return
    start = len(pieces[0])
    for n in range(1, len(pieces), 2):
        kind, after = pieces[n], pieces[n + 1]
        end = len(old) - len(after) if n + 2 == len(pieces) else old.find(after, start)
        if end < start:
            return
        if _spreadable(old[start:end], kind):
            found.setdefault(old[start:end], kind)
        start = end + len(after)


def _spreadable(value: str, kind: str) -> bool:
    """Whether `value` is specific enough to hide wherever it stands, not only where found."""
    if kind in _NOT_SPREAD or len(value) < _SPREAD_MIN:
        return False
    if _is_placeholder(value) or _PLACEHOLDER.search(value):
        return False
    return len(value) >= _SPREAD_LETTERS_MIN or not value.isalpha()


def _spreader(found: Mapping[str, str]) -> Callable[[str], str]:
    """A function that replaces each occurrence of a value of `found` by its kind's placeholder.

    One pass for all values, as a trie (a long log may hold thousands), the longest first
    (one may hold another). An occurrence inside a longer word goes too: it is the secret
    all the same, and `_spreadable` keeps out the values that ordinary words could hold."""
    if not found:
        return lambda text: text
    try:
        pattern = re.compile(trie_pattern(list(found)))
    except RecursionError:  # hundreds of values, each the start of the next: a trie too deep
        return functools.partial(_replace_each, sorted(found.items(), key=lambda item: -len(item[0])))
    return functools.partial(pattern.sub, lambda match: placeholder(found[match[0]]))


def _replace_each(values: list[tuple[str, str]], text: str) -> str:
    """`text` with each value replaced by its kind's placeholder, one value after the other."""
    for value, kind in values:
        text = text.replace(value, placeholder(kind))
    return text


# --- for the values in reach and the diff scan ------------------------------------------

# Kinds whose form alone says "a live credential": written into a tracked file, each is
# one. (A password or a generic secret is known by its place, which code may show as a
# test fixture's; those are caught by value when they are the user's.)
TOKEN_KINDS: frozenset[str] = frozenset(
    {"private_key", "aws_access_key", "aws_secret_key", "anthropic_key", "openai_key", "github_token",
     "gitlab_token", "slack_token", "slack_webhook", "google_api_key", "azure_client_secret", "stripe_key",
     *(kind for kind, _, _ in _PREFIXED_TOKENS)}
)


def secret_name(name: str) -> str | None:
    """The kind of secret a value stored under `name` is (password, token, secret); None
    when the name says nothing secret (`MAX_TOKENS`, `PWD` aside, see `looks_like_credential`)."""
    return _secret_kind(name)


def looks_like_credential(value: str) -> bool:
    """Whether a value under a secret name is one: not a placeholder, a path or too short."""
    return _credential_like(value, quoted=True, config=True, env_line=True)


def tokens_in(text: str) -> dict[str, str]:
    """The secret-shaped tokens of `text` (value -> kind), placeholders and examples aside."""
    found: dict[str, str] = {}
    _apply_rules(text, found)
    return {value: kind for value, kind in found.items() if kind in TOKEN_KINDS and not _is_placeholder(value)}
