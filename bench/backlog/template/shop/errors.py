"""The errors the shop raises on purpose; the API turns them into HTTP answers."""


class ShopError(Exception):
    """Base class of the shop's own errors."""


class ValidationError(ShopError):
    """Input the shop refuses (HTTP 422). `field` names the argument at fault: the web
    client highlights that field of its form."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NotFound(ShopError):
    """A book, customer or order that does not exist (HTTP 404)."""
