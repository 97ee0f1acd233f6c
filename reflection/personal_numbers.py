"""Numbers that identify a person, told from other numbers by their checksums and forms.

A payment card number passes the Luhn check and starts as a card network's do; an IBAN
passes ISO 7064 mod 97 and has its country's length; a national ID has its country's
form (and, where there is one, its check character). A build number, a timestamp or an
order id of the same length fails them, nearly always: these checks are what keep the
redaction of numbers from spoiling test output.
"""

from __future__ import annotations

import re

__all__ = ["card_number", "iban", "national_id"]

# Card networks' first digits: Visa 4, Mastercard 51-55 and 2221-2720, Amex 34/37,
# Discover 6011/644-649/65, JCB 3528-3589, Diners 300-305/36/38, UnionPay 62.
_CARD_PREFIX = re.compile(r"4|5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)|3[47]|6(?:011|4[4-9]|5|2)"
                          r"|35(?:2[89]|[3-8]\d)|3(?:0[0-5]|[68])")


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


# The card networks' and payment providers' published test numbers: no one's card, and
# what a payment test prints.
_TEST_CARDS = frozenset(
    {"4111111111111111", "4242424242424242", "4012888888881881", "4000056655665556", "5555555555554444",
     "5105105105105100", "2223003122003222", "378282246310005", "371449635398431", "6011111111111117",
     "6011000990139424", "3530111333300000", "3566002020360505", "30569309025904", "38520000023237"}
)  # fmt: skip


def card_number(text: str) -> bool:
    """Whether `text` (digits, spaces and dashes) is a payment card number, not a test one."""
    digits = re.sub(r"[ -]", "", text)
    return (13 <= len(digits) <= 19 and bool(_CARD_PREFIX.match(digits)) and _luhn(digits)
            and digits not in _TEST_CARDS)


# Each country's IBAN length (ISO 13616), for the countries whose accounts turn up most.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AT": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "CH": 21, "CY": 28, "CZ": 24,
    "DE": 22, "DK": 18, "EE": 20, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GI": 23, "GL": 18,
    "GR": 27, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "KW": 30, "KZ": 20, "LB": 28,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MT": 31, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TR": 26,
    "UA": 29,
}  # fmt: skip


def iban(text: str) -> bool:
    """Whether `text` (letters and digits, spaces allowed) is an IBAN: length and mod 97."""
    compact = text.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in moved)) % 97 == 1


_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def national_id(text: str) -> bool:
    """Whether `text`, matched by one of the national ID forms of redact.py, is one:
    a US Social Security number, a UK National Insurance number, a Spanish DNI or NIE
    (check letter), an Italian codice fiscale, a French NIR (key mod 97)."""
    compact = re.sub(r"[ -]", "", text).upper()
    if re.fullmatch(r"\d{3}-\d{2}-\d{4}", text):
        area, group, serial = text.split("-")
        return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"
    if re.fullmatch(r"[XYZ]?\d{7,8}[A-Z]", compact) and len(compact) == 9:
        number = int(str("XYZ".find(compact[0])) + compact[1:8] if compact[0] in "XYZ" else compact[:8])
        return _DNI_LETTERS[number % 23] == compact[8]
    if re.fullmatch(r"[12]\d{12}\d{2}", compact):
        return 97 - int(compact[:13]) % 97 == int(compact[13:])
    # UK NINO and the codice fiscale are known by their form alone (their patterns say it).
    return bool(re.fullmatch(r"[A-Z]{2}\d{6}[A-D]|[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z]", compact))
