from gate import judged_from_start

from shop.catalog import Book, Catalog

pytestmark = judged_from_start("T-03")


def test_search_by_title_or_author_ignoring_case():
    catalog = Catalog()
    catalog.add(Book("1", "Persuasion", "Jane Austen", 900))
    catalog.add(Book("2", "Emma", "Jane Austen", 800))
    catalog.add(Book("3", "Dune", "Frank Herbert", 1299))
    assert [b.title for b in catalog.search("austen")] == ["Emma", "Persuasion"]
    assert [b.title for b in catalog.search("DUNE")] == ["Dune"]
    assert len(catalog.search("")) == 3
    assert catalog.search("tolstoy") == []
