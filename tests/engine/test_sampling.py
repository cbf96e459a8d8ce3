"""The sampler's distributions, on a 4-token vocabulary with known probabilities."""

import jax
import jax.numpy as jnp
import numpy as np

from activemem_jax.engine.sampling import sample

PROBS = np.array([0.5, 0.3, 0.15, 0.05])


def draw(n=4000, temperature=1.0, top_k=0, top_p=1.0, pad=300):
    logits = jnp.tile(jnp.log(jnp.asarray(PROBS, jnp.float32)), (n, 1))
    logits = jnp.pad(logits, ((0, 0), (0, pad)), constant_values=-1e9)  # pad 300: > 256 candidates
    f = jax.jit(sample)
    toks, lps, _, _ = f(logits, jnp.full(n, temperature), jnp.full(n, top_k, jnp.int32),
                        jnp.full(n, top_p), jnp.arange(n, dtype=jnp.int32), jnp.zeros(n, jnp.int32))
    return np.bincount(np.asarray(toks), minlength=4)[:4] / n, np.asarray(lps), np.asarray(toks)


def test_full_distribution_and_logprobs():
    freq, lps, toks = draw()
    np.testing.assert_allclose(freq, PROBS, atol=0.03)
    np.testing.assert_allclose(lps, np.log(PROBS)[toks], atol=1e-5)


def test_temperature_top_k_top_p():
    freq, _, _ = draw(top_k=2)
    np.testing.assert_allclose(freq, [0.5 / 0.8, 0.3 / 0.8, 0, 0], atol=0.03)
    freq, _, _ = draw(top_p=0.7)  # keeps 0.5 and 0.3 (0.5 < 0.7 before adding 0.3)
    np.testing.assert_allclose(freq, [0.5 / 0.8, 0.3 / 0.8, 0, 0], atol=0.03)
    freq, _, _ = draw(temperature=0.0)
    assert freq[0] == 1.0
    freq, _, _ = draw(temperature=0.5)  # p^2 renormalized
    sharp = PROBS ** 2 / (PROBS ** 2).sum()
    np.testing.assert_allclose(freq, sharp, atol=0.03)


def test_a_vocabulary_smaller_than_the_candidate_set_samples():
    """4 tokens (fewer than the 256 top-k candidates and the 20 top log-probs): the same
    distributions, and the top log-probs padded to their fixed width."""
    freq, _, _ = draw(top_k=2, pad=0)
    np.testing.assert_allclose(freq, [0.5 / 0.8, 0.3 / 0.8, 0, 0], atol=0.03)
    freq, _, _ = draw(pad=0)
    np.testing.assert_allclose(freq, PROBS, atol=0.03)
    logits = jnp.log(jnp.asarray(PROBS, jnp.float32))[None]
    _, _, top_lp, top_ids = jax.jit(sample)(logits, jnp.zeros(1), jnp.zeros(1, jnp.int32), jnp.ones(1),
                                            jnp.zeros(1, jnp.int32), jnp.zeros(1, jnp.int32))
    assert top_lp.shape == (1, 20) and list(np.asarray(top_ids[0, :4])) == [0, 1, 2, 3]
    np.testing.assert_allclose(np.asarray(top_lp[0, :4]), np.log(PROBS), atol=1e-5)
    assert np.all(np.isneginf(np.asarray(top_lp[0, 4:])))
