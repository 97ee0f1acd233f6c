"""What the benchmark knows about its backlog that the repository does not say.

The pitfall is a house convention of the bookshop that its tests enforce: input the shop
refuses raises `shop.errors.ValidationError(field, message)`, whose `field` names the
argument at fault (the web client highlights it), never a bare ValueError. One module
uses it already; nothing else says so. A model that has not met it writes
`raise ValueError(...)`, which the tests fail with the error the code raised.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "template"  # the repository, with its backlog in .openagents/tasks.jsonl
ACCEPTANCE = HERE / "acceptance"  # each task's tests, hidden from the model
SMOKE_CODE = HERE / "smoke"  # the scripted model's right code for each task

# The tasks whose acceptance tests refuse input: where the convention bites.
PITFALL = frozenset({"T-02", "T-04", "T-05", "T-07", "T-08", "T-10", "T-11", "T-13", "T-14", "T-16"})
# The file each task changes, as the scripted model names it (the shapes of real replies).
FILES = {
    "T-01": "shop/money.py", "T-02": "shop/cart.py", "T-03": "shop/catalog.py", "T-04": "shop/catalog.py",
    "T-05": "shop/cart.py", "T-06": "shop/orders.py", "T-07": "shop/money.py", "T-08": "shop/coupons.py",
    "T-09": "shop/catalog.py", "T-10": "shop/orders.py", "T-11": "shop/customers.py", "T-12": "shop/cart.py",
    "T-13": "shop/catalog.py", "T-14": "shop/orders.py", "T-15": "shop/money.py", "T-16": "shop/shipping.py",
}
