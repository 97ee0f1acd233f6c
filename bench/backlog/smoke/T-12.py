class Cart:
    def count(self) -> int:
        return sum(self.lines.values())
