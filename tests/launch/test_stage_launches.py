"""The two launches built on launch/stage_runs.py, in one file so that one worker compiles
their shared tiny shapes once: the continual-learning launch (launch/continual.py: two tiny
stages, the matrix, the figures, a rerun that retrains nothing, a missing file that stops
before training) and the generalization launch (launch/generalize.py: one tiny source
scored on two targets, what it writes, a rerun, a missing target)."""

import json
import math
import os

import pytest

from launch import continual, generalize
from tests.rl import train_config

pytestmark = pytest.mark.slow

AQUA = [{"question": f"What is {a} + {b}?", "options": [f"{k}){a + b + d}" for k, d in zip("ABCDE", range(-2, 3))],
         "rationale": f"{a} + {b} = {a + b}", "correct": "C"} for a, b in ((1, 2), (3, 4), (2, 2), (5, 1))]
GSM8K = [{"question": f"Tom has {a} apples and buys {b} more. How many now?",
          "answer": f"{a} + {b} = {a + b}\n#### {a + b}"} for a, b in ((1, 6), (2, 3), (4, 4), (5, 2))]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def tiny_run(tmp_path):
    """The run both launches' tests share: the tiny model's train config, one-turn tasks."""
    cfg = train_config.get_config()
    cfg.out_dir = str(tmp_path / "run")
    cfg.train.update(prompts_per_step=2, group_size=2, mini_batch_rows=8)
    cfg.data.update(n_tasks=4, max_turns=1)
    cfg.eval.update(n_tasks=4, n_objectives=(1,), turns_per_objective=1, extra_turns=0, max_turns_cap=1)
    cfg.checkpoint.update(async_save=False)
    cfg.log.tensorboard = False
    return cfg


def config(tmp_path, gsm8k_path):
    cfg = tiny_run(tmp_path)
    cfg.stages = ({"name": "aqua", "data": {"name": "aqua", "path": write_jsonl(tmp_path / "aqua.jsonl", AQUA)},
                   "steps": 1, "sft_steps": 1},  # an SFT step (AQuA's rationale), then a GRPO step from it
                  {"name": "gsm8k", "data": {"name": "gsm8k", "path": gsm8k_path}, "steps": 1, "sft_steps": 0})
    return cfg


def snapshot(directory) -> dict:
    return {os.path.join(root, n): os.stat(os.path.join(root, n)).st_mtime_ns
            for root, dirs, files in os.walk(directory) for n in dirs + files}


def test_two_stages_give_the_matrix_and_a_rerun_retrains_nothing(tmp_path, tiny_model, tiny_engine):
    from activemem_jax.rl.checkpoints import Checkpoints

    cfg = config(tmp_path, write_jsonl(tmp_path / "gsm8k.jsonl", GSM8K))
    summary = continual.run_continual(cfg, model=tiny_model, engine=tiny_engine, log=lambda line: None)
    out = tmp_path / "run"
    written = json.loads((out / "continual.json").read_text())
    assert written["datasets"] == ["aqua", "gsm8k"] and written["metric"] == "em" and written["tasks"] == [4, 4]
    assert len(written["matrix"]) == 2 and all(len(row) == 2 for row in written["matrix"])
    assert len(written["untrained"]) == 2
    assert all(0.0 <= v <= 1.0 for v in [*written["untrained"], *sum(written["matrix"], [])])
    m, u = written["matrix"], written["untrained"]
    assert math.isclose(written["forgetting"], m[0][0] - m[1][0])
    assert math.isclose(written["forward_transfer"], m[0][1] - u[1])
    table = (out / "continual.md").read_text()
    assert "| controller | aqua | gsm8k |" in table and "| untrained |" in table and "| after 1 gsm8k |" in table
    assert "Forgetting" in table and "Forward transfer" in table
    # the rules that need no learning on the same tasks: aqua's golds are all C (chance 1/5, majority 1,
    # always-A 0); gsm8k's family has none here
    assert written["baselines"]["chance"] == [pytest.approx(0.2), None]
    assert written["baselines"]["majority"] == [1.0, None] and written["baselines"]["first"] == [0.0, None]
    assert "| rule: chance | 0.200 | - |" in table and "| rule: majority | 1.000 | - |" in table
    stage0, stage1 = (str(out / "stage_0_aqua"), str(out / "stage_1_gsm8k"))
    assert [s["trained_now"] for s in summary["stages"]] == [True, True]
    ckpt = Checkpoints(os.path.join(stage1, "checkpoints"), read_only=True)
    try:
        assert ckpt.steps() == [1] and ckpt.read_meta(1)["init_from"] == {"path": os.path.abspath(stage0), "step": 1}
    finally:
        ckpt.close()
    before = {d: snapshot(d) for d in (stage0, stage1)}
    again = continual.run_continual(cfg, model=tiny_model, engine=tiny_engine, log=lambda line: None)
    assert [s["trained_now"] for s in again["stages"]] == [False, False]
    assert {d: snapshot(d) for d in (stage0, stage1)} == before
    assert again["matrix"] == summary["matrix"]  # the same checkpoints, the same greedy evaluation


