"""Delimiter steps for single-shot reasoning tasks (docs/design_memory.md#delimiter-steps):
SegmentedEnv and rollouts."""

import numpy as np
import pytest

from activemem_jax.activemem import ActiveMem, PolicyConfig
from activemem_jax.envs import MathEnv, SegmentedEnv
from tests.activemem.shapes import SMALL

TASK = {"id": "m0", "question": "What is 2 + 2?", "answer": "4"}
SEGMENTS = ["Let me add the numbers.\n\n", "2 + 2 makes 4.\n\n", "The answer is \\boxed{4}"]


def test_segmented_env_ends_on_the_last_segment_or_max_steps():
    env = SegmentedEnv(MathEnv(), max_steps=8)
    env.reset([TASK, TASK])
    for k, seg in enumerate(SEGMENTS):
        obs, rewards, dones, infos = env.step([seg, "wrong \\boxed{5}" if k == 0 else ""])
        if k == 0:
            assert dones == [False, True] and rewards == [0.0, 0.0] and infos[1]["steps"] == 1
    assert dones[0] and rewards[0] == 1.0 and infos[0]["steps"] == 3
    assert infos[0]["answer"] == "".join(SEGMENTS)
    short = SegmentedEnv(MathEnv(), max_steps=2)
    short.reset([TASK])
    short.step([SEGMENTS[0]])
    _, rewards, dones, infos = short.step([SEGMENTS[1]])
    assert dones == [True] and rewards == [0.0] and infos[0]["steps"] == 2  # cut at max_steps
    with pytest.raises(ValueError, match="delimiter"):
        SegmentedEnv(MathEnv(), delimiter="")


@pytest.mark.slow
def test_rollout_continues_the_same_assistant_message(embedded_model, engine):
    tok = embedded_model.tokenizer
    policy = ActiveMem(embedded_model, engine, PolicyConfig(num_latents=2, step_mode="delimiter", **SMALL))
    env = SegmentedEnv(MathEnv(), max_steps=4)
    res = policy.rollout(env, [TASK], seed=0, responder=lambda i, turn: SEGMENTS[turn])
    traj = res.trajectories[0]
    assert [s.text for s in traj.steps] == SEGMENTS and traj.reward == 1.0
    second = traj.steps[1]
    text = tok.decode(second.prompt_ids[:second.latent_pos[0]])
    assert text.endswith("assistant\n" + SEGMENTS[0]) and "What is 2 + 2?" in text
    assert second.latent_pos[-1] == len(second.prompt_ids) - 1  # the model continues after the slots
    assert [second.prompt_ids[p] for p in second.latent_pos] == [policy.layout.placeholder_id] * 2


@pytest.mark.slow
def test_generation_stops_at_the_delimiter(embedded_model, engine):
    policy = ActiveMem(embedded_model, engine, PolicyConfig(num_latents=2, step_mode="delimiter", delimiter=".",
                                                           max_tokens=48, temperature=0.0, **SMALL))
    env = SegmentedEnv(MathEnv(), delimiter=".", max_steps=3)  # sentences: a configurable delimiter
    traj = policy.rollout(env, [{**TASK, "question": "Explain in two short paragraphs why 2 + 2 = 4."}],
                          seed=0).trajectories[0]
    assert 2 <= len(traj.steps) <= 3  # greedy: the answer has several sentences
    assert all(s.text.endswith(".") and s.text.count(".") == 1 for s in traj.steps[:-1])
    assert traj.info["steps"] == len(traj.steps) and np.isfinite(traj.reward)
    with pytest.raises(ValueError, match="step_mode"):
        PolicyConfig(step_mode="sentence")
