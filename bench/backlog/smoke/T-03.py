class Catalog:
    def search(self, text: str) -> list[Book]:
        """Books whose title or author contains `text`, ignoring case, by title."""
        needle = text.lower()
        found = [b for b in self.books.values() if needle in b.title.lower() or needle in b.author.lower()]
        return sorted(found, key=lambda book: book.title)
