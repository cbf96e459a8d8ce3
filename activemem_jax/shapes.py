"""Every padding rule in one module: the sizes that compiled functions see.

A jitted function compiles once per input shape, so each variable size (a prompt chunk, a
KV read, a batch of rows, a training row's length) is rounded up to one of a few values.
Fewer values mean fewer compiles; coarser values mean more padded compute. Each rule says
which side it takes and why.
"""

PREFILL_BUCKETS = (32, 64, 128, 256, 512)  # engine prompt chunks; longer prompts go in chunks


def pow2(n: int, floor: int = 0) -> int:
    """The smallest power of two >= n, and at least `floor` (0 for n <= 0 and floor 0)."""
    b = 1 << max(n - 1, 0).bit_length() if n > 0 else 0
    return max(b, floor)


def round_up(n: int, multiple: int) -> int:
    """n rounded up to a multiple of `multiple`, at least one multiple (greedy_generate's
    prompt and cache lengths)."""
    return max(multiple, -(-n // multiple) * multiple)


ROW_ALIGN = 8  # training rows: the frozen preamble and the first gradient column are multiples of this


def batch_rows(n: int) -> int:
    """Rows of a group's last mini-batch, or of the key loss's observations (rl/rows.py,
    rl/trainer.py): a power of two, at least 8 (a few compiled batch sizes)."""
    return pow2(n, 8)


def tile_lengths(t: int, s: int, lanes: int = 128) -> tuple[int, int]:
    """(queries, keys) padded to the splash kernel's tile multiple (models/attention.py).
    When queries are padded, at least one key is too: a padded query then sees a padded
    key, never an empty row."""
    tp, sp = round_up(t, lanes), round_up(s, lanes)
    if tp > t and sp == s:
        sp += lanes
    return tp, sp


def row_length(n: int, lo: int = 32) -> int:
    """A training row's length (rl/rows.py): at least `lo`; up to 512 a multiple of an
    eighth of the next power of two (33-64 -> 40, 48, 56, 64; 65-128 in steps of 16), so a
    row pads by at most a quarter of itself with four shapes an octave; past 512 a
    multiple of 256 (at most 255 padded tokens per row once long). Whole powers of two
    padded 33-token rows to 64: twice the update's compute (docs/training_speed.md)."""
    if n <= lo:
        return lo
    return round_up(n, max(pow2(n) // 8, ROW_ALIGN)) if n <= 512 else round_up(n, 256)


def kv_bucket(n: int, rows: int, low: int = 256) -> int:
    """Cache rows attention reads for positions < n: a power of two >= low, capped at rows.
    Decode uses low=128 (a decode step reads every row's first kv_len positions, so a
    short batch gains from the finer bucket); prefill keeps 256 (fewer compiles)."""
    return min(pow2(n, low), rows)


def prefill_bucket(n: int) -> int:
    """The shortest engine prompt chunk that holds n tokens (n <= max(PREFILL_BUCKETS))."""
    return next(b for b in PREFILL_BUCKETS if b >= n)


def prefill_rows(n: int, max_slots: int) -> int:
    """Rows of a batched prefill (and of a decode step) holding n prompts: a power of two,
    capped at max_slots. Powers of four compiled fewer shapes, but padded 8 prompts (a
    GRPO group of 2 x 4 episodes) to 16 rows: twice the prefill's compute."""
    return min(pow2(n, 1), max_slots)


def observation_rows(n: int) -> int:
    """Observations read in one forward (activemem/observe.py): a power of two, at least 2."""
    return pow2(n, 2)


def observation_length(n: int) -> int:
    """An observation read's token length: a power of two, at least 16 (a one-sentence
    observation is ~13 tokens: a 32-token floor doubled the read)."""
    return pow2(n, 16)


__all__ = ["PREFILL_BUCKETS", "ROW_ALIGN", "batch_rows", "kv_bucket", "observation_length", "observation_rows", "pow2",
           "prefill_bucket", "prefill_rows", "round_up", "row_length", "tile_lengths"]
