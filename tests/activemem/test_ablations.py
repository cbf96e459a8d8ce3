"""The ablation table (activemem/ablations.py) and the statistics of the dossier bench
(activemem_jax/rl/ablation_table.py)."""

import math

import pytest

from activemem_jax.activemem.ablations import ABLATIONS, apply_ablation, shares_sft
from activemem_jax.activemem.policy_config import PolicyConfig
from configs import activemem_dossier_cpu
from activemem_jax.rl import ablation_table


def test_every_ablation_builds_a_valid_policy_and_changes_what_it_names():
    base = activemem_dossier_cpu.get_config()
    assert set(ABLATIONS) >= {"full", "SFT only", "w/o HLMT", "w/o latent injection", "w/o tree action head",
                              "w/o hierarchical advantage", "w/o merge/delete", "flat tree"}
    for name in ABLATIONS:
        cfg = apply_ablation(base, name)
        PolicyConfig.from_dict(cfg.policy.to_dict())  # valid
    assert apply_ablation(base, "SFT only").train.steps == base.train.sft_steps
    static = apply_ablation(base, "w/o tree action head")
    assert static.policy.tree_actions is False and static.train.sft_tree == "rule"
    assert apply_ablation(base, "w/o hierarchical advantage").train.lambda_h == 0.0
    assert apply_ablation(base, "flat tree").policy.max_depth == 1
    assert apply_ablation(base, "w/o merge/delete").policy.maintenance is False
    assert base.policy.max_depth > 1 and base.train.lambda_h > 0  # the base config is untouched
    with pytest.raises(ValueError, match="ablation 'nope'"):
        apply_ablation(base, "nope")


def test_only_variants_that_change_the_grpo_phase_share_the_sft_run():
    # the bench continues one SFT run per seed for these; every other variant changes what
    # SFT does (its tree, its policy, its targets) and must train on its own
    assert {n for n in ABLATIONS if shares_sft(n)} == {"full", "SFT only", "w/o hierarchical advantage"}
    with pytest.raises(ValueError, match="ablation 'nope'"):
        shares_sft("nope")


def test_the_95_percent_interval_by_hand():
    mean, half = ablation_table.interval([0.7, 0.8, 0.9])
    assert math.isclose(mean, 0.8) and math.isclose(half, 4.303 * 0.1 / math.sqrt(3), rel_tol=1e-6)
    mean, half = ablation_table.interval([0.5])
    assert mean == 0.5 and math.isnan(half)


def test_the_table_reports_every_variant_with_its_seeds_and_the_rules():
    row = {"accuracy": 0.5, "depth_histogram": {1: 4, 2: 2}, "pruned": 3, "merged": 1,
           "actions": {"decoy": {"noop": 1.0, "insert": 0.0, "update": 0.0}}}
    summary = {"runs": {"full": [row, {**row, "accuracy": 0.7}], "flat tree": [row]},
               "baselines": {"chance": 0.125, "store_all": 0.375, "best_constant_code": "red"}}
    summary["table"] = {v: dict(zip(("mean", "ci95"), ablation_table.interval([r["accuracy"] for r in rs])),
                                seeds=len(rs)) for v, rs in summary["runs"].items()}
    text = ablation_table.format_table(summary)
    assert "| full | 0.600 | +/- " in text and "| flat tree | 0.500 | - | 1 |" in text
    assert "1.00 / 0.00 / 0.00" in text and "store_all 0.375" in text and "red" not in text
