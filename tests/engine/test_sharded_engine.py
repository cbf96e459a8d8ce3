"""The engine on 8 fake CPU devices: decode state sharded by the rules (slots over
data x fsdp, KV heads over tensor), the same tokens and log-probs as on one device, and
no step gathers a cache buffer onto every device.

The 8 devices come from tests/conftest.py (XLA_FLAGS set before jax is imported)."""

import re

import jax
import numpy as np
import pytest

from activemem_jax.engine import Engine, SamplingParams
from activemem_jax.models import load_pretrained
from activemem_jax.sharding import make_mesh
from tests.models.tiny_hf import make_tiny, save_word_tokenizer

VOCAB = 512
SLOTS = ("data", "fsdp")


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny_mistral_engine")
    make_tiny(d, "mistral_gqa3", vocab_size=VOCAB)  # 6 heads, 2 KV heads, head_dim 16
    save_word_tokenizer(d, VOCAB)
    return str(d)


def engines(tiny_dir, scan_layers):
    one = load_pretrained(tiny_dir, mesh=make_mesh(devices=jax.devices()[:1]), scan_layers=scan_layers)
    eight = load_pretrained(tiny_dir, mesh=make_mesh(data=2, fsdp=2, tensor=2), scan_layers=scan_layers)
    return Engine(one, max_slots=8, max_len=256), Engine(eight, max_slots=8, max_len=256)


def make_prompts():
    rng = np.random.default_rng(0)
    return [[int(t) for t in rng.integers(3, VOCAB, n)] for n in (5, 17, 33, 60, 90)]


def scenario(engine):
    """Batched prefill and decode (greedy with top log-probs, seeded sampling), a latent
    splice, a hidden-state-only request, and a prefix copied from a busy slot."""
    rng = np.random.default_rng(1)
    prompts = make_prompts()
    greedy = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True, top_logprobs=3)
    sampled = SamplingParams(temperature=1.0, top_p=0.9, seed=11, max_tokens=10, ignore_eos=True)
    latents = rng.standard_normal((2, engine.model.config.hidden_size)).astype(np.float32)
    with engine.batch():
        handles = [engine.submit(p, greedy if i % 2 == 0 else sampled) for i, p in enumerate(prompts)]
        handles.append(engine.submit(prompts[2], greedy, latents=latents, latent_positions=[3, 7]))
        handles.append(engine.submit(prompts[4], hidden="only"))
    outs = [h.result(300) for h in handles]

    engine.clear_prefix_cache()
    copies = engine.stats["prefix_copies"]
    busy = engine.submit(prompts[4], SamplingParams(temperature=0, max_tokens=150, ignore_eos=True))
    next(iter(busy))  # decoding: its slot holds the prefix
    shared = engine.submit(prompts[4][:70] + prompts[1], greedy).result(300)
    busy.cancel()
    busy.result(300)
    assert engine.stats["prefix_copies"] == copies + 1 and shared.cached_tokens == 70
    return outs + [shared]


def spec(a) -> tuple:
    """a's PartitionSpec as a tuple, one entry per dimension."""
    return tuple(a.sharding.spec) + (None,) * (a.ndim - len(a.sharding.spec))


def collective_shapes(compiled_text: str) -> list[tuple[int, ...]]:
    """Shapes of every array a cross-device collective returns."""
    shapes = []
    for line in compiled_text.splitlines():
        m = re.search(r"= (.*?) (all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)"
                      r"(-start)?\(", line)
        if m:
            shapes += [tuple(int(n) for n in dims.split(",") if n)
                       for dims in re.findall(r"[a-z0-9]+\[([0-9,]*)\]", m.group(1))]
    return shapes


