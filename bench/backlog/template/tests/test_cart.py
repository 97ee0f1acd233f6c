from shop.cart import Cart
from shop.catalog import Book, Catalog


def test_cart_totals():
    catalog = Catalog()
    catalog.add(Book("978-0", "Dune", "Frank Herbert", 1299, stock=5, weight_g=600))
    cart = Cart("ann@example.com")
    cart.add("978-0")
    cart.add("978-0", 2)
    assert cart.lines == {"978-0": 3}
    assert cart.total_cents(catalog) == 3897
    assert cart.weight_g(catalog) == 1800
    cart.remove("978-0")
    assert cart.lines == {}
