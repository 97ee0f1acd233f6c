from shop.errors import ValidationError


def shipping_cents(weight_g: int, country: str) -> int:
    """The cheapest rate that carries `weight_g`; abroad costs twice as much."""
    if weight_g <= 0:
        raise ValidationError("weight_g", "a parcel weighs something")
    for limit, price in DOMESTIC_RATES:
        if weight_g <= limit:
            return price if country == DOMESTIC else price * ABROAD_FACTOR
    heaviest = DOMESTIC_RATES[-1][1] + 100 * ((weight_g - DOMESTIC_RATES[-1][0]) // 1000 + 1)
    return heaviest if country == DOMESTIC else heaviest * ABROAD_FACTOR
