"""The books on sale."""

from __future__ import annotations

from dataclasses import dataclass

from shop.errors import NotFound


@dataclass
class Book:
    isbn: str
    title: str
    author: str
    price_cents: int
    stock: int = 0
    weight_g: int = 400


class Catalog:
    def __init__(self) -> None:
        self.books: dict[str, Book] = {}

    def add(self, book: Book) -> None:
        self.books[book.isbn] = book

    def get(self, isbn: str) -> Book:
        try:
            return self.books[isbn]
        except KeyError:
            raise NotFound(f"no book with ISBN {isbn}") from None

    def in_stock(self) -> list[Book]:
        return [book for book in self.books.values() if book.stock > 0]
