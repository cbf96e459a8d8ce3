"""ActiveMem's ablations (paper Table 2, and Table 9's SFT-only row) as config overrides:
one table, used by `launch/bench_memory.py` and any evaluation that trains variants.

    cfg = apply_ablation(cfg, "w/o HLMT")        # a copy of an ml_collections run config

Each entry overrides run-config fields (dotted paths). Training-side ablations change
`train.*`; the memory ones change `policy.*`. "w/o tree action head" is the static
hierarchy of docs/design_training.md#ablations: the threshold rule acts in training (SFT's targets
included) and in evaluation, and nothing trains the head.
"""

from __future__ import annotations

ABLATIONS = {
    "full": {},
    "SFT only": {"train.grpo_steps": 0},
    "w/o HLMT": {"policy.use_tree": False},
    "w/o latent injection": {"policy.num_latents": 0},
    "w/o tree action head": {"policy.tree_actions": False, "train.sft_tree": "rule"},
    "w/o hierarchical advantage": {"train.lambda_h": 0.0},
    "w/o merge/delete": {"policy.maintenance": False},
    "flat tree": {"policy.max_depth": 1},
}


# overrides that act only after the SFT warm start: a variant made of these alone continues
# the same SFT run as "full" (launch/ablation/table.py trains that run once per seed; a
# resumed run repeats an uninterrupted one, so the branch is the variant's own run)
AFTER_SFT = ("train.grpo_steps", "train.lambda_h", "train.credit", "train.write_credit", "train.tree_kl",
             "train.grpo_span", "optim.lr_grpo",
             "optim.lr_tree_grpo", "policy.tree_temperature")


def shares_sft(name: str) -> bool:
    """Whether ablation `name` differs from "full" only after the SFT warm start."""
    if name not in ABLATIONS:
        raise ValueError(f"ablation {name!r}: choose from {list(ABLATIONS)}")
    return all(key in AFTER_SFT for key in ABLATIONS[name])


def evaluation_overrides(name: str) -> dict:
    """Ablation `name`'s policy fields ({field: value}), what it changes when a trained
    controller is evaluated (`launch.eval_activemem`'s variants); a ValueError for an
    ablation that acts only in training (it would evaluate as the full system)."""
    if name not in ABLATIONS:
        raise ValueError(f"ablation {name!r}: choose from {list(ABLATIONS)}")
    policy = {k.split(".", 1)[1]: v for k, v in ABLATIONS[name].items() if k.startswith("policy.")}
    if not policy:
        raise ValueError(f"ablation {name!r} changes only training ({', '.join(ABLATIONS[name])}): evaluated, it "
                         "is the full system; train it (python -m launch.bench_memory --task dossier --variants ...)")
    return policy


def evaluation_ablations() -> list:
    """The ablations that change evaluation (their policy fields)."""
    return [n for n in ABLATIONS if any(k.startswith("policy.") for k in ABLATIONS[n])]


def apply_ablation(cfg, name: str):
    """A copy of run config `cfg` with ablation `name`'s overrides. "train.grpo_steps" sets
    the number of GRPO steps after the SFT warm start (train.steps = sft_steps + it)."""
    if name not in ABLATIONS:
        raise ValueError(f"ablation {name!r}: choose from {list(ABLATIONS)}")
    cfg = cfg.copy_and_resolve_references()
    for key, value in ABLATIONS[name].items():
        if key == "train.grpo_steps":
            cfg.train.steps = cfg.train.sft_steps + value
            continue
        section, field = key.split(".")
        if field not in cfg[section]:
            raise ValueError(f"ablation {name!r} sets {key}, which the config lacks")
        cfg[section][field] = value
    return cfg


__all__ = ["ABLATIONS", "AFTER_SFT", "apply_ablation", "evaluation_ablations", "evaluation_overrides", "shares_sft"]
