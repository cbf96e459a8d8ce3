"""The tiny random backbone and its engine that the training tests use (tests/rl/conftest.py)."""

from tests.rl.conftest import tiny_dir, tiny_engine, tiny_model  # noqa: F401  (fixtures)
