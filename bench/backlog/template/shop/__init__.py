"""A small online bookshop: catalogue, carts, customers, orders and shipping."""
