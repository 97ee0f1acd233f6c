"""Orders placed from carts."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count

from shop.cart import Cart
from shop.catalog import Catalog

_numbers = count(1)


@dataclass
class Order:
    number: int
    customer_email: str
    lines: dict[str, int]
    total_cents: int
    status: str = "open"  # open -> paid -> shipped; or cancelled
    notes: list[str] = field(default_factory=list)


def place_order(cart: Cart, catalog: Catalog) -> Order:
    """The cart as an order; the stock of each book goes down by the copies ordered."""
    for isbn, quantity in cart.lines.items():
        catalog.get(isbn).stock -= quantity
    return Order(next(_numbers), cart.customer_email, dict(cart.lines), cart.total_cents(catalog))


def mark_paid(order: Order) -> None:
    order.status = "paid"


def mark_shipped(order: Order) -> None:
    order.status = "shipped"
