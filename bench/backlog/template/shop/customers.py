"""Registered customers, by e-mail address."""

from __future__ import annotations

from dataclasses import dataclass

from shop.errors import NotFound, ValidationError


@dataclass
class Customer:
    email: str
    name: str
    country: str = "DE"


class Customers:
    def __init__(self) -> None:
        self.by_email: dict[str, Customer] = {}

    def register(self, email: str, name: str, country: str = "DE") -> Customer:
        email = email.strip().lower()
        if "@" not in email:
            raise ValidationError("email", "is not an e-mail address")
        customer = Customer(email, name, country)
        self.by_email[email] = customer
        return customer

    def get(self, email: str) -> Customer:
        try:
            return self.by_email[email.strip().lower()]
        except KeyError:
            raise NotFound(f"no customer {email}") from None
