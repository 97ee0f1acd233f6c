"""Personal data in prose and numbers, a company's own hosts, and what must stay as written.

Names are found where a word that takes a person stands before them; cards, IBANs and
national IDs by their checksums and forms; hosts by their labels or the project's own
domains (`redaction` in project.json). Each finding has its counterpart that must come
back unchanged: capitalised tool names, code, test ids, numbers that fail the check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import ConfigError, load_config
from reflection.redact import redact, redact_data, tokens_in
from reflection.redaction_policy import RedactionPolicy, policy_in_force
from reflection.secret_values import SecretValues, secrets_known
from reflection.secrets_in_reach import learn_environment


@pytest.mark.parametrize(("text", "name"), [
    ("Confirmed with Jane Doe that the nightly runs in UTC.", "Jane Doe"),
    ("Applied the patch from Priya Natarajan and re-ran the suite.", "Priya Natarajan"),
    ("The decorator was written by Tom Baker and swallows errors.", "Tom Baker"),
    ("Thanks Marta, the fixture works.", "Marta"),
    ("Hi Jane,\nthe migration fails.", "Jane"),
    ("Looks good.\n\nRegards,\nJan de Vries\n", "Jan de Vries"),
    ("Fix rounding\n\nReported-by: Sofia Rossi\n", "Sofia Rossi"),
    ("According to Olivia Brown, the flag stays off.", "Olivia Brown"),
    ("Ship it.\n-- Emma Johansson", "Emma Johansson"),
])  # fmt: skip
def test_a_name_where_a_person_stands_is_masked(text: str, name: str) -> None:
    out = redact(text)

    assert name not in out and "[REDACTED:name]" in out
    assert out.replace("[REDACTED:name]", name) == text  # nothing else changed


@pytest.mark.parametrize("text", [
    "Works with Python 3.11; fixtures from Django; deployed by GitHub Actions by Monday.",
    "Built with Visual Studio Code, hosted on Google Cloud Run; thanks to Stack Overflow.",
    "with Session(engine) as session:\n    raise ValueError('x') from None",
    "def test_sync_with_Remote_Origin(): ...\nfrom Models import Invoice",
    "tests/Test With Spaces/test_refund.py::test_from_Jane_doe_account",
    "Hello World! Hi There. Thanks Everyone; Powered by Let's Encrypt.",
    "9c2b1a0 Merge pull request #812 from acme-corp/fix-auth",
    "# Best effort: the cache may be cold.\n# Thanks to the lock, one worker writes.",
])  # fmt: skip
def test_capitalised_words_code_and_paths_are_not_names(text: str) -> None:
    assert redact(text) == text


def test_keep_names_lets_a_name_stand_in_prose_and_in_a_trailer() -> None:
    text = "Confirmed with Ada Lovelace and with Jane Doe.\n\nReviewed-by: Ada Lovelace\n"

    with policy_in_force(RedactionPolicy.of(keep_names=["ada  lovelace"])):
        out = redact(text)

    assert out == "Confirmed with Ada Lovelace and with [REDACTED:name].\n\nReviewed-by: Ada Lovelace\n"


@pytest.mark.parametrize(("number", "kind"), [
    ("4539899720743225", "card"), ("5425 4994 5206 7838", "card"), ("2221-9765-1713-5596", "card"),
    ("3714 825396 72858", "card"),
    ("DE62 3704 0044 0532 0130 01", "iban"), ("GB29NWBK60161331926819", "iban"),
    ("FR7630006000011234567890189", "iban"),
    ("536-22-8814", "national_id"), ("AB 12 34 56 C", "national_id"), ("12345678Z", "national_id"),
    ("X1234567L", "national_id"), ("RSSMRA85T10A562S", "national_id"), ("2 85 05 78 006 048 77", "national_id"),
])  # fmt: skip
def test_a_number_that_passes_its_check_is_masked(number: str, kind: str) -> None:
    assert redact(f"paid with {number} today") == f"paid with [REDACTED:{kind}] today"


@pytest.mark.parametrize("number", [
    "4539899720743226",  # the card above, its last digit changed: Luhn fails
    "4111111111111111",  # a network's published test card
    "1709377200000",  # a timestamp in ms: no card network starts with 1
    "DE63 3704 0044 0532 0130 01",  # the IBAN above, its check digits changed
    "000-12-3456", "666-12-3456",  # never issued
    "12345678A",  # a DNI with the wrong letter
])  # fmt: skip
def test_a_number_that_fails_its_check_is_left(number: str) -> None:
    assert redact(f"value {number} seen") == f"value {number} seen"


@pytest.mark.parametrize("host", [
    "ci.acme-corp.com", "jenkins.acme-corp.com", "intranet.acme.com", "db01.prod.acme-corp.com",
    "fd12:3456:789a:1::17", "fe80::1ff:fe23:4567:890a",
])  # fmt: skip
def test_internal_hosts_and_private_ipv6_are_masked_without_settings(host: str) -> None:
    out = redact(f"connect to {host} failed")

    assert host not in out and "[REDACTED:" in out


def test_public_hosts_and_code_that_looks_like_ipv6_are_left() -> None:
    text = ("api.dev.example-vendor.com answered; see https://docs.python.org/3/ and files.pythonhosted.org\n"
            "std::vector<int> v; fdopen(fd); 12:34:56; self.ci.config = build.settings.local_mode\n")

    assert redact(text) == text


def test_own_domains_and_extra_patterns_apply_to_text_and_data() -> None:
    policy = RedactionPolicy.of(["acme-corp.com", "acme.com"], {"employee_id": r"EMP-\d{6}"})

    with policy_in_force(policy):
        text = redact("vault.acme-corp.com refused EMP-481516; git@git.acme.com:a/b; acme.com.au and notacme.com")
        data = redact_data({"host": "db.acme-corp.com:5432", "who": ["EMP-000001"]})

    assert text == ("[REDACTED:internal_host] refused [REDACTED:employee_id]; git@[REDACTED:internal_host]:a/b; "
                    "acme.com.au and notacme.com")
    assert data == {"host": "[REDACTED:internal_host]:5432", "who": ["[REDACTED:employee_id]"]}
    assert redact("vault.acme-corp.com") == "vault.acme-corp.com"  # outside the policy: no such setting


AWS_SECRET_NAME = "AWS_SECRET_" + "ACCESS_KEY"
PLANTED = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCEXAMPLEKEY9"  # a real-looking key that says "EXAMPLE"


def test_a_secret_holding_example_is_a_secret_and_only_a_whole_placeholder_is_spared() -> None:
    values = SecretValues()

    learnt = learn_environment(values, {AWS_SECRET_NAME: PLANTED, "API_TOKEN": "dummy-token"})
    packet = f"## Escalation\nThe test printed {PLANTED} and API_TOKEN=dummy-token\n"

    assert len(PLANTED) == 40 and learnt == 1 and values.name_of(PLANTED) == AWS_SECRET_NAME
    assert PLANTED not in redact(packet) and "API_TOKEN=dummy-token" in redact(packet)  # by its form alone
    with secrets_known(values):
        masked = redact(packet)
    assert masked == f"## Escalation\nThe test printed [REDACTED:{AWS_SECRET_NAME}] and API_TOKEN=dummy-token\n"
    assert tokens_in(f"{AWS_SECRET_NAME}={PLANTED}") == {PLANTED: "aws_secret_key"}
    documented = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"  # AWS's own documentation's example
    assert tokens_in(f"{AWS_SECRET_NAME}={documented}") == {}


def _config_file(project: Path, redaction: object) -> Path:
    (project / ".openagents").mkdir()
    (project / ".openagents" / "project.json").write_text(json.dumps({"redaction": redaction}))
    return project


def test_the_redaction_section_loads_into_a_policy(tmp_path: Path) -> None:
    project = _config_file(tmp_path, {"ownDomains": ["acme-corp.com"], "extraPatterns": {"ticket": r"SEC-\d+"},
                                      "keepNames": ["Build Bot"]})

    policy = load_config(project).config.redaction.policy()

    assert policy.owns("ci.acme-corp.com") and not policy.owns("acme-corp.com.evil.io")
    assert policy.keeps("build bot") and [kind for kind, _ in policy.extra] == ["ticket"]


@pytest.mark.parametrize(("redaction", "said"), [
    ({"ownDomains": ["https://acme.com/"]}, "is not a domain name"),
    ({"extraPatterns": {"ticket": "SEC-("}}, "is not a regular expression"),
    ({"extraPatterns": {"ticket": "x*"}}, "matches the empty text"),
    ({"extraPatterns": {"no such kind": "x"}}, "is not a kind name"),
])  # fmt: skip
def test_a_bad_redaction_setting_is_one_sentence_naming_the_key(tmp_path: Path, redaction: dict, said: str) -> None:
    project = _config_file(tmp_path, redaction)

    with pytest.raises(ConfigError) as raised:
        load_config(project)

    assert "redaction." in str(raised.value) and said in str(raised.value)
    assert "\n" not in str(raised.value)
