"""The engine against transformers and against itself (batching, seeds, logprobs, splice)."""

import time

import numpy as np
import pytest
import torch

from activemem_jax.engine import PromptTooLong, SamplingParams
from activemem_jax.engine.prefix_policy import PrefixCacheModel

pytestmark = pytest.mark.slow

GREEDY = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
PROMPTS = ["The history of Rome begins", "def fibonacci(n):", "My favourite recipe for soup is"]


def test_greedy_matches_transformers_generate(engine, embedded_model, embedded_hf_model):
    tok = embedded_model.tokenizer
    outs = engine.generate(PROMPTS, GREEDY)
    for prompt, out in zip(PROMPTS, outs):
        ids = tok(prompt)["input_ids"]
        with torch.no_grad():
            ref = embedded_hf_model.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False,
                                             eos_token_id=None, pad_token_id=2)[0, len(ids):].tolist()
        assert out.token_ids == ref, prompt
        assert out.finish_reason == "length" and out.completion_tokens == 32


def test_batching_is_invisible(engine):
    prompts = [f"Write a sentence about the number {i}." for i in range(8)]
    params = SamplingParams(temperature=0, max_tokens=12)
    together = engine.generate([[{"role": "user", "content": p}] for p in prompts], params)
    for p, joint in zip(prompts, together):
        alone = engine.generate([[{"role": "user", "content": p}]], params)[0]
        assert alone.token_ids == joint.token_ids


def test_stop_max_tokens_and_eos(engine):
    chat = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    full = engine.generate([chat], SamplingParams(temperature=0, max_tokens=40))[0]
    assert "Paris" in full.text and full.finish_reason == "stop"  # ended on EOS (<|im_end|>)
    assert 2 not in full.token_ids
    stopped = engine.generate([chat], SamplingParams(temperature=0, max_tokens=40, stop=["Paris", "zzz"]))[0]
    assert stopped.finish_reason == "stop" and "Paris" not in stopped.text
    assert full.text.startswith(stopped.text) and len(stopped.text) < len(full.text)
    short = engine.generate([chat], SamplingParams(temperature=0, max_tokens=3))[0]
    assert short.finish_reason == "length" and short.token_ids == full.token_ids[:3]


def test_seeds_reproduce_and_do_not_depend_on_the_batch(engine):
    p = SamplingParams(temperature=1.0, top_p=0.95, max_tokens=16, seed=1234, ignore_eos=True)
    a = engine.generate(["Once upon a time"], p)[0]
    crowd = engine.generate(["Once upon a time", "A dog", "The sea", "Numbers:"], p)
    assert crowd[0].token_ids == a.token_ids
    other = engine.generate(["Once upon a time"], SamplingParams(temperature=1.0, max_tokens=16, seed=99,
                                                                ignore_eos=True))[0]
    assert other.token_ids != a.token_ids
    top1 = engine.generate(["Once upon a time"], SamplingParams(temperature=1.0, top_k=1, max_tokens=8,
                                                               seed=5, ignore_eos=True))[0]
    greedy = engine.generate(["Once upon a time"], SamplingParams(temperature=0, max_tokens=8,
                                                                 ignore_eos=True))[0]
    assert top1.token_ids == greedy.token_ids


def test_logprobs_equal_log_softmax_of_model_logits(engine, embedded_model):
    prompt = embedded_model.tokenizer("The quick brown fox")["input_ids"]
    out = engine.generate([prompt], SamplingParams(temperature=1.0, max_tokens=10, seed=7,
                                                   top_logprobs=5, ignore_eos=True))[0]
    seq = np.asarray(prompt + out.token_ids)[None]
    logits = embedded_model.logits(seq)[0]
    ref = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    want = [ref[len(prompt) - 1 + i, t] for i, t in enumerate(out.token_ids)]
    np.testing.assert_allclose(out.logprobs, want, atol=2e-3)
    assert len(out.top_logprobs) == 10 and len(out.top_logprobs[0]) == 5
    best_id, best_lp = out.top_logprobs[0][0]
    assert best_id == int(ref[len(prompt) - 1].argmax())
    np.testing.assert_allclose(best_lp, ref[len(prompt) - 1].max(), atol=2e-3)


