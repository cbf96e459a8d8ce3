"""`KVCache`: the decoder's static-shape key/value cache, with its own write and read.

Keys and values are stored alike, in blocks of `KV_BLOCK` rows: [B, kv_heads, n, head_dim],
head_dim minor. A decode step writes one row of head_dim per slot and head, contiguous in
this layout. (Keys used to be stored transposed, [B, kv_heads, head_dim, n], for the CPU's
q @ K matmul; on TPU the compiler then relaid every key block out to head_dim minor
before the write and back after it, four times the keys' bytes per layer and step:
docs/attention_kernels.md.) Attention over the first s rows reads whole blocks in place:
slicing one big buffer would copy it every step, which made that copy the largest cost
of a batched decode step on CPU.

Three layouts: one per layer layout of the decoder (`ModelConfig.scan_layers`), and
pages for a decode kernel:
- unrolled: `k[layer][block]`, one buffer per layer and block;
- stacked: `k[block]` with a leading layer axis [L, B, ...], carried through the
  layer scan and written in place at the scan's layer index;
- paged (`KVCache.init(..., paged=True)`, the engine's cache when a decode kernel reads
  it, `models/decode_kernel.py`): one key and one value array for all layers,
  [kv_heads, B * L * n, KV_BLOCK, head_dim], the n blocks of row r's layer l at pages
  (r * L + l) * n + 0..n-1 (`models/kv_pages.py`). The kernels' own page layout, so a
  decode step hands the cache to the kernel as it is; rows outermost, so sharding the
  page axis over the batch axes splits it by rows.

A forward pass says where its tokens go with a `CacheIndex`; each layer gets a `LayerKV`
view (`cache.layer(i)`), writes its new keys and values (`LayerKV.write`) and reads the
rows attention needs (`LayerKV.read`). Logical axes (`batch`, `kv_heads`, `layers`, ...)
give each buffer its placement on a mesh (`KVCache.shardings`).
"""

from __future__ import annotations

from typing import Optional, Sequence

import flax.struct
import jax
import jax.numpy as jnp
from jax.sharding import Mesh

from activemem_jax import sharding as shd
from activemem_jax.models import kv_pages

KV_BLOCK = 256  # cache rows per block

BLOCK_AXES = ("batch", "kv_heads", "length", "head_dim")  # every key and value block


@flax.struct.dataclass
class CacheIndex:
    """Where one forward pass's tokens sit in the cache.

    slots [B, T]: the cache position each token writes; rows [B] or None: the cache row
    of each batch element (None: row i; an out-of-range row writes nothing and reads a
    clamped row); span (static): attention reads the first `span` positions."""
    slots: jax.Array
    rows: Optional[jax.Array]
    span: int = flax.struct.field(pytree_node=False)

    def targets(self, batch: int) -> jax.Array:
        """[B, 1, 1] cache rows written by the batch elements."""
        return (jnp.arange(batch) if self.rows is None else self.rows)[:, None, None]


@flax.struct.dataclass
class LayerKV:
    """One layer's key and value blocks. `layer` is None for an unrolled cache; for a
    stacked cache the blocks keep their leading layer axis and `layer` (traced) picks this
    layer, so a scan writes into the carried buffers in place."""
    k: tuple
    v: tuple
    layer: Optional[jax.Array] = None
    pages: Optional[kv_pages.Pages] = flax.struct.field(pytree_node=False, default=None)  # paged layout

    def write(self, k_new, v_new, at: CacheIndex) -> "LayerKV":
        """k_new / v_new [B, KV, T, hd] into cache positions `at.slots` of rows `at.rows`."""
        if self.pages is not None:
            return self.replace(k=kv_pages.write(self.pages, self.k, k_new, at, self.layer),
                                v=kv_pages.write(self.pages, self.v, v_new, at, self.layer))
        return self.replace(k=_write(self.k, k_new, at, self.layer), v=_write(self.v, v_new, at, self.layer))

    def read(self, at: CacheIndex) -> tuple[list, list]:
        """The blocks holding positions [0, at.span) of the batch's rows: (key blocks,
        value blocks), each [B, KV, n_i, hd], the last one cut at span."""
        if self.pages is not None:  # gathered out of the pages (a copy: the XLA path's price)
            return (kv_pages.read(self.pages, self.k, at, self.layer),
                    kv_pages.read(self.pages, self.v, at, self.layer))
        return _read(self.k, at, self.layer), _read(self.v, at, self.layer)


