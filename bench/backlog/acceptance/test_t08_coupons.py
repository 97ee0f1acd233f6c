import importlib

import pytest
from gate import judged_from_start

from shop.errors import ValidationError

pytestmark = judged_from_start("T-08")


def apply_coupon(total, code):
    return importlib.import_module("shop.coupons").apply_coupon(total, code)


def test_known_codes():
    assert apply_coupon(2599, "SAVE10") == 2339
    assert apply_coupon(2599, "save10") == 2339
    assert apply_coupon(2599, "WELCOME5") == 2099
    assert apply_coupon(300, "welcome5") == 0


def test_an_unknown_code_is_refused():
    with pytest.raises(ValidationError) as refused:
        apply_coupon(2599, "FREEBOOKS")
    assert refused.value.field == "code"
