import pytest
from gate import judged_from_start

from shop.catalog import Book, Catalog
from shop.errors import NotFound, ValidationError

pytestmark = judged_from_start("T-04")


def catalog():
    books = Catalog()
    books.add(Book("978-0", "Dune", "Frank Herbert", 1299, stock=2))
    return books


def test_restock_adds_copies():
    books = catalog()
    books.restock("978-0", 5)
    assert books.get("978-0").stock == 7


@pytest.mark.parametrize("copies", [0, -3])
def test_no_copies_is_refused(copies):
    books = catalog()
    with pytest.raises(ValidationError) as refused:
        books.restock("978-0", copies)
    assert refused.value.field == "copies"
    assert books.get("978-0").stock == 2


def test_an_unknown_book_is_not_found():
    with pytest.raises(NotFound):
        catalog().restock("978-9", 1)
