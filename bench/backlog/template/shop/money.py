"""Money: every amount is an int of euro cents, never a float."""

from __future__ import annotations


def cents(amount: str) -> int:
    """An amount typed by a person ("12.50", "7") in cents."""
    euros, _, part = amount.strip().partition(".")
    return int(euros) * 100 + int(part.ljust(2, "0") or 0)


def format_price(amount_cents: int) -> str:
    """Cents as the shop shows them: 1250 -> "€12.50"."""
    euros, rest = divmod(amount_cents, 100)
    return f"€{euros}.{rest:02d}"
