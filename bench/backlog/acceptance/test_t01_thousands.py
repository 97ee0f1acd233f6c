from gate import judged_from_start

from shop.money import format_price

pytestmark = judged_from_start("T-01")


def test_thousands_are_grouped():
    assert format_price(123456) == "€1,234.56"
    assert format_price(100000000) == "€1,000,000.00"
    assert format_price(99999) == "€999.99"
