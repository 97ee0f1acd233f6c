from shop.cart import Cart
from shop.catalog import Book, Catalog
from shop.orders import mark_paid, place_order


def test_an_order_takes_the_books_out_of_stock():
    catalog = Catalog()
    catalog.add(Book("978-0", "Dune", "Frank Herbert", 1299, stock=5))
    cart = Cart("ann@example.com")
    cart.add("978-0", 2)
    order = place_order(cart, catalog)
    assert order.total_cents == 2598 and order.status == "open"
    assert catalog.get("978-0").stock == 3
    mark_paid(order)
    assert order.status == "paid"
