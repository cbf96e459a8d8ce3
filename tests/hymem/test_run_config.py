"""The agent harness's config is checked at load like a training config (hymem.run_config):
it shares ActiveMem's `data` and `engine` sections, and a bad field in any section, an
agent's included, stops the run with one line naming it before anything runs."""

import dataclasses
import subprocess
import sys

import pytest

from activemem_jax import schema
from hymem import run_config


def _cfg():
    from configs.agents_synthetic import get_config

    return get_config()


def test_the_shipped_config_loads_and_shares_activemems_sections():
    run = run_config.load(_cfg())
    assert run.data == schema.section(schema.Data, _cfg().data, "data")  # the same typed section
    assert set(_cfg().data) == {f.name for f in dataclasses.fields(schema.Data)}  # and the same field names
    assert (run.data.name, run.data.n_objectives, run.engine.max_slots, run.model.path) == \
        ("synthetic", (1, 4), 8, "embedded")
    assert set(run.agent_config) == {"hymem", "baselines", "base", "amem", "thread"}
    assert run.agent_config["hymem"]["planner_turns"] == 12


@pytest.mark.parametrize("change, message", [
    (lambda c: c.hymem.update(planner_turn=3), "hymem.planner_turn: no such field of HyMemConfig"),
    (lambda c: setattr(c, "baselines", {"max_turns": "many"}), "baselines.max_turns='many': need int"),
    (lambda c: setattr(c, "agents", ("hymem", "reflexion")), "reflexion is not a registered agent"),
    (lambda c: setattr(c, "trials", 0), "trials=0: need >= 1"),
    (lambda c: c.data.update(text_only="images"), "data.text_only='images'"),
    (lambda c: c.data.update(kinds=("riddle",)), r"data.kinds=\('riddle',\)"),
    (lambda c: c.model.update(retries=-1), "model.retries=-1"),
    (lambda c: c.sampling.update(temprature=0.5), "sampling.temprature: no such field"),
    (lambda c: setattr(c, "sampling", {"temperature": "hot"}), "sampling.temperature='hot': need a number"),
    (lambda c: c.sampling.update(max_tokens=0), "sampling.max_tokens=0: need >= 1"),
    (lambda c: setattr(c, "benchmark", {"name": "gaia"}), "benchmark: renamed data"),
    (lambda c: setattr(c, "retrieval_url", "http://x"), "retrieval_url: renamed data.retrieval_url"),
    (lambda c: setattr(c, "planner", {}), "planner: no such config section"),
])
def test_a_bad_field_is_named(change, message):
    cfg = _cfg()
    change(cfg)
    with pytest.raises(run_config.ConfigError, match=message):
        run_config.load(cfg)


def test_the_command_line_stops_in_one_line_before_anything_runs(tmp_path):
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "launch.eval_agents", "--config", "configs/agents_synthetic.py",
                          "--config.trials=0", f"--config.out_dir={out}"], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "trials=0: need >= 1" in run.stderr
    assert "Traceback" not in run.stderr and not out.exists()


def test_the_synthetic_family_draws_the_kinds_asked_and_gives_its_world():
    from activemem_jax.data import synthetic_world
    from activemem_jax.tasks import build_section
    from activemem_jax.tasks.synthetic import synthetic_section

    ts = build_section(synthetic_section(world_seed=0, seed=1, n_entities=50, n_objectives=(1, 2), n_tasks=3,
                                         kinds=("chain",)))
    world = ts.source
    kind = {q["question"]: q["kind"] for q in world.questions}
    assert [len(t["answers"]) for t in ts.tasks] == [1, 1, 1, 2, 2, 2]
    assert {kind[q] for t in ts.tasks for q in t["questions"]} == {"chain"}
    assert list(ts.documents) == list(world.documents) and world.seed == 0
    # the same draw as the generator's own, and world_seed -1 means the task seed
    assert ts.tasks[:3] == synthetic_world.make_tasks(world, "dev", 1, 3, seed=1, kinds=("chain",))
    both = build_section(synthetic_section(seed=1, n_entities=50, n_objectives=(1,), n_tasks=40))
    kind = {q["question"]: q["kind"] for q in both.source.questions}
    assert both.source.seed == 1 and {kind[q] for t in both.tasks for q in t["questions"]} == {"chain", "constraint"}
