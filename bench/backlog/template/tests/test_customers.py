import pytest

from shop.customers import Customers
from shop.errors import ValidationError


def test_register_and_get():
    customers = Customers()
    customers.register(" Ann@Example.com", "Ann")
    assert customers.get("ann@example.com").name == "Ann"


def test_an_address_without_at_is_refused():
    with pytest.raises(ValidationError) as refused:
        Customers().register("ann.example.com", "Ann")
    assert refused.value.field == "email"
