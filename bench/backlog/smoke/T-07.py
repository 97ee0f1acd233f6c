import re

from shop.errors import ValidationError

_AMOUNT = re.compile(r"\d+(?:\.\d{1,2})?")


def cents(amount: str) -> int:
    """An amount typed by a person ("12.50", "7") in cents."""
    text = amount.strip()
    if not _AMOUNT.fullmatch(text):
        raise ValidationError("amount", f"{amount!r} is not an amount such as 12.50")
    euros, _, part = text.partition(".")
    return int(euros) * 100 + int(part.ljust(2, "0") or 0)
