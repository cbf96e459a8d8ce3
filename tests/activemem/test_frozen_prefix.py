"""The split training forward (rl/rows.py `frozen_split`, activemem/inject.py): the shared
preamble run once, the columns before the first latent forward only, the rest
differentiated. It must give the full forward's response log-probs and controller
gradients, on rows that start alike and put their latents in different columns."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from activemem_jax.activemem import Controller, collate, policy_logprobs
from activemem_jax.activemem.policy_config import Step, Trajectory
from activemem_jax.rl import rows
from activemem_jax.shapes import row_length
from tests.models.tiny_hf import make_tiny

D = 96
PREAMBLE = [3, 4, 5, 6, 7, 8, 9, 10, 11]  # 9 tokens every row begins with: 8 are shared


def _rows(seed: int, k: int):
    """Turns whose observations (between preamble and latents) differ in length."""
    rng = np.random.default_rng(seed)
    steps = []
    for obs_len in (3, 9, 5, 13, 1, 7):
        prompt = PREAMBLE + rng.integers(20, 200, obs_len).tolist()
        pos = list(range(len(prompt), len(prompt) + k))
        prompt += [2] * k + rng.integers(20, 200, 2).tolist()
        resp = rng.integers(20, 200, int(rng.integers(1, 4))).tolist()
        steps.append(Step(prompt, pos, resp, [0.0] * len(resp), "", "", rng.normal(size=D).astype(np.float32),
                          rng.normal(size=D).astype(np.float32) / 10, 0, 0.0, np.ones(3, bool), np.full(2, -1)))
    return steps


def _first(s):
    return s.latent_pos[0] if len(s.latent_pos) else len(s.prompt_ids) - 1


@pytest.fixture(scope="module")
def one(one_device_mesh):
    from activemem_jax.rl.hosts import Hosts

    return Hosts(one_device_mesh)  # a single process


@pytest.fixture(scope="module", params=[False, True], ids=["unrolled", "scanned"])
def model(request, tmp_path_factory, one_device_mesh):
    from activemem_jax.models import load_pretrained

    path = tmp_path_factory.mktemp("tiny_split")
    make_tiny(path, "llama_gqa3_llama3rope")
    return load_pretrained(str(path), mesh=one_device_mesh, scan_layers=request.param)


@pytest.mark.parametrize("k", [2, 0])
def test_split_forward_equals_the_full_forward(model, one, k):
    steps = _rows(k, k)
    traj = [Trajectory(task={}, uid=0, steps=steps)]
    split, gaps, longest = rows.frozen_split(steps, 0, one)
    firsts = [_first(s) for s in steps]
    assert split == (8, -(-max(firsts) // 8) * 8)
    assert {f + g for f, g in zip(firsts, gaps)} == {split[1]}  # every first latent (or response) in one column
    aligned = collate(traj, k, max_len=row_length(longest), gaps=gaps, gap_at=split[0])
    plain = collate(traj, k, max_len=row_length(max(len(s.prompt_ids) + len(s.response_ids) for s in steps)))
    ctrl = Controller(D, num_latents=k, hidden=32, latent_init_std=0.5, rngs=nnx.Rngs(1))
    gd, params = nnx.split(ctrl)

    def loss(params, batch, split):
        lp = policy_logprobs(model.module, nnx.merge(gd, params), batch, split=split)
        return jnp.sum(lp * batch["resp_mask"]), lp

    keys = ("tokens", "attention_mask", "latent_pos", "h", "p_bar", "resp_pos", "resp_mask")
    run = jax.jit(jax.value_and_grad(loss, has_aux=True), static_argnums=2)
    (_, ref), g_ref = run(params, {key: jnp.asarray(plain[key]) for key in keys}, None)
    (_, got), g_got = run(params, {key: jnp.asarray(aligned[key]) for key in keys}, split)
    m = plain["resp_mask"]
    np.testing.assert_allclose(np.asarray(got)[m], np.asarray(ref)[m], rtol=1e-4, atol=1e-4)
    assert np.abs(np.asarray(ref)[m]).min() > 0  # real log-probs, not a zero both sides share
    if k:
        flat_ref, flat_got = jax.tree.leaves(g_ref), jax.tree.leaves(g_got)
        assert max(float(jnp.abs(x).max()) for x in flat_ref) > 1e-3  # the latent moves the answer
        for a, b in zip(flat_ref, flat_got):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-3, atol=1e-5)


def test_rows_that_would_grow_fall_back_to_the_earliest_latent(one):
    steps = _rows(0, 1)
    early = steps[4]  # the earliest latent, then a tail that pushes aligned rows past 128 columns
    early.prompt_ids[early.latent_pos[0] + 1:] = [7] * 105
    split, gaps, longest = rows.frozen_split(steps, 0, one)
    firsts = [_first(s) for s in steps]
    assert row_length(longest) == row_length(max(len(s.prompt_ids) + len(s.response_ids) for s in steps)) == 128
    assert gaps == [0] * len(steps) and split == (8, min(firsts) - min(firsts) % 8)


def test_tree_only_rows_carry_no_tokens_and_set_no_length(one):
    """An unscored turn's row never runs the backbone: however long, it neither sets the
    row length nor the split, and keeps only what the tree head reads."""
    from types import SimpleNamespace

    steps = _rows(1, 1)
    quiet = steps[2]
    quiet.scored = False
    quiet.prompt_ids = quiet.prompt_ids + [7] * 200  # would need 256 columns

    def pad(turns):
        n = len(turns)
        return rows.pad_rows(SimpleNamespace(trajectories=[Trajectory(task={}, uid=0, steps=turns)]),
                             np.zeros(n), np.zeros(n), {}, k=1, budget=0, path_len=2, mini_batch_rows=8, hosts=one,
                             frozen=True)

    batch, alone = pad(steps), pad([s for s in steps if s.scored])
    scored = [s for s in steps if s.scored]
    assert batch["tokens"].shape[1] == row_length(max(len(s.prompt_ids) + len(s.response_ids) for s in scored)) < 256
    assert batch["split"] == alone["split"]
    n = len(scored)
    for key in ("tokens", "attention_mask", "latent_pos", "resp_pos", "resp_mask"):
        np.testing.assert_array_equal(batch[key][:n], alone[key][:n])
    row = int(np.flatnonzero(batch["tree_only"])[0])
    assert not batch["attention_mask"][row].any() and not batch["tokens"][row].any()
    assert (batch["latent_pos"][row] == -1).all() and (batch["resp_pos"][row] == -1).all()
    np.testing.assert_array_equal(batch["h"][row], quiet.h)
    assert batch["tree_action"][row] == quiet.tree_action and batch["tree_mask"][row].all()