def _write(blocks: tuple, new, at: CacheIndex, layer) -> tuple:
    target = at.targets(new.shape[0])
    heads = jnp.arange(new.shape[1])[None, :, None]
    lead = () if layer is None else (layer,)
    out, start = [], 0
    for blk in blocks:
        n = blk.shape[-2]
        if start < at.span:  # every slot is below span, so later blocks are never written
            rel = at.slots - start
            rel = jnp.where((rel >= 0) & (rel < n), rel, n)[:, None]  # [B,1,T]; n: dropped
            index = lead + (target, heads, rel)
            blk = blk.at[index].set(new.astype(blk.dtype), mode="drop")
        out.append(blk)
        start += n
    return tuple(out)


def _read(blocks: tuple, at: CacheIndex, layer) -> list:
    out, start = [], 0
    for blk in blocks:
        if start >= at.span:
            break
        if layer is not None:  # one gather for (layer, rows): a mesh partitions it in place
            blk = blk[layer] if at.rows is None else blk[layer, at.rows]
        elif at.rows is not None:
            blk = blk[at.rows]
        size = blk.shape[-2]
        if start + size > at.span:
            blk = blk[:, :, :at.span - start]
        out.append(blk)
        start += size
    return out


@flax.struct.dataclass
class KVCache:
    """k / v: unrolled, a tuple per layer of blocks; stacked, a tuple of blocks with a
    leading layer axis; paged, one page array each. mask [B, S]: the positions that hold
    a real token."""
    k: tuple
    v: tuple
    mask: jax.Array
    stacked: bool = flax.struct.field(pytree_node=False, default=False)
    pages: Optional[kv_pages.Pages] = flax.struct.field(pytree_node=False, default=None)

    @classmethod
    def init(cls, cfg, batch: int, length: int, dtype=None, paged: bool = False) -> "KVCache":
        """Zeros for `batch` rows of `length` positions, laid out for `cfg.scan_layers`, or
        in pages (`paged`: the layout a decode kernel reads)."""
        dtype = dtype or jnp.dtype(cfg.act_dtype)
        if paged:
            pages = kv_pages.Pages.for_cache(batch, cfg.num_layers, length, KV_BLOCK)
            shape = pages.shape(cfg.num_kv_heads, cfg.head_dim)
            return cls(k=jnp.zeros(shape, dtype), v=jnp.zeros(shape, dtype), mask=jnp.zeros((batch, length), bool),
                       pages=pages)
        stacked = bool(getattr(cfg, "scan_layers", False))
        lead = (cfg.num_layers,) if stacked else ()

        def blocks():
            return tuple(jnp.zeros(lead + (batch, cfg.num_kv_heads, min(KV_BLOCK, length - i), cfg.head_dim), dtype)
                         for i in range(0, length, KV_BLOCK))

        if stacked:
            k, v = blocks(), blocks()
        else:
            k = tuple(blocks() for _ in range(cfg.num_layers))
            v = tuple(blocks() for _ in range(cfg.num_layers))
        return cls(k=k, v=v, mask=jnp.zeros((batch, length), bool), stacked=stacked)

    @property
    def length(self) -> int:
        return self.mask.shape[1]

    def layer(self, i) -> LayerKV:
        """Layer i's view: i a Python int (unrolled) or a traced index (stacked). A paged
        view holds all layers' pages: an unrolled decoder hands each layer's written view
        on to the next (`Decoder.__call__`)."""
        if self.pages is not None:
            return LayerKV(k=self.k, v=self.v, layer=i, pages=self.pages)
        if self.stacked:
            return LayerKV(k=self.k, v=self.v, layer=i)
        return LayerKV(k=self.k[i], v=self.v[i])

    def with_layers(self, layers: Sequence[LayerKV], mask) -> "KVCache":
        """The cache after a forward pass: every layer's written blocks (one `LayerKV`
        holding all layers when stacked) and the new mask. Paged: the last layer's view
        holds every layer's writes."""
        if self.pages is not None:
            return self.replace(k=layers[-1].k, v=layers[-1].v, mask=mask)
        if self.stacked:
            (kv,) = layers
            return self.replace(k=kv.k, v=kv.v, mask=mask)
        return self.replace(k=tuple(kv.k for kv in layers), v=tuple(kv.v for kv in layers), mask=mask)

    def key_mask(self, attention_mask, at: CacheIndex):
        """(key_mask [B, S]: the batch's rows with this pass's tokens set,
        new_mask [rows, S]: the whole cache mask after the pass)."""
        b = attention_mask.shape[0]
        own = self.mask if at.rows is None else self.mask[at.rows]
        key_mask = own.at[jnp.arange(b)[:, None], at.slots].set(attention_mask)
        if at.rows is None:
            return key_mask, key_mask
        return key_mask, self.mask.at[at.rows].set(key_mask, mode="drop")  # out-of-range rows dropped

    def repeat_rows(self, n: int) -> "KVCache":
        """A one-row cache repeated into n rows (a prefix every row shares, computed once)."""
        if self.mask.shape[0] != 1:
            raise ValueError(f"repeat_rows needs a one-row cache; this one has {self.mask.shape[0]} rows")
        if self.pages is not None:
            pages = self.pages.with_rows(n)
            return self.replace(k=kv_pages.repeat(self.pages, self.k, n), v=kv_pages.repeat(self.pages, self.v, n),
                                mask=jnp.repeat(self.mask, n, axis=0), pages=pages)
        axis = 1 if self.stacked else 0
        rep = lambda x: jnp.repeat(x, n, axis=axis)  # noqa: E731
        return self.replace(k=jax.tree.map(rep, self.k), v=jax.tree.map(rep, self.v),
                            mask=jnp.repeat(self.mask, n, axis=0))

    def copy_row(self, src, dst, upto: int) -> "KVCache":
        """Row `src` copied into row `dst`: the blocks holding its first `upto` positions
        (static; later positions are overwritten before they are read) and its whole mask."""
        if self.pages is not None:
            return self.replace(k=kv_pages.copy_row(self.pages, self.k, src, dst, upto),
                                v=kv_pages.copy_row(self.pages, self.v, src, dst, upto),
                                mask=_copy_row(self.mask, src, dst, 0))
        axis = 1 if self.stacked else 0

        def blocks(layer):
            return tuple(_copy_row(b, src, dst, axis) if i * KV_BLOCK < upto else b
                         for i, b in enumerate(layer))

        if self.stacked:
            k, v = blocks(self.k), blocks(self.v)
        else:
            k, v = tuple(blocks(layer) for layer in self.k), tuple(blocks(layer) for layer in self.v)
        return self.replace(k=k, v=v, mask=_copy_row(self.mask, src, dst, 0))

    def logical_axes(self) -> dict:
        """{"k": axes of every key block, "v": ..., "mask": ...} as logical axis names."""
        if self.pages is not None:
            return {"k": kv_pages.AXES, "v": kv_pages.AXES, "mask": ("batch", "length")}
        lead = ("layers",) if self.stacked else ()
        return {"k": lead + BLOCK_AXES, "v": lead + BLOCK_AXES, "mask": ("batch", "length")}

    def shardings(self, mesh: Mesh, rules=None) -> "KVCache":
        """The same tree with a NamedSharding per buffer (works on `jax.eval_shape` output):
        rows over the batch axes, KV heads over tensor, as the rules say."""
        axes = self.logical_axes()

        def place(tree, names):
            return jax.tree.map(lambda a: shd.named_sharding(a.shape, names, mesh, rules), tree)

        return self.replace(k=place(self.k, axes["k"]), v=place(self.v, axes["v"]),
                            mask=shd.named_sharding(self.mask.shape, axes["mask"], mesh, rules))


def _copy_row(buf, src, dst, axis: int):
    """buf with index `dst` along `axis` replaced by index `src`. Indexed by [1]-arrays (a
    gather and a scatter), which a mesh partitions along a sharded `axis`; a scalar index
    (dynamic slice) would gather the whole buffer onto every device first."""
    src, dst = jnp.reshape(src, (1,)), jnp.reshape(dst, (1,))
    if axis == 0:
        return buf.at[dst].set(buf[src])
    return buf.at[:, dst].set(buf[:, src])


__all__ = ["KV_BLOCK", "CacheIndex", "KVCache", "LayerKV"]
