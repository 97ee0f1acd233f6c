from shop.errors import NotFound, ValidationError


class Catalog:
    def set_price(self, isbn: str, price_cents: int) -> None:
        if not isinstance(price_cents, int) or price_cents <= 0:
            raise ValidationError("price_cents", "must be a whole number of cents above zero")
        self.get(isbn).price_cents = price_cents
