from shop.money import cents, format_price


def test_cents_reads_what_people_type():
    assert cents("12.50") == 1250
    assert cents("7") == 700
    assert cents(" 0.5 ") == 50


def test_format_price():
    assert format_price(1250) == "€12.50"
    assert format_price(5) == "€0.05"
