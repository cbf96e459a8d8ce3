"""Shared defaults of every ActiveMem training config (paper 6.1 hyperparameters). The
fields, their meaning and what values they take: activemem_jax/schema.py.

Each launch config calls `base_config()` and overrides what differs. Ablations are
overrides on the command line (or in a config):
  w/o HLMT                    --config.policy.use_tree=False
  w/o latent injection        --config.policy.num_latents=0
  w/o tree action head        --config.policy.tree_actions=False
  w/o merge/delete            --config.policy.maintenance=False
  w/o hierarchical advantage  --config.train.lambda_h=0.0
  REINFORCE / REINFORCE++     --config.train.advantage=reinforce (or reinforce_pp; rl/grpo.py)
  K in {2, 4, 8}              --config.policy.num_latents=8   (the paper configs: 4, table1_datasets.PAPER_K)
Table 1 (paper_data): --config=configs/activemem_qwen3_8b.py:gsm8k,sft (ActiveMem_SFT) or :gsm8k,grpo
(ActiveMem_GRPO, the default); the datasets, metrics and domains: configs/table1_datasets.py.
"""

import dataclasses

import ml_collections

from activemem_jax.activemem.rollout import PolicyConfig
from activemem_jax.schema import SECTIONS, defaults
from configs.table1_datasets import PAPER_K, RECIPES, SFT_WARM_STEPS, TABLE1, TRAINED_ON


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
    c.policy = policy_defaults(num_latents=PAPER_K, capacity=4096, max_tokens=512, temperature=1.0)
    return c


PAPER_TABLES = ("table7", "table9", "synthetic", "code", "humaneval", "scienceworld", "alfworld",
                *(name for name in TABLE1 if name not in ("scienceworld", "alfworld")), "textworld")
EMBODIED_TURNS = {"scienceworld": 40, "alfworld": 50, "textworld": 30}  # the step limit of an episode
EVAL_ALL = 1_000_000  # eval.n_tasks of a Table 1 run: every held-out task (families take min(n_tasks, rows))
# Table 1's single-file datasets: (data.path, eval.path), placeholders like the others
FILES = {"gsm8k": ("/path/to/gsm8k/train.jsonl", "/path/to/gsm8k/test.jsonl"),
         "math": ("/path/to/MATH/train", "/path/to/MATH/test"),
         # GPQA has no training split: train on gpqa_main's rows outside diamond (main holds diamond)
         "gpqa": ("/path/to/gpqa/gpqa_main_minus_diamond.csv", "/path/to/gpqa/gpqa_diamond.csv"),
         "aqua": ("/path/to/aqua/train.json", "/path/to/aqua/test.json"),
         "kodcode": ("/path/to/kodcode/train.jsonl", "/path/to/kodcode/test.jsonl"),
         "bigcodebench": ("", "/path/to/bigcodebench/test.jsonl")}  # evaluation only


def paper_data(c: ml_collections.ConfigDict, table: str, data_dir: str = "/path/to/flashrag",
               index: str = "/path/to/indexes/wiki18") -> ml_collections.ConfigDict:
    """The data of the ActiveMem paper's tables on config `c`: table7, 2-objective QA
    composed from NQ + HotpotQA training questions (MEM1's setup), evaluated at N = 1..16;
    table9, single-objective Wikipedia QA; synthetic, the embedded world (no files); code,
    KodCode's training file with executed tests, evaluated on its held-out file (the
    paper's code domain); humaneval, the shipped HumanEval problems (no files);
    scienceworld, alfworld, textworld, the embodied text worlds (a command per turn, trained
    on the train split, evaluated on the held-out one: ScienceWorld's test variations,
    ALFWorld's valid_unseen folder under data.path, TextWorld's test seeds).

    Table 1 (configs/table1_datasets.TABLE1: alfworld, scienceworld, triviaqa, popqa,
    kodcode, bigcodebench, gpqa, gsm8k, math, aqua) with a recipe: `table` is
    "<dataset>[,sft|,grpo]" (grpo when none is given, except for alfworld and scienceworld,
    whose bare names keep the training-only parameter they were before Table 1); the run evaluates the whole held-out
    set before and after training and writes under out_dir/<dataset>_<recipe>. sft
    (ActiveMem_SFT): every step SFT on the environment's expert turns (train.algo="sft");
    grpo (ActiveMem_GRPO): the first SFT_WARM_STEPS steps SFT, then GRPO. A recipe after
    another parameter (":table9,sft") sets that schedule alone. popqa and bigcodebench
    (no training split) give an evaluation config (launch.eval_activemem) of the controller
    the TriviaQA / KodCode run of the same recipe wrote (TRAINED_ON).
    K: --config.policy.num_latents (default PAPER_K).
    Paths are placeholders: a run stops at the first one that does not exist, naming it."""
    name, _, recipe = table.partition(",")
    if name not in PAPER_TABLES:
        raise ValueError(f"config parameter {table!r}: use one of {PAPER_TABLES} (e.g. --config=FILE.py:table9)")
    if recipe and recipe not in RECIPES:
        raise ValueError(f"config parameter {table!r}: recipe {recipe!r}: use one of {tuple(RECIPES)} "
                         "(e.g. --config=FILE.py:gsm8k,sft)")
    if name in TABLE1 and (recipe or name not in EMBODIED_TURNS):  # ":scienceworld" keeps its older meaning
        return _table1(c, name, recipe or "grpo", data_dir, index)
    _task_data(c, name, data_dir, index)
    if recipe:
        _recipe(c, recipe)
    return c


