from slug import slugify


def test_simple_title():
    assert slugify("Hello World") == "hello-world"


def test_punctuation_is_dropped():
    assert slugify("Hello, World!") == "hello-world"


def test_runs_of_spaces_make_one_dash():
    assert slugify("  Many   spaces  here ") == "many-spaces-here"


def test_digits_are_kept():
    assert slugify("Python 3.11 released") == "python-3-11-released"
