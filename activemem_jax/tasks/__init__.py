"""Tasks by name, for both papers: `data.name` in an ActiveMem config (training or
evaluation), `benchmark.name` in HyMem's agent harness picks a family registered here.

    ts = build_tasks(cfg, model)                  # cfg.data
    ts = build_section(cfg.benchmark, model)      # model: only first_token needs it
    ts.tasks, ts.make_env, ts.search, ts.score, ts.by_group()

A family is a builder `(section, model) -> TaskSet` with one `@register("name")` line;
the TaskSet names what it gives: the tasks, ActiveMem's environment factory
(`make_env()` or `make_env(max_turns)`), the search backend, the corpus the agents' search
tools open, the scorer of a final answer, the grouping (N objectives, or a difficulty
level). HyMem builds each task's tools itself (`hymem.tools.task_toolbox`: the
family's search, and parse_file over the task's own attachments). It unpacks as (tasks, make_env, search).

Registered (the modules beside this one):
- synthetic: the embedded multi-hop world, for ActiveMem and the agents alike;
- multi_objective_qa (MEM1's composition: N questions drawn from FlashRAG JSONL files,
  joined with "; ", answered with retrieval), single_qa (one question per task, the
  paper's Table 9): qa.py. Retrieval: `index` (a directory `python -m
  activemem_jax.data.index build` wrote), else `corpus` (a JSONL corpus, indexed in
  memory), else `retrieval_url` (a Search-R1 retrieval server), else closed-book. A path
  that does not exist stops the run with the field's name and the path;
- recall, dossier (envs/dossier.py: streams of entities with corrections, reminders and
  decoys): recall.py;
- gsm8k and math (the math environment; `delimiter` set: delimiter steps), first_token:
  single_shot.py;
- gpqa, aqua (multiple choice, one turn, envs/choice.py) and fever (claim verification
  with the QA tasks' retrieval, three labels, envs/fever.py): choice.py;
- gaia, browsecomp_plus (the HyMem paper's agent benchmarks): agents.py;
- humaneval, kodcode, bigcodebench (code with executed tests, envs/code.py): code.py;
- scienceworld (the simulator's tasks and variation splits, envs/scienceworld.py),
  textworld (TextWorld's generated games, envs/textworld_games.py) and alfworld (ALFWorld's game files, envs/alfworld.py): embodied.py.

Bad rows in the data files of the real-data tasks (qa_files, path, GAIA metadata,
BrowseComp-Plus queries): `bad_rows` "strict" (the default) stops at the first, naming the
file and the row; "skip" drops them with one summary line per reason and merges exact
duplicates (activemem_jax/data/bad_rows.py).

Importing this package imports no JAX.
"""

from activemem_jax.tasks._registry import (BUILDERS, TaskSet, answer_score, build_section, build_tasks,
                                           n_objectives, names, register, require_env)
from activemem_jax.tasks import agents, code, embodied, qa, recall, single_shot, synthetic  # noqa: F401  (registers)
from activemem_jax.tasks import choice  # noqa: F401  (registers)
from activemem_jax.tasks.agents import select_balanced
from activemem_jax.tasks.qa import compose
from activemem_jax.tasks.recall import recall_codes

__all__ = ["BUILDERS", "TaskSet", "answer_score", "build_section", "build_tasks", "compose", "n_objectives",
           "names", "recall_codes", "register", "require_env", "select_balanced"]
