from shop.errors import NotFound, ValidationError


class Catalog:
    def restock(self, isbn: str, copies: int) -> None:
        if copies < 1:
            raise ValidationError("copies", "a delivery has at least one copy")
        self.get(isbn).stock += copies