def test_a_missing_stage_file_stops_before_the_first_stage_trains(tmp_path, tiny_model, tiny_engine):
    cfg = config(tmp_path, str(tmp_path / "missing" / "gsm8k.jsonl"))
    with pytest.raises(FileNotFoundError, match=r"stage 1 \(gsm8k\): data.path='.*missing/gsm8k.jsonl' does not exist"):
        continual.run_continual(cfg, model=tiny_model, engine=tiny_engine)
    assert not (tmp_path / "run").exists()


def test_the_figures_by_hand():
    matrix = [[0.5, 0.2, 0.1], [0.4, 0.6, 0.3], [0.3, 0.5, 0.7]]
    out = continual.figures(matrix, untrained=[0.1, 0.1, 0.2])
    # forgetting: dataset 0 max(0.5, 0.4) - 0.3, dataset 1 0.6 - 0.5
    assert math.isclose(out["forgetting"], (0.2 + 0.1) / 2)
    # forward transfer: M[0][1] - U[1], M[1][2] - U[2]
    assert math.isclose(out["forward_transfer"], ((0.2 - 0.1) + (0.3 - 0.2)) / 2)
    assert continual.figures([[0.5]], [0.1])["forgetting"] is None


# ---------------------------------------------------------------- launch.generalize
def generalize_config(tmp_path, gsm8k_path):
    cfg = tiny_run(tmp_path)
    aqua = write_jsonl(tmp_path / "aqua.jsonl", AQUA)
    cfg.sources = ({"name": "aqua", "data": {"name": "aqua", "path": aqua}, "steps": 1, "sft_steps": 1},)  # SFT only
    cfg.targets = ({"name": "aqua", "data": {"name": "aqua"}, "eval": {"path": aqua}},
                   {"name": "gsm8k", "data": {"name": "gsm8k"}, "eval": {"path": gsm8k_path}})
    return cfg


def test_one_source_on_two_targets_and_a_rerun_retrains_nothing(tmp_path, tiny_model, tiny_engine):
    cfg = generalize_config(tmp_path, write_jsonl(tmp_path / "gsm8k.jsonl", GSM8K))
    summary = generalize.run_generalize(cfg, model=tiny_model, engine=tiny_engine, log=lambda line: None)
    out = tmp_path / "run"
    written = json.loads((out / "generalize.json").read_text())
    assert written["sources"] == ["aqua"] and written["targets"] == ["aqua", "gsm8k"] and written["metric"] == "em"
    assert written["tasks"] == [4, 4] and [r["trained_now"] for r in written["runs"]] == [True]
    (row,), untrained, (gain,) = written["matrix"], written["untrained"], written["gain"]
    assert len(row) == 2 and len(untrained) == 2 and all(0.0 <= v <= 1.0 for v in [*row, *untrained])
    assert gain == pytest.approx([m - u for m, u in zip(row, untrained)])
    table = (out / "generalize.md").read_text().splitlines()
    assert "| controller | aqua | gsm8k |" in table
    assert sum(line.startswith("| untrained |") for line in table) == 1
    assert sum(line.startswith("| trained on aqua |") for line in table) == 2  # the em row and the gain row
    assert "| rule: chance | 0.200 | - |" in table and written["baselines"]["majority"] == [1.0, None]
    png = (out / "generalize.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    before = snapshot(out / "train_aqua")
    again = generalize.run_generalize(cfg, model=tiny_model, engine=tiny_engine, log=lambda line: None)
    assert [r["trained_now"] for r in again["runs"]] == [False]
    assert snapshot(out / "train_aqua") == before
    assert again["matrix"] == summary["matrix"]  # the same checkpoint, the same greedy evaluation


def test_a_missing_target_file_stops_before_training(tmp_path, tiny_model, tiny_engine):
    cfg = generalize_config(tmp_path, str(tmp_path / "missing" / "gsm8k.jsonl"))
    with pytest.raises(FileNotFoundError, match=r"target gsm8k: eval.path='.*missing/gsm8k.jsonl' does not exist"):
        generalize.run_generalize(cfg, model=tiny_model, engine=tiny_engine)
    assert not (tmp_path / "run").exists()
