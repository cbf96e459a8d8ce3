"""Moved to `activemem_jax.tasks` (one registry for both papers); these names stay
importable from here."""

from activemem_jax.tasks import BUILDERS, build_section, build_tasks, compose, recall_codes, register  # noqa: F401

__all__ = ["BUILDERS", "build_section", "build_tasks", "compose", "recall_codes", "register"]
