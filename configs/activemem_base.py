"""Shared defaults of every ActiveMem training config (paper 6.1 hyperparameters). The
fields, their meaning and what values they take: activemem_jax/schema.py.

Each launch config calls `base_config()` and overrides what differs. Ablations are
overrides on the command line (or in a config):
  w/o HLMT                    --config.policy.use_tree=False
  w/o latent injection        --config.policy.num_latents=0
  w/o tree action head        --config.policy.tree_actions=False
  w/o merge/delete            --config.policy.maintenance=False
  w/o hierarchical advantage  --config.train.lambda_h=0.0
  K in {2, 4, 8}              --config.policy.num_latents=8
"""

import dataclasses

import ml_collections

from activemem_jax.activemem.rollout import PolicyConfig
from activemem_jax.schema import SECTIONS, defaults


def policy_defaults(**overrides) -> ml_collections.ConfigDict:
    d = {f.name: getattr(PolicyConfig(), f.name) for f in dataclasses.fields(PolicyConfig)}
    d.update(overrides)
    return ml_collections.ConfigDict(d)


def base_config() -> ml_collections.ConfigDict:
    """Every section at its defaults (`activemem_jax/schema.py` declares each field, its
    type, default and allowed values); the policy at the paper's sizes."""
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.out_dir = "runs/activemem"
    for name, section in SECTIONS.items():
        c[name] = defaults(section)
    c.policy = policy_defaults(num_latents=4, capacity=4096, max_tokens=512, temperature=1.0)
    return c


PAPER_TABLES = ("table7", "table9", "synthetic", "code", "humaneval", "scienceworld", "alfworld", "textworld")
EMBODIED_TURNS = {"scienceworld": 40, "alfworld": 50, "textworld": 30}  # the step limit of an episode


def paper_data(c: ml_collections.ConfigDict, table: str, data_dir: str = "/path/to/flashrag",
               index: str = "/path/to/indexes/wiki18") -> ml_collections.ConfigDict:
    """The data of the ActiveMem paper's tables on config `c`: table7, 2-objective QA
    composed from NQ + HotpotQA training questions (MEM1's setup), evaluated at N = 1..16;
    table9, single-objective Wikipedia QA; synthetic, the embedded world (no files); code,
    KodCode's training file with executed tests, evaluated on its held-out file (the
    paper's code domain; BigCodeBench through `launch.eval_activemem` with
    data.name=bigcodebench); humaneval, the shipped HumanEval problems (no files);
    scienceworld, alfworld, textworld, the embodied text worlds (a command per turn, trained
    on the train split, evaluated on the held-out one: ScienceWorld's test variations,
    ALFWorld's valid_unseen folder under data.path, TextWorld's test seeds).
    Paths are placeholders: a run stops at the first one that does not exist, naming it."""
    if table not in PAPER_TABLES:
        raise ValueError(f"config parameter {table!r}: use one of {PAPER_TABLES} (e.g. --config=FILE.py:table9)")
    if table == "synthetic":
        return c
    if table in ("code", "humaneval"):  # a program per turn, two attempts, tests executed in the sandbox
        c.data.update(dict(name="kodcode" if table == "code" else "humaneval", max_turns=2,
                           path="/path/to/kodcode/train.jsonl" if table == "code" else "",
                           split="train"))
        c.eval.update(dict(n_objectives=(1,), split="test", turns_per_objective=2, extra_turns=0, max_turns_cap=2,
                           path="/path/to/kodcode/test.jsonl" if table == "code" else ""))
        c.policy.max_tokens = 1024
        return c
    if table in EMBODIED_TURNS:
        turns = EMBODIED_TURNS[table]
        c.data.update(dict(name=table, max_turns=turns, split="train",
                           path="/path/to/alfworld" if table == "alfworld" else ""))
        c.eval.update(dict(n_objectives=(1,), split="test", turns_per_objective=turns, extra_turns=0,
                           max_turns_cap=turns))
        c.policy.max_tokens = 32
        return c
    train = (f"{data_dir}/nq/train.jsonl", f"{data_dir}/hotpotqa/train.jsonl")
    c.data.update(dict(name="multi_objective_qa" if table == "table7" else "single_qa", qa_files=train,
                       index=index, n_objectives=(2,) if table == "table7" else (1,), max_turns=8))
    c.eval.update(dict(n_objectives=(1, 2, 4, 8, 16) if table == "table7" else (1,), max_turns_cap=33,
                       qa_files=(f"{data_dir}/hotpotqa/dev.jsonl", f"{data_dir}/nq/dev.jsonl")))
    return c
