from gate import judged_from_start

from shop.catalog import Book, Catalog

pytestmark = judged_from_start("T-09")


def test_low_stock_fewest_first():
    catalog = Catalog()
    for isbn, title, stock in [("1", "Emma", 3), ("2", "Dune", 0), ("3", "Ulysses", 9), ("4", "Beloved", 3)]:
        catalog.add(Book(isbn, title, "someone", 1000, stock=stock))
    assert [b.title for b in catalog.low_stock()] == ["Dune", "Beloved", "Emma"]
    assert [b.title for b in catalog.low_stock(threshold=0)] == ["Dune"]
