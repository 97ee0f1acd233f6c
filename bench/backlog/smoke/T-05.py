from shop.errors import ValidationError


class Cart:
    def set_quantity(self, isbn: str, quantity: int) -> None:
        if quantity < 0:
            raise ValidationError("quantity", "cannot be negative")
        if quantity == 0:
            self.lines.pop(isbn, None)
        else:
            self.lines[isbn] = quantity
