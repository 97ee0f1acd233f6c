from shop.errors import ValidationError


class Cart:
    def add(self, isbn: str, quantity: int = 1) -> None:
        if quantity < 1:
            raise ValidationError("quantity", "must be at least 1")
        self.lines[isbn] = self.lines.get(isbn, 0) + quantity
