from shop.errors import ValidationError


def place_order(cart: Cart, catalog: Catalog) -> Order:
    """The cart as an order; the stock of each book goes down by the copies ordered."""
    if not cart.lines:
        raise ValidationError("cart", "an empty cart cannot be ordered")
    for isbn, quantity in cart.lines.items():
        catalog.get(isbn).stock -= quantity
    return Order(next(_numbers), cart.customer_email, dict(cart.lines), cart.total_cents(catalog))
