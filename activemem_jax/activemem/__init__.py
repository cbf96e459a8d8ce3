"""ActiveMem: a dual-head controller over a frozen LLM and a latent memory tree.

    from activemem_jax.activemem import ActiveMem, PolicyConfig, collate
    policy = ActiveMem(model, engine, PolicyConfig(num_latents=4))
    result = policy.rollout(env, tasks, seed=0)
"""

from activemem_jax.activemem.controller import (INSERT, NOOP, TREE_ACTIONS, UPDATE, Controller,
                                                ControllerOutput, masked_log_probs)
from activemem_jax.activemem.inject import policy_forward, policy_logprobs, splice, token_logprobs
from activemem_jax.activemem.layout import PromptLayout, TurnPrompt
from activemem_jax.activemem.lora import init_lora, merge_lora
from activemem_jax.activemem.collate import collate
from activemem_jax.activemem.commit import format_telemetry, telemetry
from activemem_jax.activemem.observe import ObservationEncoder
from activemem_jax.activemem.policy_config import PolicyConfig, Step, Trajectory
from activemem_jax.activemem.rollout import ActiveMem, RolloutResult, repeat_tasks, request_seed
from activemem_jax.activemem.step import StepConfig, StepOutput, controller_step

__all__ = [
    "ActiveMem", "Controller", "ControllerOutput", "INSERT", "NOOP", "ObservationEncoder", "PolicyConfig",
    "PromptLayout", "format_telemetry", "telemetry",
    "RolloutResult", "Step", "StepConfig", "StepOutput", "TREE_ACTIONS", "Trajectory", "TurnPrompt",
    "UPDATE", "collate", "controller_step", "init_lora", "masked_log_probs", "merge_lora",
    "policy_forward", "policy_logprobs", "repeat_tasks", "request_seed", "splice", "token_logprobs",
]
