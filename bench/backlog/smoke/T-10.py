from shop.errors import ValidationError


def cancel(order: Order, catalog: Catalog) -> None:
    """Cancel an order that has not shipped; its books go back into stock."""
    if order.status == "shipped":
        raise ValidationError("status", "a shipped order cannot be cancelled")
    for isbn, quantity in order.lines.items():
        catalog.get(isbn).stock += quantity
    order.status = "cancelled"
