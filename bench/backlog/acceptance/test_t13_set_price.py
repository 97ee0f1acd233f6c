import pytest
from gate import judged_from_start

from shop.catalog import Book, Catalog
from shop.errors import ValidationError

pytestmark = judged_from_start("T-13")


def catalog():
    books = Catalog()
    books.add(Book("978-0", "Dune", "Frank Herbert", 1299))
    return books


def test_set_price():
    books = catalog()
    books.set_price("978-0", 1499)
    assert books.get("978-0").price_cents == 1499


@pytest.mark.parametrize("price", [0, -100, 12.5])
def test_a_price_that_makes_no_sense_is_refused(price):
    books = catalog()
    with pytest.raises(ValidationError) as refused:
        books.set_price("978-0", price)
    assert refused.value.field == "price_cents"
    assert books.get("978-0").price_cents == 1299
