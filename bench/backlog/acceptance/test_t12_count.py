from gate import judged_from_start

from shop.cart import Cart

pytestmark = judged_from_start("T-12")


def test_count_adds_the_copies_of_every_line():
    cart = Cart("ann@example.com")
    assert cart.count() == 0
    cart.add("978-0", 2)
    cart.add("978-1")
    assert cart.count() == 3
