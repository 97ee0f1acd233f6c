import pytest
from gate import judged_from_start

from shop.customers import Customers
from shop.errors import ValidationError

pytestmark = judged_from_start("T-11")


def test_country_is_stored_upper_case():
    customers = Customers()
    customers.register("ann@example.com", "Ann")
    customers.change_country("ann@example.com", "fr")
    assert customers.get("ann@example.com").country == "FR"


@pytest.mark.parametrize("country", ["France", "F", "", "F1"])
def test_anything_but_two_letters_is_refused(country):
    customers = Customers()
    customers.register("ann@example.com", "Ann")
    with pytest.raises(ValidationError) as refused:
        customers.change_country("ann@example.com", country)
    assert refused.value.field == "country"
    assert customers.get("ann@example.com").country == "DE"
