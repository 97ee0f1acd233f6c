import pytest

from shop.catalog import Book, Catalog
from shop.errors import NotFound


def test_books_are_found_by_isbn_and_listed_when_in_stock():
    catalog = Catalog()
    catalog.add(Book("978-0", "Dune", "Frank Herbert", 1299, stock=2))
    catalog.add(Book("978-1", "Emma", "Jane Austen", 899))
    assert catalog.get("978-0").title == "Dune"
    assert [b.isbn for b in catalog.in_stock()] == ["978-0"]
    with pytest.raises(NotFound):
        catalog.get("978-9")
