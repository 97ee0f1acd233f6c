"""A customer's shopping cart: ISBNs and how many copies of each."""

from __future__ import annotations

from shop.catalog import Catalog


class Cart:
    def __init__(self, customer_email: str) -> None:
        self.customer_email = customer_email
        self.lines: dict[str, int] = {}

    def add(self, isbn: str, quantity: int = 1) -> None:
        self.lines[isbn] = self.lines.get(isbn, 0) + quantity

    def remove(self, isbn: str) -> None:
        self.lines.pop(isbn, None)

    def total_cents(self, catalog: Catalog) -> int:
        return sum(catalog.get(isbn).price_cents * quantity for isbn, quantity in self.lines.items())

    def weight_g(self, catalog: Catalog) -> int:
        return sum(catalog.get(isbn).weight_g * quantity for isbn, quantity in self.lines.items())
