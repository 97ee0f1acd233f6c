"""What shipping an order costs, by weight and destination."""

from __future__ import annotations

DOMESTIC = "DE"
# (up to grams, cents): the carrier's price list for parcels within the country
DOMESTIC_RATES = [(1000, 399), (2000, 549), (5000, 699)]
ABROAD_FACTOR = 2


def shipping_cents(weight_g: int, country: str) -> int:
    """The cheapest rate that carries `weight_g`; abroad costs twice as much."""
    for limit, price in DOMESTIC_RATES:
        if weight_g <= limit:
            return price if country == DOMESTIC else price * ABROAD_FACTOR
    heaviest = DOMESTIC_RATES[-1][1] + 100 * ((weight_g - DOMESTIC_RATES[-1][0]) // 1000 + 1)
    return heaviest if country == DOMESTIC else heaviest * ABROAD_FACTOR
