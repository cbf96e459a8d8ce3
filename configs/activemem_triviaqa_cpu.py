"""ActiveMem on TriviaQA (single-objective QA, the `single_qa` family) with the embedded
SmolLM2-135M on a CPU: SFT on the QA files' gold replies (a search with the question, then
the first gold answer), then GRPO; held-out EM on TriviaQA's dev questions before and after.
configs/activemem_popqa_cpu.py evaluates the checkpoint this run writes on PopQA.

    python -m launch.train --config configs/activemem_triviaqa_cpu.py \\
        [--config.data.index=indexes/wiki18 | --config.data.corpus=corpus.jsonl]

Data: FlashRAG's TriviaQA JSONL ({"id", "question", "golden_answers"}), put by the user
under data/flashrag/triviaqa/ (train.jsonl for training, dev.jsonl for the held-out
evaluation); nothing is downloaded at run time, and a missing file stops the run naming
the field and the path. Search: closed-book by default (every search finds nothing); give
`data.index` (a directory `python -m activemem_jax.data.index build` wrote), `data.corpus`
(a JSONL corpus indexed in memory) or `data.retrieval_url` (a Search-R1 server) to search.
One training seed, so the checkpoints land in runs/activemem_triviaqa_cpu/checkpoints.
"""

from configs.activemem_base import base_config, policy_defaults

TRIVIAQA = "data/flashrag/triviaqa"


def policy():
    """The controller and prompt layout; the PopQA evaluation restores the checkpoint into the same."""
    return policy_defaults(num_latents=1, capacity=256, max_depth=4, max_ops=8, max_tokens=64, hidden=256,
                           latent_init_std=0.02, temperature=1.0, layout="observation", tree_scope="episode",
                           system_prompt="")


def get_config():
    c = base_config()
    c.out_dir = "runs/activemem_triviaqa_cpu"
    c.model.update(dtype="auto", remat=False)  # the embedded SmolLM2-135M-Instruct; bfloat16 on a CPU with AMX
    c.engine.update(max_slots=16, max_len=1024)
    c.policy = policy()
    c.data.update(name="single_qa", qa_files=(f"{TRIVIAQA}/train.jsonl",), n_objectives=(1,), n_tasks=256,
                  max_turns=3, retrieval_topk=2, index="", corpus="", retrieval_url="")
    c.train.update(steps=24, sft_steps=20, group_size=4, prompts_per_step=2, mini_batch_rows=16, seeds=(0,),
                   micro_batch_rows=4)
    c.optim.update(lr_controller=1e-3, warmup_steps=4)
    c.checkpoint.update(every=10, keep=2)
    c.eval.update(enabled=True, n_tasks=16, n_objectives=(1,), turns_per_objective=2, extra_turns=1,
                  max_turns_cap=3, qa_files=(f"{TRIVIAQA}/dev.jsonl",))
    return c