@pytest.mark.parametrize("scan_layers", [False, True], ids=["unrolled", "scan"])
def test_sharded_engine_equals_one_device(tiny_dir, scan_layers):
    one, eight = engines(tiny_dir, scan_layers)
    with one, eight:
        ref, got = scenario(one), scenario(eight)
        for a, b in zip(ref, got):
            assert a.token_ids == b.token_ids
            np.testing.assert_allclose(b.logprobs, a.logprobs, atol=1e-5)
            assert [[i for i, _ in t] for t in b.top_logprobs] == [[i for i, _ in t] for t in a.top_logprobs]
        np.testing.assert_allclose(got[6].hidden, ref[6].hidden, atol=1e-5)

        # independent of either engine: the greedy log-probs are the full forward's
        prompt, out = make_prompts()[0], got[0]
        logits = one.model.logits(np.asarray(prompt + out.token_ids)[None])[0]
        logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
            - logits.max(-1, keepdims=True)
        want = [logp[len(prompt) - 1 + i, t] for i, t in enumerate(out.token_ids)]
        np.testing.assert_allclose(out.logprobs, want, atol=1e-4)
        assert out.token_ids == [int(logp[len(prompt) - 1 + i].argmax()) for i in range(len(out.token_ids))]

        # the state stayed sharded through prefill, decode, splice and prefix copy
        state = eight._state
        lead = (None,) if scan_layers else ()
        blocks = jax.tree.leaves(state.cache.k) + jax.tree.leaves(state.cache.v)
        for blk in blocks:
            assert spec(blk) == (*lead, SLOTS, "tensor", None, None)
            shard = blk.addressable_shards[0].data.shape
            assert shard[len(lead):len(lead) + 2] == (8 // 4, 2 // 2)
        assert spec(state.cache.mask) == (SLOTS, None)
        for vec in (state.lengths, state.tokens, state.active, state.temperature, state.seeds, state.steps):
            assert spec(vec) == (SLOTS,)
        assert all(leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(one._state))


@pytest.mark.parametrize("scan_layers", [False, True], ids=["unrolled", "scan"])
def test_no_step_gathers_a_cache_buffer(tiny_dir, scan_layers):
    """Compiled for the 8-device mesh, no engine step returns a whole cache buffer from a
    collective (a buffer gathered over the slot axis would have its full slot count)."""
    model = load_pretrained(tiny_dir, mesh=make_mesh(data=2, fsdp=2, tensor=2), scan_layers=scan_layers)
    with Engine(model, max_slots=8, max_len=256) as engine:
        state, put = engine._state, engine._put
        gathered = set()
        for blk in jax.tree.leaves(state.cache.k) + jax.tree.leaves(state.cache.v) + [state.cache.mask]:
            shape = list(blk.shape)
            gathered.add(tuple(shape))
            if blk.ndim >= 4:  # the same buffer with its KV heads still split over tensor
                shape[-3] //= 2
                gathered.add(tuple(shape))
        p, r, d = 4, 32, model.config.hidden_size
        sampling = put((np.zeros(p, np.float32), np.zeros(p, np.int32), np.ones(p, np.float32),
                        np.zeros(p, np.int32)))
        prefill_args = put((np.array([0, 3, 5, 8], np.int32), np.zeros((p, r), np.int32),
                            np.array([0, 40, 0, 0], np.int32), np.full((p,), 5, np.int32),
                            np.zeros((p, 8, d), np.float32), np.full((p, 8), -1, np.int32))) + (sampling,)
        fns = engine._fns
        lowered = {
            "generate": fns["generate"].lower(engine._params, state, None, kv_len=256, top=True),
            "prefill": fns["prefill"].lower(engine._params, state, *prefill_args, kv_len=256, fresh=False),
            "prefill_fresh": fns["prefill"].lower(engine._params, state, *prefill_args, kv_len=256, fresh=True),
            "copy_row": fns["copy_row"].lower(state, *put((np.int32(1), np.int32(6))), upto=512),
            "insert": fns["insert"].lower(state, *put((np.array([0, 1, 2, 8], np.int32), np.ones(p, np.int32))),
                                          put(np.zeros(p, np.int32)), sampling),
            "release": fns["release"].lower(state, put(np.int32(3))),
        }
        for name, low in lowered.items():
            shapes = collective_shapes(low.compile().as_text())
            assert not gathered & set(shapes), f"{name} gathers a cache buffer: {gathered & set(shapes)}"
