"""The tree and controller sizes the embedded-model tests of this package share: one set
of static shapes, so a program one test compiles is loaded by the next from the run's
compilation cache (tests/conftest.py) instead of compiled again."""

SMALL = dict(capacity=64, max_children=4, max_depth=4, max_ops=4, hidden=64)
