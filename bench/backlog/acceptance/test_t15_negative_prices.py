from gate import judged_from_start

from shop.money import format_price

pytestmark = judged_from_start("T-15")


def test_the_minus_sign_comes_first():
    assert format_price(-350) == "-€3.50"
    assert format_price(-123456) == "-€1,234.56"
    assert format_price(-5) == "-€0.05"
    assert format_price(350) == "€3.50"
