"""Evaluation only: the controller configs/activemem_triviaqa_cpu.py trained on TriviaQA,
evaluated on PopQA (the `single_qa` family) against the frozen model's full-history and
truncated-context variants, on a CPU with the embedded SmolLM2-135M.

    python -m launch.train --config configs/activemem_triviaqa_cpu.py        # first: the checkpoint
    python -m launch.eval_activemem --config configs/activemem_popqa_cpu.py \\
        [--config.data.index=indexes/wiki18 | --config.data.corpus=corpus.jsonl]

Data: FlashRAG's PopQA JSONL ({"id", "question", "golden_answers"}; FlashRAG ships only its
test split), put by the user at data/flashrag/popqa/test.jsonl; nothing is downloaded at run
time, and a missing file stops the run naming the field and the path. `checkpoint` names the
TriviaQA run's checkpoints directory (its newest step is restored); the model and the policy
are that run's, so the checkpoint fits. Search as in the training config: closed-book unless
data.index, data.corpus or data.retrieval_url is given (use the same one as the training run).
"""

import ml_collections

from configs.activemem_triviaqa_cpu import get_config as triviaqa


def get_config() -> ml_collections.ConfigDict:
    train = triviaqa()
    c = ml_collections.ConfigDict()
    c.model = ml_collections.ConfigDict(dict(path=train.model.path, dtype=train.model.dtype))
    c.engine = ml_collections.ConfigDict(dict(max_slots=train.engine.max_slots, max_len=train.engine.max_len))
    c.policy = train.policy
    c.data = ml_collections.ConfigDict(dict(
        name="single_qa", qa_files=("data/flashrag/popqa/test.jsonl",), index=train.data.index,
        corpus=train.data.corpus, retrieval_url=train.data.retrieval_url, bad_rows="strict",
        retrieval_topk=train.data.retrieval_topk, seed=0, n_objectives=(1,), n_tasks=100,
        max_turns=train.data.max_turns))
    c.eval = ml_collections.ConfigDict(dict(turns_per_objective=train.eval.turns_per_objective,
                                            extra_turns=train.eval.extra_turns, max_turns_cap=train.eval.max_turns_cap))
    c.variants = ("activemem", "plain", "truncate")
    c.temperature = 0.01   # paper 6.1 evaluation temperature
    c.seed = 0
    c.checkpoint = f"{train.out_dir}/checkpoints"  # the TriviaQA run's (one seed: no seed_k folder)
    c.out_dir = "runs/activemem_popqa_cpu"
    return c
