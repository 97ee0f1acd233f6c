class Customers:
    def change_country(self, email: str, country: str) -> None:
        code = country.strip()
        if len(code) != 2 or not code.isalpha():
            raise ValidationError("country", "must be a two-letter ISO code")
        self.get(email).country = code.upper()
