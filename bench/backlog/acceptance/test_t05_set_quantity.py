import pytest
from gate import judged_from_start

from shop.cart import Cart
from shop.errors import ValidationError

pytestmark = judged_from_start("T-05")


def test_set_quantity_sets_and_zero_removes():
    cart = Cart("ann@example.com")
    cart.add("978-0", 2)
    cart.set_quantity("978-0", 5)
    assert cart.lines == {"978-0": 5}
    cart.set_quantity("978-1", 1)
    assert cart.lines == {"978-0": 5, "978-1": 1}
    cart.set_quantity("978-0", 0)
    assert cart.lines == {"978-1": 1}


def test_a_negative_quantity_is_refused():
    cart = Cart("ann@example.com")
    cart.add("978-0", 2)
    with pytest.raises(ValidationError) as refused:
        cart.set_quantity("978-0", -1)
    assert refused.value.field == "quantity"
    assert cart.lines == {"978-0": 2}
