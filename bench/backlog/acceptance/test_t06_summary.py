from gate import judged_from_start

from shop.orders import Order

pytestmark = judged_from_start("T-06")


def test_summary_counts_copies_and_shows_the_total():
    assert Order(7, "ann@example.com", {"1": 2, "2": 1}, 3897).summary() == "Order 7: 3 books, €38.97"
    assert Order(8, "ann@example.com", {"1": 1}, 899).summary() == "Order 8: 1 book, €8.99"
