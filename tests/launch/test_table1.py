"""The paper's Table 1: every backbone config takes every Table 1 dataset and recipe as its
config parameter, and launch/table1.py turns runs' summary.json files into rows and the rows
into the table (no model is loaded: the summaries are written here in launch.train's and
launch.eval_activemem's layouts)."""

import importlib
import json
import os

import pytest

from activemem_jax import schema
from activemem_jax.config_files import apply_overrides
from configs.activemem_base import EMBODIED_TURNS
from configs.table1_datasets import PAPER_K, SFT_WARM_STEPS, TABLE1, TRAINED_ON
from launch import table1

BACKBONES = ("activemem_qwen3_8b", "activemem_smollm3_3b", "activemem_qwen2_5_1_5b")


def stats(em: float) -> dict:
    """One N's entry of evaluate.summarize, as launch.train stores it (METRICS, peak max)."""
    return {"tasks": 16, "em": em, "f1": em, "peak_tokens": 900.0, "task_tokens": 40.0, "peak_beyond_task": 860.0,
            "dependency_length": 3.0, "time_s": 1.2, "compile_s": 0.0, "turns": 1.0, "peak_tokens_max": 1200}


def train_summary(seed: int, before: float, after: float, rules=None) -> dict:
    """launch.train's summary.json (launch/train.py main): runs, steps, final, checkpoints,
    eval {variant: {str(N): stats}, baselines}, provenance."""
    final = {"step": 500, "reward_mean": 0.4}
    return {"runs": [{"seed": seed, "steps": 500, "final": final, "checkpoints": "runs/x/checkpoints"}],
            "steps": 500, "final": final, "checkpoints": "runs/x/checkpoints",
            "eval": {"before": {"1": stats(before)}, "after": {"1": stats(after)},
                     "baselines": rules if rules is not None else {"empty": 0.0}},
            "provenance": {"commit": "abc123", "dirty": False, "command": "python -m launch.train", "date": "2026-01-01",
                           "machine": "test", "wall_s": 10.0}}


def write(path, summary) -> str:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "summary.json"), "w") as f:
        json.dump(summary, f)
    return str(path)


# ------------------------------------------------------------------ the config parameter
@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("dataset", sorted(set(TABLE1) - set(TRAINED_ON)))
def test_every_backbone_trains_every_table1_dataset_with_either_recipe(backbone, dataset):
    module = importlib.import_module(f"configs.{backbone}")
    family = TABLE1[dataset][0]
    sft, grpo, default = (module.get_config(p) for p in (f"{dataset},sft", f"{dataset},grpo", dataset))
    cells = ((sft, "sft"), (grpo, "grpo"))
    if dataset in EMBODIED_TURNS:  # the bare name keeps its earlier, training-only meaning
        assert not default.eval.enabled and default.data.name == family and not default.out_dir.endswith("_grpo")
    else:
        cells += ((default, "grpo"),)
    for cfg, recipe in cells:
        run = schema.load(cfg)
        assert run.data.name == family and run.eval.enabled and run.eval.split == "test"
        assert run.policy.num_latents == PAPER_K and cfg.out_dir.endswith(f"/{dataset}_{recipe}")
        assert run.eval.n_tasks >= 100_000  # the whole held-out set
        assert run.data.max_turns == run.eval.max_turns_cap or family == "single_qa"  # QA: 3 of 8 turns (table9's)
    assert (schema.load(sft).train.algo, schema.load(sft).train.sft_steps) == ("sft", 0)  # every step SFT
    t = schema.load(grpo).train
    assert (t.algo, t.sft_steps, t.steps) == ("grpo", SFT_WARM_STEPS, 500)  # the warm start, then GRPO
    apply_overrides(sft, ["policy.num_latents=8"])  # K
    assert schema.load(sft).policy.num_latents == 8