def _recipe(c: ml_collections.ConfigDict, recipe: str) -> None:
    if recipe == "sft":  # all steps SFT, however many --config.train.steps asks for
        c.train.update(algo="sft", sft_steps=0)
    else:
        c.train.update(algo="grpo", sft_steps=min(SFT_WARM_STEPS, c.train.steps))


def _task_data(c: ml_collections.ConfigDict, table: str, data_dir: str, index: str) -> None:
    if table == "synthetic":
        return
    if table in ("code", "humaneval", "kodcode", "bigcodebench"):  # a program per turn, two attempts
        family = {"code": "kodcode"}.get(table, table)
        train, test = FILES.get(family, ("", ""))
        c.data.update(dict(name=family, max_turns=2, path=train, split="train"))
        c.eval.update(dict(n_objectives=(1,), split="test", turns_per_objective=2, extra_turns=0, max_turns_cap=2,
                           path=test))
        c.policy.max_tokens = 1024
        return
    if table in EMBODIED_TURNS:
        turns = EMBODIED_TURNS[table]
        c.data.update(dict(name=table, max_turns=turns, split="train",
                           path="/path/to/alfworld" if table == "alfworld" else ""))
        c.eval.update(dict(n_objectives=(1,), split="test", turns_per_objective=turns, extra_turns=0,
                           max_turns_cap=turns))
        c.policy.max_tokens = 32
        return
    if table in FILES:  # gsm8k, math (one turn: the worked answer), gpqa, aqua (one turn: the option)
        train, test = FILES[table]
        c.data.update(dict(name=table, path=train, n_objectives=(1,), max_turns=1, split="train"))
        c.eval.update(dict(n_objectives=(1,), split="test", path=test, turns_per_objective=1, extra_turns=0,
                           max_turns_cap=1))
        if table in ("gsm8k", "math"):
            c.policy.max_tokens = 1024  # the worked solution before the answer
        return
    if table in ("triviaqa", "popqa"):
        c.data.update(dict(name="single_qa", qa_files=(f"{data_dir}/triviaqa/train.jsonl",), index=index,
                           n_objectives=(1,), max_turns=8))
        c.eval.update(dict(n_objectives=(1,), max_turns_cap=33, qa_files=(f"{data_dir}/triviaqa/dev.jsonl",)))
        return
    train = (f"{data_dir}/nq/train.jsonl", f"{data_dir}/hotpotqa/train.jsonl")
    c.data.update(dict(name="multi_objective_qa" if table == "table7" else "single_qa", qa_files=train,
                       index=index, n_objectives=(2,) if table == "table7" else (1,), max_turns=8))
    c.eval.update(dict(n_objectives=(1, 2, 4, 8, 16) if table == "table7" else (1,), max_turns_cap=33,
                       qa_files=(f"{data_dir}/hotpotqa/dev.jsonl", f"{data_dir}/nq/dev.jsonl")))


def _table1(c: ml_collections.ConfigDict, name: str, recipe: str, data_dir: str,
            index: str) -> ml_collections.ConfigDict:
    """A Table 1 cell's run: the dataset's data, the recipe's schedule, the whole held-out
    set evaluated before and after, out_dir/<dataset>_<recipe>; popqa: the evaluation config."""
    base_out = c.out_dir
    _task_data(c, TRAINED_ON.get(name, name), data_dir, index)
    _recipe(c, recipe)
    c.eval.update(enabled=True, n_tasks=EVAL_ALL)
    c.out_dir = f"{base_out}/{name}_{recipe}"
    if name in TRAINED_ON:
        return transfer_eval(c, name, f"{base_out}/{TRAINED_ON[name]}_{recipe}/checkpoints", data_dir)
    return c


def transfer_eval(train: ml_collections.ConfigDict, dataset: str, checkpoint: str,
                  data_dir: str) -> ml_collections.ConfigDict:
    """The evaluation config (launch.eval_activemem) on `dataset` (popqa: FlashRAG ships its
    test split only; bigcodebench: one published set) of the controller a training config
    `train` (TriviaQA's, KodCode's) wrote: the same model, engine, policy, search and turn
    budget; the controller restored from `checkpoint` (with several seeds, point it at each
    seed_<k>/checkpoints and out_dir at seed_<k>)."""
    c = ml_collections.ConfigDict()
    for name in ("model", "mesh", "sharding", "engine", "policy", "eval"):
        c[name] = train[name].copy_and_resolve_references()
    c.data = train.data.copy_and_resolve_references()
    c.data.update(n_tasks=EVAL_ALL, split="test")
    if dataset == "popqa":
        c.data.qa_files = (f"{data_dir}/popqa/test.jsonl",)
    else:
        c.data.update(name=dataset, path=FILES[dataset][1])
    c.variants = ("activemem",)  # Table 1's cell; add "plain", "truncate" for the frozen model's
    c.temperature = 0.01         # paper 6.1 evaluation temperature
    c.seed = 0
    c.checkpoint = checkpoint
    c.out_dir = train.out_dir
    return c
