"""The ablation table (activemem/ablations.py): what each variant overrides."""

import pytest

from activemem_jax.activemem.ablations import ABLATIONS, apply_ablation, shares_sft
from activemem_jax.activemem.policy_config import PolicyConfig
from configs.experiments import dossier_base


def test_every_ablation_builds_a_valid_policy_and_changes_what_it_names():
    base = dossier_base.get_config()
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
