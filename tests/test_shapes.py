"""The padding rules (activemem_jax/shapes.py) against hand-written values."""

from activemem_jax import shapes


def test_powers_of_two_with_floors():
    assert [shapes.pow2(n) for n in (0, 1, 2, 3, 5, 8, 9)] == [0, 1, 2, 4, 8, 8, 16]
    assert [shapes.pow2(n, 16) for n in (0, 13, 16, 17)] == [16, 16, 16, 32]
    assert [shapes.observation_rows(n) for n in (1, 2, 3)] == [2, 2, 4]


def test_row_length_steps_by_eighths_to_512_then_by_256():
    assert [shapes.row_length(n) for n in (1, 32, 33, 41, 64, 65, 300, 449, 512, 513, 769, 1000)] == [
        32, 32, 40, 48, 64, 80, 320, 512, 512, 768, 1024, 1024]
    assert all(shapes.row_length(n) % shapes.ROW_ALIGN == 0 for n in range(1, 2000))
    assert all(n <= shapes.row_length(n) <= max(32, n * 1.25) for n in range(1, 513))


def test_engine_buckets():
    assert [shapes.kv_bucket(n, 1024) for n in (1, 256, 257, 700, 5000)] == [256, 256, 512, 1024, 1024]
    assert shapes.kv_bucket(100, 1024, low=128) == 128
    assert [shapes.prefill_bucket(n) for n in (1, 32, 33, 512)] == [32, 32, 64, 512]
    assert [shapes.prefill_rows(n, 8) for n in (1, 3, 8, 9)] == [1, 4, 8, 8]
    assert [shapes.round_up(n, 64) for n in (0, 1, 64, 65)] == [64, 64, 64, 128]


def test_batch_rows_and_splash_tiles():
    assert [shapes.batch_rows(n) for n in (1, 8, 9, 33)] == [8, 8, 16, 64]
    assert shapes.tile_lengths(128, 256) == (128, 256)
    assert shapes.tile_lengths(20, 20) == (128, 128)
    assert shapes.tile_lengths(100, 128) == (128, 256)  # queries padded, keys full: one more key tile
