import pytest
from gate import judged_from_start

from shop.errors import ValidationError
from shop.shipping import shipping_cents

pytestmark = judged_from_start("T-16")


@pytest.mark.parametrize("weight", [0, -400])
def test_no_weight_is_refused(weight):
    with pytest.raises(ValidationError) as refused:
        shipping_cents(weight, "DE")
    assert refused.value.field == "weight_g"


def test_parcels_still_cost_what_they_did():
    assert shipping_cents(800, "DE") == 399
