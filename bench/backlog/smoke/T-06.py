from shop.money import format_price


@dataclass
class Order:
    number: int
    customer_email: str
    lines: dict[str, int]
    total_cents: int
    status: str = "open"  # open -> paid -> shipped; or cancelled
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        copies = sum(self.lines.values())
        books = "1 book" if copies == 1 else f"{copies} books"
        return f"Order {self.number}: {books}, {format_price(self.total_cents)}"
