def format_price(amount_cents: int) -> str:
    """Cents as the shop shows them: 123456 -> "€1,234.56", -350 -> "-€3.50"."""
    sign = "-" if amount_cents < 0 else ""
    euros, rest = divmod(abs(amount_cents), 100)
    return f"{sign}€{euros:,}.{rest:02d}"
