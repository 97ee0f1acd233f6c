class Catalog:
    def low_stock(self, threshold: int = 3) -> list[Book]:
        low = [book for book in self.books.values() if book.stock <= threshold]
        return sorted(low, key=lambda book: (book.stock, book.title))
