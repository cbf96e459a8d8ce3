"""The run schema: every shipped training config passes, the base config is the schema's
defaults, and a bad field stops at load with a message naming it."""

import pytest

from activemem_jax import schema
from activemem_jax.config_files import load_config

CONFIGS = ("activemem_tiny_cpu", "experiments/dossier_base", "experiments/dossier_long", "experiments/dossier_mix",
           "experiments/dossier_kl", "experiments/dossier_span", "activemem_qwen2_5_1_5b", "activemem_qwen3_8b",
           "activemem_qwen3_30b_a3b", "activemem_smollm3_3b", "activemem_sft_synthetic", "activemem_code_cpu",
           "activemem_sciworld_cpu", "activemem_textworld_cpu")


@pytest.mark.parametrize("name", CONFIGS)
def test_every_training_config_loads_typed(name):
    cfg = load_config(f"configs/{name}.py")
    run = schema.load(cfg)
    assert run.train.steps == cfg.train.steps and run.optim.lr_controller == pytest.approx(cfg.optim.lr_controller)
    assert run.policy.capacity == cfg.policy.capacity and run.model.path == cfg.model.path
    assert isinstance(run.train.seeds, tuple) and isinstance(run.data.dossier, dict)


@pytest.mark.parametrize("table", ["code", "humaneval", "scienceworld", "alfworld", "textworld"])
def test_the_paper_configs_take_each_domain_as_an_option(table):
    from configs.activemem_base import base_config, paper_data

    run = schema.load(paper_data(base_config(), table))
    assert run.data.name == {"code": "kodcode"}.get(table, table) and run.eval.split == "test"
    assert run.data.max_turns == run.eval.max_turns_cap and run.data.split == "train"
    with pytest.raises(ValueError, match=r"config parameter 'webshop': use one of \(.*'textworld'\)"):
        paper_data(base_config(), "webshop")


def test_the_base_config_is_the_schema_defaults():
    from configs.activemem_base import base_config

    cfg = base_config()
    for name, section in schema.SECTIONS.items():
        assert schema.section(section, cfg[name], name) == section(), name
    # and those defaults are still the paper's 6.1 values the base config held by hand before
    run = schema.load(cfg)
    assert (run.optim.lr_controller, run.optim.lr_lora, run.optim.warmup_steps, run.optim.max_grad_norm) == \
        (1e-5, 1e-6, 50, 1.0)
    assert (run.train.group_size, run.train.prompts_per_step, run.train.clip_eps, run.train.lambda_h) == (8, 8, 0.2, 0.5)
    assert (run.model.dtype, run.model.remat, run.mesh.fsdp, run.engine.max_slots, run.engine.max_len) == \
        ("bfloat16", True, -1, 64, 8192)
    assert (run.checkpoint.every, run.checkpoint.keep, run.optim.decay_steps) == (50, 3, 0)


@pytest.mark.parametrize("override, field", [
    ("train.steps=-1", "train.steps=-1"),
    ("train.algo=ppo", "train.algo='ppo'"),
    ("train.group_size=1", "train.group_size=1"),           # GRPO needs a group
    ("optim.final_lr_ratio=2.0", "optim.final_lr_ratio=2.0"),
    ("optim.lr_grpo=-1e-4", "optim.lr_grpo=-0.0001"),
    ("model.attention=flash", "model.attention='flash'"),
    ("mesh.fsdp=0", "mesh.fsdp=0"),
    ("checkpoint.every=0", "checkpoint.every=0"),
    ("policy.utility_start=last", "policy.utility_start='last'"),
    ("data.dossier.streams=0", "data.dossier.streams=0"),
    ("train.key_coef=1.0", "train.key_coef=1.0 trains the key head"),  # tiny_cpu has no key head
    ("policy.search_temperature=0.05", "policy.search_temperature=0.05 samples the search"),  # nor here
    ("policy.search_turns=some", "policy.search_turns='some'"),
    ("train.credit=question", "train.credit='question'"),
    ("train.write_credit=node", "train.write_credit='node'"),
    ("train.grpo_span=0", "train.grpo_span=0"),
    ("train.sft_head=expert", "train.sft_head='expert'"),
    ("train.sft_rule_share=1.5", "train.sft_rule_share=1.5"),
    ("optim.lr_tree_grpo=-1e-3", "optim.lr_tree_grpo=-0.001"),
    ("lora.rank=4", None),                                  # fine alone
])
def test_a_bad_field_is_named(override, field):
    cfg = load_config("configs/activemem_tiny_cpu.py", [override])
    if override.startswith("data.dossier"):
        cfg.data.name = "dossier"
    if field is None:
        schema.load(cfg)
        return
    with pytest.raises(schema.ConfigError, match=field.replace("(", r"\(").replace(".", r"\.", 1)):
        schema.load(cfg)


