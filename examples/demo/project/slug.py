"""URL slugs for blog post titles."""


def slugify(title: str) -> str:
    """Turn a title into a URL slug: lowercase words joined by single dashes."""
    raise NotImplementedError
