from shop.shipping import shipping_cents


def test_rates_by_weight_and_country():
    assert shipping_cents(800, "DE") == 399
    assert shipping_cents(1500, "DE") == 549
    assert shipping_cents(1500, "FR") == 1098
