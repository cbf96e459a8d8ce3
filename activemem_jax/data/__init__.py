"""Data: the synthetic multi-hop world, retrieval, and loaders for the papers' formats.

Imports no JAX (the HyMem orchestrator uses it).
"""
