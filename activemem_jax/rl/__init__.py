"""ActiveMem training: GRPO / SFT over the controller (and optional LoRA).

    from activemem_jax.rl import grpo
"""