@pytest.mark.parametrize("dataset", sorted(TRAINED_ON))
def test_the_evaluation_only_datasets_restore_the_run_they_transfer_from(dataset, tmp_path):
    from configs import activemem_smollm3_3b as module

    cfg = module.get_config(f"{dataset},sft")
    assert cfg.checkpoint == f"runs/activemem_smollm3_3b/{TRAINED_ON[dataset]}_sft/checkpoints"
    assert cfg.out_dir == f"runs/activemem_smollm3_3b/{dataset}_sft" and tuple(cfg.variants) == ("activemem",)
    with pytest.raises(schema.ConfigError, match="checkpoint=.*no such directory"):
        schema.load_eval(cfg)  # the placeholder: the training run comes first
    cfg.checkpoint = str(tmp_path)
    run = schema.load_eval(cfg)
    assert run.data.name == TABLE1[dataset][0] and run.policy.num_latents == PAPER_K
    assert (run.data.qa_files if dataset == "popqa" else (run.data.path,)) == \
        (("/path/to/flashrag/popqa/test.jsonl",) if dataset == "popqa" else ("/path/to/bigcodebench/test.jsonl",))


def test_the_older_parameters_keep_their_schedule_and_a_recipe_is_checked():
    from configs import activemem_qwen3_8b as module

    for table in ("table7", "table9", "synthetic", "code", "humaneval", "textworld"):
        cfg = module.get_config(table)
        t = schema.load(cfg).train
        assert (t.algo, t.sft_steps, cfg.out_dir, cfg.eval.enabled) == ("grpo", 0, "runs/activemem_qwen3_8b", False)
    assert schema.load(module.get_config("table9,sft")).train.algo == "sft"
    with pytest.raises(ValueError, match=r"recipe 'ppo': use one of \('sft', 'grpo'\)"):
        module.get_config("gsm8k,ppo")
    with pytest.raises(ValueError, match=r"config parameter 'webshop': use one of"):
        module.get_config("webshop")


