"""The observation read: a cached read equals a fresh one bit for bit, whatever its batch."""

import numpy as np

from activemem_jax.activemem.observe import ObservationEncoder

TEXTS = ["The code for Tumar is yellow.", "What is the code for Renmi? Answer with one word.",
         "The code for Kalo is red.", "x", "What is the code for Lomi? Answer with one word. " * 3]


def test_a_cached_read_equals_a_fresh_read_in_any_batch(embedded_model):
    cached = ObservationEncoder(embedded_model)
    first_h, first_p = cached(TEXTS[:2])
    assert (cached.reads, cached.lookups) == (2, 0)
    h, p = cached(TEXTS + TEXTS[:1])  # 2 seen, 3 new, one repeated within the call
    assert (cached.reads, cached.lookups) == (5, 3)
    np.testing.assert_array_equal(h[:2], first_h)
    np.testing.assert_array_equal(h[-1], h[0])
    # each alone (with a padding row), in a fresh encoder: the same read up to float
    # summation order (XLA's CPU matmuls are not batch-invariant on every CPU: 1.7e-5 apart
    # on an AVX-512 EPYC, bitwise equal on others)
    for i, text in enumerate(TEXTS):
        fresh_h, fresh_p = ObservationEncoder(embedded_model)([text])
        np.testing.assert_allclose(fresh_h[0], h[i], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(fresh_p[0], p[i], rtol=1e-4, atol=1e-4)
    assert not np.allclose(h[0], h[1])  # distinct observations read differently


def test_the_cache_keeps_the_most_recent_reads_only(embedded_model):
    enc = ObservationEncoder(embedded_model, cache_size=2)
    enc(TEXTS[:2])
    enc(TEXTS[:1])  # TEXTS[0] is now the most recent
    enc(TEXTS[2:3])  # evicts TEXTS[1]
    assert len(enc._cache) == 2
    enc(TEXTS[:1])
    assert enc.reads == 3
    enc(TEXTS[1:2])
    assert enc.reads == 4
