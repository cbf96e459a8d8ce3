"""activemem-jax: ActiveMem (latent memory controller over a frozen LLM) and HyMem in JAX.

Kept light on purpose: importing the package imports no JAX, so the JAX-free parts
(`activemem_jax.data`, `envs`, `metrics`, and `hymem`) stay JAX-free.
"""

__version__ = "0.1.0"
