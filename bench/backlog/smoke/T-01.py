def format_price(amount_cents: int) -> str:
    """Cents as the shop shows them: 123456 -> "€1,234.56"."""
    euros, rest = divmod(amount_cents, 100)
    return f"€{euros:,}.{rest:02d}"