def test_wrong_types_unknown_fields_and_sections_are_named():
    cfg = load_config("configs/activemem_tiny_cpu.py")
    cfg.train = {**cfg.train.to_dict(), "steps": "many"}  # a config file can (absl overrides are typed)
    with pytest.raises(schema.ConfigError, match="train.steps='many': need an integer"):
        schema.load(cfg)
    cfg = load_config("configs/activemem_tiny_cpu.py")
    cfg.train.stepz = 3
    with pytest.raises(schema.ConfigError, match=r"train\.stepz: no such config field"):
        schema.load(cfg)
    cfg = load_config("configs/activemem_tiny_cpu.py")
    cfg.trian = {"steps": 3}
    with pytest.raises(schema.ConfigError, match="trian: no such config section"):
        schema.load(cfg)
    cfg = load_config("configs/activemem_tiny_cpu.py")
    cfg.policy.capacty = 3
    with pytest.raises(schema.ConfigError, match="policy: unknown policy config keys"):
        schema.load(cfg)
    cfg = load_config("configs/activemem_tiny_cpu.py")
    cfg.optim.lr_controller = 1  # an integer where a number is asked is a number
    assert schema.load(cfg).optim.lr_controller == 1.0


def test_evaluation_configs_share_the_training_names_and_are_checked():
    """launch.eval_activemem's configs name the task and its files `data` (as training
    does) and the turn budget `eval`; a bad field, variant or checkpoint is named."""
    for name in ("activemem_eval_synthetic", "activemem_eval_qa"):
        cfg = load_config(f"configs/{name}.py")
        run = schema.load_eval(cfg)
        assert run.data.n_objectives == tuple(cfg.data.n_objectives) and run.eval.max_turns_cap >= 1
        assert "benchmark" not in cfg
    for override, message in [("data.n_tasks=0", "data.n_tasks=0"),
                              ("variants=('activemem', 'oracle')", "variants=('activemem', 'oracle')"),
                              ("temperature=0.0", "temperature=0.0"),
                              ("checkpoint=/no/such/run", "checkpoint='/no/such/run': no such directory")]:
        with pytest.raises(schema.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            schema.load_eval(load_config("configs/activemem_eval_synthetic.py", [override]))
    cfg = load_config("configs/activemem_eval_synthetic.py")
    cfg.benchmark = {"n_tasks": 2}  # the old name
    with pytest.raises(schema.ConfigError, match="benchmark: no such config section"):
        schema.load_eval(cfg)


def test_tools_with_a_config_take_abls_override_spelling_too():
    """bench_memory, bench_step, bench_checkpoint and the --config modes of bench_train /
    bench_decode read `--config.a.b=v` (launch.train's spelling) as well as `--set a.b=v`."""
    import argparse

    from activemem_jax.config_files import apply_overrides, parse_args

    ap = argparse.ArgumentParser()
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--seeds", type=int, default=3)
    args = parse_args(ap, ["--set", "train.steps=7", "--config.optim.lr_controller=1e-3", "--seeds", "1",
                           "--config.policy.tau_stop", "0.4"])
    assert args.seeds == 1 and args.set == ["train.steps=7", "optim.lr_controller=1e-3", "policy.tau_stop=0.4"]
    cfg = load_config("configs/activemem_tiny_cpu.py")
    apply_overrides(cfg, args.set)
    run = schema.load(cfg)
    assert (run.train.steps, run.optim.lr_controller, run.policy.tau_stop) == (7, 1e-3, 0.4)
    with pytest.raises(SystemExit):
        parse_args(ap, ["--config.train.steps"])  # no value


def test_a_dossier_the_tree_cannot_hold_is_refused_naming_the_fields():
    """A depth-1 (flat) tree holds max_children facts under its root: a dossier that keeps
    more live facts than that cannot be answered from the tree, and stops at load."""
    cfg = load_config("configs/experiments/dossier_base.py", ["policy.max_depth=1"])
    assert schema.load(cfg).policy.max_depth == 1  # 2 x 2 x 2 = 8 live facts fit 16 slots
    cfg = load_config("configs/experiments/dossier_base.py", ["policy.max_depth=1", "policy.max_children=4"])
    with pytest.raises(schema.ConfigError, match=r"policy.max_depth=1 holds at most min\(policy.max_children=4, "
                                                 r"policy.capacity - 1=255\) nodes, but these episodes keep 8"):
        schema.load(cfg)
    cfg = load_config("configs/experiments/dossier_base.py", ["policy.max_depth=1", "policy.capacity=6"])
    with pytest.raises(schema.ConfigError, match=r"policy.capacity - 1=5\) nodes"):
        schema.load(cfg)


def test_evaluation_variants_include_the_policy_ablations():
    cfg = load_config("configs/activemem_eval_synthetic.py", ["variants=('activemem', 'flat tree', 'w/o HLMT')"])
    assert schema.load_eval(cfg).variants == ("activemem", "flat tree", "w/o HLMT")
    with pytest.raises(schema.ConfigError, match="variants=.*'SFT only'"):
        schema.load_eval(load_config("configs/activemem_eval_synthetic.py", ["variants=('SFT only',)"]))
