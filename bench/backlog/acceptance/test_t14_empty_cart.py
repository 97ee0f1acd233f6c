import pytest
from gate import judged_from_start

from shop.cart import Cart
from shop.catalog import Catalog
from shop.errors import ValidationError
from shop.orders import place_order

pytestmark = judged_from_start("T-14")


def test_an_empty_cart_is_refused():
    with pytest.raises(ValidationError) as refused:
        place_order(Cart("ann@example.com"), Catalog())
    assert refused.value.field == "cart"