def test_latent_splice_with_own_embeddings_reproduces_plain_output(engine, embedded_model):
    ids = embedded_model.tokenizer("Memory slots: <|im_start|><|im_start|> The answer is")["input_ids"]
    positions = [i for i, t in enumerate(ids) if t == 1][:2]
    assert len(positions) == 2
    own = np.asarray(embedded_model.module.embed_tokens(np.asarray([ids])))[0, positions]
    params = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    plain = engine.generate([ids], params)[0]
    spliced = engine.submit(ids, params, latents=own, latent_positions=positions).result()
    assert spliced.token_ids == plain.token_ids
    other = engine.submit(ids, params, latents=np.random.default_rng(0).standard_normal(own.shape) * 3,
                          latent_positions=positions).result()
    assert other.token_ids != plain.token_ids  # the spliced vectors really are used


def test_prefix_reuse_reports_cached_tokens_and_keeps_outputs(engine):
    system = "You are a careful assistant. " * 30
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    first = engine.generate([[{"role": "system", "content": system}, {"role": "user", "content": "Hi!"}]], params)[0]
    second = engine.generate([[{"role": "system", "content": system}, {"role": "user", "content": "Hello?"}]],
                             params)[0]
    assert second.cached_tokens >= 150 and second.usage["prompt_tokens_details"]["cached_tokens"] >= 150
    again = engine.generate([[{"role": "system", "content": system}, {"role": "user", "content": "Hi!"}]], params)[0]
    assert again.token_ids == first.token_ids and again.cached_tokens >= 150


def test_bad_requests(engine):
    with pytest.raises(PromptTooLong, match="context is 1024"):
        engine.submit(list(range(3, 1100)))
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="latents"):
        engine.submit([5, 6, 7], latents=np.zeros((2, 3)), latent_positions=[0, 1])
    with pytest.raises(ValueError, match="empty"):
        engine.submit([])


def test_a_long_request_does_not_block_short_ones(engine):
    long = engine.submit("Tell me everything about the sea.", SamplingParams(temperature=0, max_tokens=100,
                                                                           ignore_eos=True))
    shorts = [engine.submit(f"Say {w}.", SamplingParams(temperature=0, max_tokens=4)) for w in ("yes", "no")]
    for h in shorts:
        assert h.result(120).completion_tokens >= 1
    assert not long.request.done.is_set()  # still decoding while the short ones finished
    assert long.result(300).completion_tokens == 100


def test_requests_admitted_together_share_batched_prefills(engine, embedded_model):
    """Two long (chunked) prompts, short ones, a splice and a hidden-state-only request
    admitted at once give what each gives alone, in fewer prefill calls than requests."""
    tok = embedded_model.tokenizer
    params = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
    long_ids = tok(" ".join(f"item{i}" for i in range(300)))["input_ids"][:700]
    long_b = tok(" ".join(f"thing{i}" for i in range(300)))["input_ids"][:600]
    assert len(long_ids) == 700 and len(long_b) == 600
    splice_ids = tok("Slots: <|im_start|><|im_start|> so the answer is")["input_ids"]
    positions = [i for i, t in enumerate(splice_ids) if t == 1][:2]
    latents = np.random.default_rng(1).standard_normal((2, embedded_model.config.hidden_size)) * 2
    shorts = [f"Name a colour number {i}." for i in range(5)]

    def submit_all():
        with engine.batch():
            handles = [engine.submit(ids, params) for ids in (long_ids, long_b)]
            handles += [engine.submit(s, params) for s in shorts]
            handles.append(engine.submit(splice_ids, params, latents=latents, latent_positions=positions))
            handles.append(engine.submit("Encode me, please.", hidden="only"))
        return [h.result(300) for h in handles]

    engine.clear_prefix_cache()
    calls = engine.stats["prefill_calls"]
    together = submit_all()
    # 8 slots, 9 requests: the first 8 in one admission (first chunks of both long prompts
    # in one call, then last chunks by padded length), the 9th after a slot frees
    assert engine.stats["prefill_calls"] - calls <= 5
    engine.clear_prefix_cache()
    alone = [engine.generate([ids], params)[0] for ids in (long_ids, long_b)]
    alone += [engine.generate([s], params)[0] for s in shorts]
    alone.append(engine.submit(splice_ids, params, latents=latents, latent_positions=positions).result())
    alone.append(engine.submit("Encode me, please.", hidden="only").result())
    for a, b in zip(together[:-1], alone[:-1]):
        assert a.token_ids == b.token_ids and a.cached_tokens == 0
    np.testing.assert_allclose(together[-1].hidden, alone[-1].hidden, atol=1e-4)
    assert together[-1].token_ids == [] and together[-1].hidden.shape == (embedded_model.config.hidden_size,)


