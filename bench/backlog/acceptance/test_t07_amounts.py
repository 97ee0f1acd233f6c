import pytest
from gate import judged_from_start

from shop.errors import ValidationError
from shop.money import cents

pytestmark = judged_from_start("T-07")


@pytest.mark.parametrize("typed", ["12.345", "1O.50", "", "abc", "1.2.3", "12,50"])
def test_malformed_amounts_are_refused(typed):
    with pytest.raises(ValidationError) as refused:
        cents(typed)
    assert refused.value.field == "amount"


def test_plain_amounts_still_read():
    assert [cents(t) for t in ("12", "12.5", "12.50", " 0.05 ")] == [1200, 1250, 1250, 5]
