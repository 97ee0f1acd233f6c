import pytest
from gate import judged_from_start

from shop import orders
from shop.cart import Cart
from shop.catalog import Book, Catalog
from shop.errors import ValidationError

pytestmark = judged_from_start("T-10")


def placed():
    catalog = Catalog()
    catalog.add(Book("978-0", "Dune", "Frank Herbert", 1299, stock=5))
    cart = Cart("ann@example.com")
    cart.add("978-0", 2)
    return orders.place_order(cart, catalog), catalog


def test_cancel_puts_the_books_back():
    order, catalog = placed()
    orders.cancel(order, catalog)
    assert order.status == "cancelled" and catalog.get("978-0").stock == 5


def test_a_shipped_order_cannot_be_cancelled():
    order, catalog = placed()
    orders.mark_shipped(order)
    with pytest.raises(ValidationError) as refused:
        orders.cancel(order, catalog)
    assert refused.value.field == "status"
    assert order.status == "shipped" and catalog.get("978-0").stock == 3
