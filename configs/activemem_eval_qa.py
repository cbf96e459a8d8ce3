"""ActiveMem vs the frozen model on real QA data, the ActiveMem paper's tables:

- table7 (default): N-objective QA composed as MEM1 does (HotpotQA + NQ questions),
  evaluated at N = 1, 2, 4, 8, 16 with retrieval;
- table9: single-objective Wikipedia QA (one FlashRAG file per run: NQ, TriviaQA, PopQA,
  HotpotQA, 2Wiki, Musique, Bamboogle).

    python -m launch.eval_activemem --config configs/activemem_eval_qa.py \\
        --config.data.qa_files="('/data/flashrag/hotpotqa/dev.jsonl','/data/flashrag/nq/dev.jsonl')" \\
        --config.data.index=/data/indexes/wiki18 --config.model.path=/data/models/Qwen2.5-1.5B-Instruct
    python -m launch.eval_activemem --config configs/activemem_eval_qa.py:table9 \\
        --config.data.qa_files="('/data/flashrag/popqa/test.jsonl',)" --config.data.index=...

Build the index once: `python -m activemem_jax.data.index build --corpus wiki-18.jsonl
--out /data/indexes/wiki18` (or point data.retrieval_url at a running Search-R1
server; both empty: closed-book). A path that does not exist stops the run and names the
field. Restore a trained controller with --config.checkpoint=<run>/checkpoints.
"""

import ml_collections

from activemem_jax.activemem.text_memory import eval_fields
from configs.activemem_base import policy_defaults


def get_config(table: str = "table7") -> ml_collections.ConfigDict:
    if table not in ("table7", "table9"):
        raise ValueError(f"configs/activemem_eval_qa.py:{table}: use table7 or table9")
    c = ml_collections.ConfigDict()
    c.model = ml_collections.ConfigDict(dict(path="embedded", dtype="float32"))
    c.engine = ml_collections.ConfigDict(dict(max_slots=16, max_len=8192))
    c.policy = policy_defaults(num_latents=4, max_tokens=256, capacity=4096)
    c.data = ml_collections.ConfigDict(dict(
        name="multi_objective_qa" if table == "table7" else "single_qa",
        qa_files=("/path/to/flashrag/hotpotqa/dev.jsonl", "/path/to/flashrag/nq/dev.jsonl") if table == "table7"
        else ("/path/to/flashrag/nq/test.jsonl",),
        index="",           # a directory written by `python -m activemem_jax.data.index build`
        corpus="",          # or a JSONL corpus indexed in memory (small corpora)
        retrieval_url="",   # or a Search-R1 retrieval server
        bad_rows="strict",  # qa_files rows: strict (stop at the first bad row) | skip (drop, one line per reason)
        retrieval_topk=3, seed=0,
        n_objectives=(1, 2, 4, 8, 16) if table == "table7" else (1,),
        n_tasks=100 if table == "table7" else 500, max_turns=12))
    c.eval = ml_collections.ConfigDict(dict(turns_per_objective=2, extra_turns=1, max_turns_cap=33,
                                           **eval_fields()))  # memorybank / expel (text_memory.py)
    c.variants = ("activemem", "plain", "truncate")
    c.temperature = 0.01   # paper 6.1 evaluation temperature
    c.seed = 0
    c.checkpoint = ""
    c.out_dir = f"runs/activemem_eval_qa_{table}"
    return c
