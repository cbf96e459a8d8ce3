"""Environments (plain Python, batched, no JAX)."""

from activemem_jax.envs.choice import ChoiceEnv, parse_choice
from activemem_jax.envs.fever import FeverEnv, parse_label
from activemem_jax.envs.first_token import FirstTokenEnv
from activemem_jax.envs.math_env import MathEnv, extract_final_answer, math_equal
from activemem_jax.envs.multi_objective_qa import MultiObjectiveQAEnv, parse_action
from activemem_jax.envs.recall import RecallEnv, make_recall_tasks
from activemem_jax.envs.search_agent import SearchAgentEnv
from activemem_jax.envs.segmented import SegmentedEnv

__all__ = ["ChoiceEnv", "FeverEnv", "FirstTokenEnv", "MathEnv", "MultiObjectiveQAEnv", "RecallEnv", "SearchAgentEnv",
           "SegmentedEnv", "make_recall_tasks", "extract_final_answer", "math_equal", "parse_action", "parse_choice",
           "parse_label"]
