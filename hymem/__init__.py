"""HyMem: a training-free orchestrator that keeps the planner's context clean.

Imports no JAX. The orchestrator itself arrives with its own issue; this package
holds its place in the layout fixed by the design card.
"""
