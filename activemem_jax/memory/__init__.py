"""ActiveMem's memory: the Hierarchical Latent Memory Tree (`activemem_jax.memory.tree`)."""
