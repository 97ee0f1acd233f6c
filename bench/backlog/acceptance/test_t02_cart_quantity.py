import pytest
from gate import judged_from_start

from shop.cart import Cart
from shop.errors import ValidationError

pytestmark = judged_from_start("T-02")


@pytest.mark.parametrize("quantity", [0, -2])
def test_a_quantity_below_one_is_refused(quantity):
    cart = Cart("ann@example.com")
    cart.add("978-0", 1)
    with pytest.raises(ValidationError) as refused:
        cart.add("978-0", quantity)
    assert refused.value.field == "quantity"
    assert cart.lines == {"978-0": 1}


def test_positive_quantities_still_add_up():
    cart = Cart("ann@example.com")
    cart.add("978-0", 2)
    cart.add("978-0")
    assert cart.lines == {"978-0": 3}
