"""Latent injection on the embedded model: exactness, gradients, a frozen backbone, LoRA."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from activemem_jax.activemem import (Controller, PromptLayout, init_lora, merge_lora, policy_forward,
                                     policy_logprobs, splice, token_logprobs)
from activemem_jax.engine import SamplingParams

pytestmark = pytest.mark.slow

TASK = "Answer the question: In which country is the city of Lyon?"
HISTORY = [("<think>I should search.</think><search>Lyon country</search>",
            "<information>Doc 1(Title: Lyon) Lyon is a city in France.</information>")]


def controller_emitting(model, k, vector, seed=0):
    """A controller whose latent head outputs `vector` for every slot (kernel 0)."""
    d = model.config.hidden_size
    ctrl = Controller(d, num_latents=k, hidden=32, latent_init=vector, rngs=nnx.Rngs(seed))
    ctrl.latent.kernel[...] = jnp.zeros_like(ctrl.latent.kernel[...])
    return ctrl


def one_row(ids, latent_pos, d):
    return {"tokens": jnp.asarray([ids], jnp.int32), "attention_mask": jnp.ones((1, len(ids)), bool),
            "latent_pos": jnp.asarray([latent_pos], jnp.int32).reshape(1, -1),
            "h": jnp.ones((1, d)), "p_bar": jnp.zeros((1, d))}


def test_layout_places_placeholders_before_the_newest_observation(embedded_model):
    tok = embedded_model.tokenizer
    layout = PromptLayout(tok, 4)
    turn = layout.render(TASK, HISTORY)
    assert [turn.ids[p] for p in turn.latent_pos] == [layout.placeholder_id] * 4
    after = tok.decode(turn.ids[turn.latent_pos[-1] + 1:])
    assert after.startswith("<information>") and "Lyon is a city" in after
    assert TASK in tok.decode(turn.ids[:turn.latent_pos[0]])
    plain = [t for i, t in enumerate(turn.ids) if i not in turn.latent_pos]
    assert plain == turn.plain_ids
    assert PromptLayout(tok, 0).render(TASK, HISTORY).ids == turn.plain_ids
    # constant layout drops older turns; full keeps them
    two = HISTORY + [("<think>France.</think><search>more</search>", "<information>x</information>")]
    const, full = PromptLayout(tok, 2).render(TASK, two), PromptLayout(tok, 2, "full").render(TASK, two)
    assert "Lyon country" not in tok.decode(const.ids) and "Lyon country" in tok.decode(full.ids)
    with pytest.raises(ValueError, match="layout mode"):
        PromptLayout(tok, 2, "sliding")


def test_slots_after_the_observation_let_the_engine_reuse_the_encoded_prompt(engine, embedded_model):
    tok = embedded_model.tokenizer
    layout = PromptLayout(tok, 4, slots="after_observation")
    turn = layout.render(TASK, HISTORY)
    before = tok.decode(turn.ids[:turn.latent_pos[0]])
    assert before.rstrip().endswith("Lyon is a city in France.</information>")
    assert "assistant" in tok.decode(turn.ids[turn.latent_pos[-1] + 1:])
    assert [t for i, t in enumerate(turn.ids) if i not in turn.latent_pos] == turn.plain_ids
    engine.clear_prefix_cache()
    engine.encode_hidden([turn.plain_ids])
    latents = np.zeros((4, embedded_model.config.hidden_size), np.float32)
    out = engine.submit(turn.ids, SamplingParams(temperature=0, max_tokens=2), latents=latents,
                        latent_positions=turn.latent_pos).result()
    assert out.cached_tokens == turn.latent_pos[0]  # the whole observation came from the cache
    before_obs = PromptLayout(tok, 4).render(TASK, HISTORY)
    assert before_obs.latent_pos[0] < turn.latent_pos[0] - 10
    with pytest.raises(ValueError, match="latent slots"):
        PromptLayout(tok, 2, slots="middle")


def test_k0_and_own_embeddings_reproduce_the_plain_logits(embedded_model):
    model, d = embedded_model.module, embedded_model.config.hidden_size
    layout = PromptLayout(embedded_model.tokenizer, 4)
    turn = layout.render(TASK, HISTORY)
    # K = 0: the plain prompt, nothing spliced
    ctrl0 = Controller(d, num_latents=0, hidden=32, rngs=nnx.Rngs(0))
    hidden0, _ = policy_forward(model, ctrl0, **{k: v for k, v in one_row(turn.plain_ids, [], d).items()
                                                 if k != "tokens"}, tokens=jnp.asarray([turn.plain_ids]))
    ref0 = np.asarray(model(jnp.asarray([turn.plain_ids]))[0])  # the plain model, same (eager) path
    np.testing.assert_array_equal(np.asarray(model.lm_logits(hidden0)), ref0)
    # m_t = the placeholder's own embedding: the plain model's logits on that prompt
    emb = model.embedding[...][layout.placeholder_id]
    ctrl = controller_emitting(embedded_model, 4, emb)
    hidden, latents = policy_forward(model, ctrl, **one_row(turn.ids, turn.latent_pos, d))
    np.testing.assert_array_equal(np.asarray(latents[0]), np.tile(np.asarray(emb), (4, 1)))
    ref = np.asarray(model(jnp.asarray([turn.ids]))[0])
    np.testing.assert_array_equal(np.asarray(model.lm_logits(hidden)), ref)
    # a different vector changes what follows the placeholders, and nothing before them
    other = controller_emitting(embedded_model, 4, model.embedding[...][100])
    hidden2, _ = policy_forward(model, other, **one_row(turn.ids, turn.latent_pos, d))
    moved = np.abs(np.asarray(model.lm_logits(hidden2)) - ref).max(axis=-1)[0]
    first = turn.latent_pos[0]
    assert moved[:first].max() < 1e-4 and moved[first:].min() > 1e-3


def test_engine_splice_with_own_embeddings_equals_plain_generation(engine, embedded_model):
    layout = PromptLayout(embedded_model.tokenizer, 4)
    turn = layout.render(TASK, HISTORY)
    emb = np.asarray(embedded_model.state["embedding"][...][layout.placeholder_id])
    params = SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
    plain = engine.submit(turn.ids, params).result()
    spliced = engine.submit(turn.ids, params, latents=np.tile(emb, (4, 1)),
                            latent_positions=turn.latent_pos).result()
    other = engine.submit(turn.ids, params, latents=np.tile(emb * 0 + 0.05, (4, 1)),
                          latent_positions=turn.latent_pos, hidden="also").result()
    assert spliced.token_ids == plain.token_ids
    np.testing.assert_allclose(spliced.logprobs, plain.logprobs, atol=1e-5)
    # the splice is really applied: other vectors change the distribution
    assert np.abs(np.asarray(other.logprobs) - np.asarray(plain.logprobs)).max() > 1e-3
    # the engine's hidden state of the last prompt token equals the full forward's
    h = engine.encode_hidden([turn.plain_ids])[0]
    _, hidden = embedded_model.forward(np.asarray([turn.plain_ids]))
    np.testing.assert_allclose(h, np.asarray(hidden)[0, -1], atol=2e-4)
    assert other.hidden is not None and other.hidden.shape == h.shape


def test_chunked_token_logprobs_equal_the_direct_log_softmax(embedded_model):
    model = embedded_model.module
    ids = np.asarray([embedded_model.tokenizer("The quick brown fox jumps over the lazy dog " * 12)["input_ids"]])
    _, hidden, _ = model(jnp.asarray(ids))
    got = np.asarray(token_logprobs(model, hidden, jnp.asarray(ids), chunk=32))
    logits = np.asarray(model.lm_logits(hidden), np.float64)
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    want = np.take_along_axis(logits, ids[..., None], -1)[..., 0]
    want = np.concatenate([np.zeros((1, 1)), (want - lse)[:, :-1][:, :]], axis=1)
    want[:, 1:] = np.take_along_axis(logits[:, :-1], ids[:, 1:, None], -1)[..., 0] - lse[:, :-1]
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_gradients_reach_the_controller_and_the_backbone_stays_frozen(embedded_model):
    d = embedded_model.config.hidden_size
    layout = PromptLayout(embedded_model.tokenizer, 2)
    turn = layout.render(TASK, HISTORY)
    response = embedded_model.tokenizer("<think>Lyon is in France.</think><answer>France</answer>",
                                        add_special_tokens=False)["input_ids"]
    ids = turn.ids + response
    batch = one_row(ids, turn.latent_pos, d)
    mask = jnp.asarray([[0] * len(turn.ids) + [1] * len(response)], jnp.float32)
    gd_m, state_m = nnx.split(embedded_model.module)
    before = jax.tree.map(np.asarray, state_m)
    ctrl = Controller(d, num_latents=2, hidden=32, latent_init=np.asarray(state_m["embedding"][...][0]),
                      latent_init_std=0.05, rngs=nnx.Rngs(0))
    gd_c, params = nnx.split(ctrl, nnx.Param)

    # the backbone's weights are an argument, not a closed-over constant: XLA would fold
    # 135M constants into the program (minutes of compile), and the frozen backbone is the
    # argument the gradient is not taken against
    @jax.jit
    def loss_fn(params, state_m):
        logp = policy_logprobs(nnx.merge(gd_m, state_m), nnx.merge(gd_c, params), batch)
        return -jnp.sum(logp * mask) / jnp.sum(mask)

    loss, grads = jax.jit(jax.value_and_grad(loss_fn))(params, state_m)
    flat = {"/".join(map(str, p)): np.asarray(v) for p, v in jax.tree_util.tree_leaves_with_path(grads)}
    assert all(np.all(np.isfinite(g)) for g in flat.values())
    for name in ("mlp_in", "mlp_out", "latent"):
        assert any(name in k and np.abs(g).max() > 0 for k, g in flat.items()), name
    assert not any(k.startswith("tree") and np.abs(g).max() > 0 for k, g in flat.items())  # unused head
    opt = optax.adamw(1e-3)
    new_params = optax.apply_updates(params, opt.update(grads, opt.init(params), params)[0])
    assert np.abs(np.asarray(new_params["latent"]["kernel"][...]) -
                  np.asarray(params["latent"]["kernel"][...])).max() > 0
    assert loss_fn(new_params, state_m) < loss  # one step down the gradient lowers the loss
    after = jax.tree.map(np.asarray, nnx.split(embedded_model.module)[1])
    jax.tree.map(np.testing.assert_array_equal, before, after)  # bit-identical backbone


def test_lora_starts_as_the_identity_and_trains_only_adapters(embedded_model):
    state = embedded_model.state
    lora = init_lora(state, rank=4, targets=("q_proj", "v_proj"), key=jax.random.PRNGKey(1))
    assert len(lora) == 2 * embedded_model.config.num_layers
    merged = merge_lora(state, lora, alpha=8.0)
    jax.tree.map(np.testing.assert_array_equal, jax.tree.map(np.asarray, merged), jax.tree.map(np.asarray, state))
    ids = jnp.asarray([embedded_model.tokenizer("Paris is the capital of")["input_ids"]])

    @jax.jit  # one program; the backbone's weights an argument (as in training), not constants
    def loss_at(lora, state):
        model = nnx.merge(embedded_model.graphdef, merge_lora(state, lora, alpha=8.0))
        _, hidden, _ = model(ids)
        return -jnp.mean(token_logprobs(model, hidden, ids)[:, 1:])

    grads = jax.jit(jax.grad(loss_at))(lora, state)
    name = next(iter(lora))
    assert np.abs(np.asarray(grads[name]["b"])).max() > 0  # b gets the first gradient (a: 0, as b = 0)
    bumped = jax.tree.map(lambda x, g: x - 0.1 * g, lora, grads)
    bumped = jax.tree.map(lambda x: x + 0.01, bumped)
    assert float(loss_at(bumped, state)) != float(loss_at(lora, state))
    with pytest.raises(ValueError, match="rank"):
        init_lora(state, rank=0)
    with pytest.raises(ValueError, match="targets"):
        init_lora(state, rank=2, targets=("gate_proj",))


def test_splice_ignores_unused_positions():
    embeds = jnp.zeros((2, 5, 3))
    lat = jnp.ones((2, 2, 3))
    out = np.asarray(splice(embeds, lat, jnp.asarray([[1, 3], [-1, 4]])))
    assert out[0, 1].sum() == 3 and out[0, 3].sum() == 3 and out[0, [0, 2, 4]].sum() == 0
    assert out[1, 4].sum() == 3 and out[1, :4].sum() == 0


def test_response_logprobs_equal_the_full_ones_at_those_positions(embedded_model):
    from activemem_jax.activemem.inject import response_logprobs

    model = embedded_model.module
    ids = jnp.asarray([embedded_model.tokenizer("One two three four five six seven eight")["input_ids"]] * 2)
    _, hidden, _ = model(ids)
    full, ent = token_logprobs(model, hidden, ids, with_entropy=True)
    pos = jnp.asarray([[3, 4, 5, -1], [6, 7, -1, -1]])
    got, got_ent = response_logprobs(model, hidden, ids, pos, chunk=2, with_entropy=True)
    for b in range(2):
        for a in range(4):
            if pos[b, a] >= 0:
                assert np.isclose(float(got[b, a]), float(full[b, pos[b, a]]), atol=1e-5)
                assert np.isclose(float(got_ent[b, a]), float(ent[b, pos[b, a]]), atol=1e-4)