# ------------------------------------------------------------------ rows and the merge
def test_rows_average_the_seeds_and_the_merge_leaves_missing_cells_empty(tmp_path):
    run = tmp_path / "runs" / "gsm8k_grpo"
    for seed, after in ((0, 0.5), (1, 0.7)):  # one launch per seed: --config.seed=k --config.out_dir=RUN/seed_k
        write(run / f"seed_{seed}", train_summary(seed, before=0.1, after=after))
    rows = tmp_path / "rows"
    assert table1.main(["row", "--run", str(run), "--dataset", "gsm8k", "--backbone", "Qwen3-8B",
                        "--method", "ActiveMem_GRPO", "--out", str(rows)]) == 0
    row = json.load(open(rows / "Qwen3-8B_ActiveMem_GRPO_k4_gsm8k.json"))
    assert row["value"] == pytest.approx(0.6) and row["per_seed"] == {"0": 0.5, "1": 0.7} and row["seeds"] == 2
    assert (row["dataset"], row["domain"], row["metric"], row["k"], row["commit"], row["run"]) == \
        ("gsm8k", "math", "accuracy", 4, "abc123", str(run))
    # one multi-seed launch: the summary at the top, its first seed evaluated
    write(tmp_path / "runs" / "gpqa_sft", train_summary(3, before=0.2, after=0.25,
                                                       rules={"chance": 0.25, "majority": 0.4, "majority_letter": "B"}))
    table1.main(["row", "--run", str(tmp_path / "runs" / "gpqa_sft"), "--dataset", "gpqa", "--backbone", "Qwen3-8B",
                 "--method", "ActiveMem_SFT", "--k", "8", "--out", str(rows)])
    # launch.eval_activemem's summary (PopQA on the TriviaQA controller)
    write(tmp_path / "runs" / "popqa_grpo", {"activemem": {"1": stats(0.3)}})
    table1.main(["row", "--run", str(tmp_path / "runs" / "popqa_grpo"), "--dataset", "popqa",
                 "--backbone", "SmolLM3-3B", "--method", "ActiveMem_GRPO", "--out", str(rows)])
    out = tmp_path / "table1.md"
    assert table1.main(["merge", "--rows", str(rows), "--out", str(out)]) == 0
    text = out.read_text()
    lines = {tuple(c.strip() for c in ln.strip("|").split("|")[:3]): [c.strip() for c in ln.strip("|").split("|")[3:]]
             for ln in text.splitlines() if ln.startswith("| ") and "backbone" not in ln}
    header = [c.strip() for c in next(ln for ln in text.splitlines() if "| backbone" in ln).strip("|").split("|")[3:]]
    assert header == ["alfworld", "scienceworld", "triviaqa", "popqa", "kodcode", "bigcodebench", "gpqa", "gsm8k",
                      "math", "aqua"]  # grouped by domain
    cell = lambda line, d: lines[line][header.index(d)]  # noqa: E731
    rules = {line[1]: cells for line, cells in lines.items() if line[1].startswith("rule: ")}
    lines = {line: cells for line, cells in lines.items() if not line[1].startswith("rule: ")}
    assert list(lines) == [("SmolLM3-3B", "ActiveMem_GRPO", "4"), ("Qwen3-8B", "ActiveMem_SFT", "8"),
                           ("Qwen3-8B", "ActiveMem_GRPO", "4")]  # Table 1's backbones, SFT before GRPO
    # the rules that need no learning, from the rows' runs (numbers only; a dataset without them: -)
    assert set(rules) == {"rule: empty", "rule: chance", "rule: majority"}
    assert rules["rule: empty"][header.index("gsm8k")] == "0.000" and rules["rule: empty"][header.index("gpqa")] == "-"
    assert rules["rule: chance"][header.index("gpqa")] == "0.250" and rules["rule: majority"][header.index("gpqa")] == "0.400"
    assert sum(c != "-" for cells in rules.values() for c in cells) == 3
    assert json.load(open(rows / "Qwen3-8B_ActiveMem_SFT_k8_gpqa.json"))["baselines"] == {"chance": 0.25, "majority": 0.4}
    assert cell(("Qwen3-8B", "ActiveMem_GRPO", "4"), "gsm8k") == "0.600 (2)"
    assert cell(("Qwen3-8B", "ActiveMem_SFT", "8"), "gpqa") == "0.250 (1)"
    assert cell(("SmolLM3-3B", "ActiveMem_GRPO", "4"), "popqa") == "0.300 (1)"
    assert cell(("Qwen3-8B", "ActiveMem_GRPO", "4"), "math") == "-" and cell(("Qwen3-8B", "ActiveMem_SFT", "8"), "gsm8k") == "-"
    assert sum(c != "-" for cells in lines.values() for c in cells) == 3  # no number invented


def test_bad_inputs_end_in_one_line(tmp_path, capsys):
    def fails(argv, message):
        assert table1.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err

    row = ["row", "--backbone", "Qwen3-8B", "--method", "ActiveMem_GRPO", "--out", str(tmp_path / "rows")]
    os.makedirs(tmp_path / "empty")
    fails([*row, "--run", str(tmp_path / "empty"), "--dataset", "gsm8k"], "no summary.json in it")
    no_after = train_summary(0, 0.1, 0.2)
    del no_after["eval"]  # trained with eval.enabled=False
    fails([*row, "--run", write(tmp_path / "noeval", no_after), "--dataset", "gsm8k"], "no held-out 'after' row")
    fails([*row, "--run", write(tmp_path / "ok", train_summary(0, 0.1, 0.2)), "--dataset", "webshop"],
          "dataset 'webshop' is not in Table 1: use one of alfworld")
    fails([*row, "--run", str(tmp_path / "missing"), "--dataset", "gsm8k"], "no such directory")
    fails(["merge", "--rows", str(tmp_path / "nowhere")], "no such directory")
