"""The paged KV-cache layout: what a paged decode kernel reads (`models/decode_kernel.py`).

One key array and one value array hold every layer: [kv_heads, pages, size, head_dim],
the kernels' own layout (head_dim minor, one page of `size` cache positions per index).
Row r's positions [i * size, (i + 1) * size) of layer l sit in page (r * L + l) * n + i,
n pages a row and layer. So a row's pages are contiguous and rows are outermost: a page
table is arithmetic, never stored, and the page axis sharded over the batch axes splits
the cache by rows.

    pages = Pages.for_cache(rows=8, layers=30, length=2304, size=256)
    buf = jnp.zeros(pages.shape(kv_heads, head_dim))
    buf = write(pages, buf, k_new, at, layer)      # k_new [B, KV, T, hd] at at.slots
    ids = pages.ids(rows, layer, count)            # [B, count] page ids of each row's first positions
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

AXES = ("kv_heads", "batch", "length", "head_dim")  # logical axes of a page array


@dataclasses.dataclass(frozen=True)
class Pages:
    """Static geometry: `rows` cache rows, `layers` layers, `per_row` pages a row and
    layer of `size` positions each."""
    rows: int
    layers: int
    per_row: int
    size: int

    @classmethod
    def for_cache(cls, rows: int, layers: int, length: int, size: int) -> "Pages":
        size = min(size, length)
        if length % size:
            raise ValueError(f"a paged cache of {length} positions: use a multiple of the page size {size}")
        return cls(rows=rows, layers=layers, per_row=length // size, size=size)

    @property
    def total(self) -> int:
        return self.rows * self.layers * self.per_row

    def shape(self, kv_heads: int, head_dim: int) -> tuple:
        return (kv_heads, self.total, self.size, head_dim)

    def with_rows(self, rows: int) -> "Pages":
        return dataclasses.replace(self, rows=rows)

    def count(self, span: int) -> int:
        """Pages holding positions [0, span)."""
        return min(-(-span // self.size), self.per_row)

    def ids(self, rows, layer, count: int):
        """[B, count] int32: the first `count` pages of each row in `rows` [B] (in range)
        for `layer` (a Python int, a traced index, or one per row [B])."""
        base = (jnp.asarray(rows, jnp.int32) * self.layers + layer) * self.per_row
        return base[:, None] + jnp.arange(count, dtype=jnp.int32)[None, :]


def write(pages: Pages, buf, new, at, layer):
    """new [B, KV, T, hd] into positions `at.slots` [B, T] of rows `at.targets` of
    `layer`; an out-of-range row (batch padding) or a position past the row writes nothing."""
    b, kv, t, _ = new.shape
    rows = at.targets(b)[:, 0, 0]
    slots = at.slots
    keep = (rows < pages.rows)[:, None] & (slots >= 0) & (slots < pages.per_row * pages.size)
    page = (rows[:, None] * pages.layers + layer) * pages.per_row + slots // pages.size
    page = jnp.where(keep, page, buf.shape[1])  # past the last page: dropped
    heads = jnp.arange(kv)[None, :, None]
    return buf.at[heads, page[:, None, :], (slots % pages.size)[:, None, :]].set(new.astype(buf.dtype),
                                                                                   mode="drop")


def read(pages: Pages, buf, at, layer) -> list:
    """Positions [0, at.span) of the batch's rows as one block [B, KV, span, hd] (a
    gather: the XLA path reading a paged cache copies what it reads). Rows out of range
    read a clamped row, as the block layouts do."""
    b = at.slots.shape[0]
    rows = jnp.arange(b) if at.rows is None else jnp.clip(at.rows, 0, pages.rows - 1)
    count = pages.count(at.span)
    got = buf[:, pages.ids(rows, layer, count)]  # [KV, B, count, size, hd]
    kv, hd = buf.shape[0], buf.shape[-1]
    block = got.transpose(1, 0, 2, 3, 4).reshape(b, kv, count * pages.size, hd)
    return [block[:, :, :at.span]]


def copy_row(pages: Pages, buf, src, dst, upto: int):
    """Row `src`'s pages holding its first `upto` positions (every layer) into row `dst`'s."""
    count = pages.count(upto)
    layers = jnp.arange(pages.layers, dtype=jnp.int32)

    def ids(row):  # [L * count]: the row's first pages in every layer
        rows = jnp.broadcast_to(jnp.reshape(jnp.asarray(row, jnp.int32), ()), layers.shape)
        return pages.ids(rows, layers, count).reshape(-1)

    return buf.at[:, ids(dst)].set(buf[:, ids(src)])


def repeat(pages: Pages, buf, n: int):
    """A one-row page array repeated into n rows."""
    if pages.rows != 1:
        raise ValueError(f"repeat needs a one-row cache; this one has {pages.rows} rows")
    return jnp.tile(buf, (1, n, 1, 1))


__all__ = ["AXES", "Pages", "copy_row", "read", "repeat", "write"]