def test_decode_steps_only_the_live_slots(engine):
    """A step over fewer live slots than the engine has reads and writes only their rows:
    outputs equal the all-slot step's, and padding rows (an out-of-range slot, read as
    the last slot) leave the last slot's cached prefix usable."""
    params = SamplingParams(temperature=0, max_tokens=10, ignore_eos=True)
    prompts = [f"Count the birds in picture number {i}." for i in range(8)]
    engine.clear_prefix_cache()
    full = engine.generate(prompts, params)  # 8 live slots: every row stepped
    assert [o.cached_tokens for o in full] == [0] * 8
    rows, steps = engine.stats["decode_rows"], engine.stats["steps"]
    three = engine.generate(prompts[:3], params)  # 3 live slots: a 4-row step with 1 padding row
    assert engine.stats["decode_rows"] - rows == 4 * (engine.stats["steps"] - steps)
    assert [o.token_ids for o in three] == [o.token_ids for o in full[:3]]
    np.testing.assert_allclose([o.logprobs for o in three], [o.logprobs for o in full[:3]], atol=1e-4)
    last = engine.generate(prompts[7:], params)[0]  # reuses the prefix cached in the last slot
    assert last.cached_tokens > 0 and last.token_ids == full[7].token_ids
    rows, steps = engine.stats["decode_rows"], engine.stats["steps"]
    engine.generate(prompts[3:4], params)
    assert engine.stats["decode_rows"] - rows == engine.stats["steps"] - steps  # one row per step


def test_a_prefix_held_by_a_busy_slot_is_copied(engine, embedded_model):
    """A prompt sharing a 300-token prefix (two cache blocks) with a request still decoding
    gets that prefix copied into its own slot, and answers as it does with nothing cached."""
    tok = embedded_model.tokenizer
    prefix = tok(" ".join(f"note{i}" for i in range(200)))["input_ids"][:300]
    assert len(prefix) == 300
    first, second = prefix + tok(" first")["input_ids"], prefix + tok(" second")["input_ids"]
    params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    engine.clear_prefix_cache()
    alone = engine.generate([second], params)[0]
    engine.clear_prefix_cache()
    copies = engine.stats["prefix_copies"]
    busy = engine.submit(first, SamplingParams(temperature=0, max_tokens=400, ignore_eos=True))
    next(iter(busy))  # decoding: its slot holds the prefix
    out = engine.generate([second], params)[0]
    busy.cancel()
    assert engine.stats["prefix_copies"] == copies + 1
    assert out.cached_tokens >= 300 and out.token_ids == alone.token_ids
    np.testing.assert_allclose(out.logprobs, alone.logprobs, atol=1e-4)


def test_alternating_callers_keep_both_long_prefixes(engine, embedded_model):
    """Two callers with different long prompts (HyMem's planner and executor) and a third
    with a new short prompt every time take turns, one request at a time: each long
    prefix stays cached from its second call on. (Taking the lowest free slot, every call
    overwrote the same one and nothing was reused.)"""
    tok = embedded_model.tokenizer
    prefix = {name: [100 + k] + tok(" ".join(f"{name}{i}" for i in range(300)))["input_ids"][:299]
              for k, name in enumerate(("planner", "executor"))}
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    for _ in range(400):  # an earlier test's cancelled request may still be leaving
        if not (engine.busy_slots or engine.queued):
            break
        time.sleep(0.05)
    engine.clear_prefix_cache()
    before = dict(engine.stats)
    cached = {"planner": [], "executor": []}
    host = PrefixCacheModel(engine.max_slots, engine.rows)  # the same policy without a device

    def call(ids):
        out = engine.generate([ids], params)[0]
        assert host.serve(ids, out.token_ids[:-1]) == out.cached_tokens  # the last token was never fed
        return out.cached_tokens

    for turn in range(3):
        for name in ("planner", "executor"):
            ask = tok(f" turn {turn}: what next for the {name}?")["input_ids"]
            cached[name].append(call(prefix[name] + ask))
            short = tok(f"A fresh memory note, number {turn} {name}")["input_ids"]
            assert call([7 + turn] + short) < 16
    for name in cached:
        assert cached[name][0] < 16 and min(cached[name][1:]) >= 300, cached
    assert engine.stats["prefix_hits"] - before["prefix_hits"] >= 4
    assert engine.stats["prefix_misses"] - before["prefix_misses"] >= 8
    assert engine.health()["prefix_cache"]["hits"] == engine.stats["prefix_hits"]
