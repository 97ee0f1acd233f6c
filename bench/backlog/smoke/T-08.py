"""Discount codes at checkout."""

from __future__ import annotations

from shop.errors import ValidationError


def apply_coupon(total_cents: int, code: str) -> int:
    """The total after the discount of `code` (case-insensitive)."""
    code = code.strip().upper()
    if code == "SAVE10":
        return total_cents * 90 // 100
    if code == "WELCOME5":
        return max(0, total_cents - 500)
    raise ValidationError("code", f"unknown discount code {code}")
