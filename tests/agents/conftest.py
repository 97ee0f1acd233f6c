"""Fixtures of the agent tests: `model_server`, a scripted model on a loopback port."""

from model_server import model_server

__all__ = ["model_server"]
