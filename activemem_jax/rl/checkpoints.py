"""Training checkpoints with orbax `CheckpointManager` (async, atomic, keep-last-N, and any
steps named to be kept for good: the trainer keeps the SFT warm start's end).

One checkpoint per saved step holds:
  params     {"controller": pure dict, "lora": {...}}   (StandardSave)
  opt_state  the optax state                            (StandardSave)
  tree       the persistent memory tree                 (StandardSave)
  meta       step, data-iterator state, RNG seed, config fingerprint (JsonSave)

    ckpt = Checkpoints(directory, keep=3, preserve=(600,))  # the newest 3, and step 600 for good
    ckpt.save(step, params, opt_state, tree, meta)
    restored = ckpt.restore(abstract_params, abstract_opt_state, abstract_tree)  # latest
    restore_policy(directory, policy)   # controller + tree into an ActiveMem (evaluation)

Orbax writes into a temporary folder and renames it when complete, so a process killed
mid-save leaves the previous step as the latest. Restoring into a different structure
(another K, hidden size, tree capacity, LoRA setting) raises CheckpointMismatch naming
what differs.
"""

from __future__ import annotations

import logging
import os
from typing import Optional

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx


log = logging.getLogger(__name__)


class CheckpointMismatch(ValueError):
    """A checkpoint does not fit the model / config it is restored into (corrupt=True: its
    files cannot be read)."""

    def __init__(self, message: str, corrupt: bool = False):
        super().__init__(message)
        self.corrupt = corrupt


def _short(e: Exception, limit: int = 200) -> str:
    """An exception in one line: its type and the first line of its message (TensorStore
    and orbax messages carry whole specs after it)."""
    first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    first = first if len(first) <= limit else first[:limit] + "..."
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def to_saveable(params) -> dict:
    return {"controller": nnx.to_pure_dict(params["controller"]), "lora": params["lora"]}


def _abstract(tree):
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)


def _key(entry) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def _shapes(tree) -> dict:
    """{'a/b/c': shape} of a pytree of arrays or of orbax array metadata."""
    return {"/".join(_key(k) for k in path): tuple(getattr(x, "shape", np.shape(x)))
            for path, x in jax.tree_util.tree_leaves_with_path(tree)}


class Checkpoints:
    def __init__(self, directory: str, keep: int = 3, async_save: bool = True, preserve=()):
        from orbax.checkpoint import checkpoint_managers as cm

        self.directory = os.path.abspath(directory)
        self.preserve = tuple(sorted(set(int(s) for s in preserve)))
        kept = cm.AnyPreservationPolicy([cm.LatestN(keep), cm.CustomSteps(self.preserve)])
        options = ocp.CheckpointManagerOptions(preservation_policy=kept, enable_async_checkpointing=async_save,
                                               create=True)
        handlers = {name: ocp.StandardCheckpointHandler() for name in ("params", "opt_state", "tree")}
        handlers["meta"] = ocp.JsonCheckpointHandler()
        self.manager = ocp.CheckpointManager(self.directory, options=options, item_handlers=handlers)

    def latest_step(self) -> Optional[int]:
        return self.manager.latest_step()

    def steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def set_aside(self, step: int, why: str) -> str:
        """Rename step's folder to '<step>.<why>' (kept, never deleted), so later saves of
        lower steps are not refused behind it; returns the new path."""
        src = os.path.join(self.directory, str(step))
        dst, n = f"{src}.{why}", 1
        while os.path.exists(dst):
            n += 1
            dst = f"{src}.{why}{n}"
        os.rename(src, dst)
        self.manager.reload()
        return dst

    def restore_readable(self, params, opt_state=None, tree=None, step: Optional[int] = None) -> dict:
        """restore(step) when a step is named (later steps are set aside as '.superseded', so
        the run continues from it); else the newest step that can be read: an unreadable one
        is set aside as '.unreadable' with one warning line, and the next older is tried. A
        checkpoint that does not match the config is an error either way."""
        if step is not None:
            if step not in self.steps():
                raise FileNotFoundError(f"checkpoint.step={step}: {self.directory} holds steps {self.steps()}")
            out = self.restore(params, opt_state, tree, step=step)
            for later in [s for s in self.steps() if s > step]:
                log.warning("checkpoint step %d set aside as %s (resuming from the named step %d)",
                            later, self.set_aside(later, "superseded"), step)
            return out
        for s in reversed(self.steps()):
            try:
                return self.restore(params, opt_state, tree, step=s)
            except CheckpointMismatch as e:
                if not e.corrupt:
                    raise
                log.warning("checkpoint step %d skipped: %s; kept as %s", s, str(e).split(": cannot be read (")[-1]
                            .split("); the checkpoint")[0], self.set_aside(s, "unreadable"))
        raise FileNotFoundError(f"{self.directory}: no readable checkpoint (every step was set aside as "
                                "'.unreadable'); start a new run directory")

    def save(self, step: int, params, opt_state, tree, meta: dict) -> None:
        args = ocp.args.Composite(params=ocp.args.StandardSave(to_saveable(params)),
                                  opt_state=ocp.args.StandardSave(opt_state),
                                  tree=ocp.args.StandardSave(tree),
                                  meta=ocp.args.JsonSave(meta))
        self.manager.save(step, args=args)

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()

    def _check(self, step: int, name: str, target) -> None:
        saved = self.manager.item_metadata(step)[name]
        want, have = _shapes(target), _shapes(saved)
        same_keys = set(want) == set(have)
        if (same_keys and want != have) or (not same_keys and sorted(want.values()) != sorted(have.values())):
            missing = sorted(set(want) - set(have))[:3]
            extra = sorted(set(have) - set(want))[:3]
            shape = [f"{k}: checkpoint {have[k]} vs model {want[k]}" for k in want if k in have and have[k] != want[k]][:3]
            raise CheckpointMismatch(
                f"{self.directory} step {step}: '{name}' does not match this config "
                f"(missing {missing}, unexpected {extra}, shapes {shape}); restore with the "
                "config the run was trained with, or start a new run directory")

    def restore(self, params, opt_state=None, tree=None, step: Optional[int] = None) -> dict:
        """Restore into the structures of `params` (and opt_state / tree when given)."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"{self.directory}: no checkpoint to restore")
        items = {"params": to_saveable(params)}
        if opt_state is not None:
            items["opt_state"] = opt_state
        if tree is not None:
            items["tree"] = tree
        try:
            for name, target in items.items():
                self._check(step, name, target)
            args = {name: ocp.args.StandardRestore(_abstract(target)) for name, target in items.items()}
            out = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore(), **args))
        except CheckpointMismatch:
            raise
        except Exception as e:  # truncated / corrupt files
            earlier = [s for s in self.steps() if s < step]
            advice = (f"restore an earlier step (--config.checkpoint.step={earlier[-1]}; saved: {earlier})"
                      if earlier else "no earlier step is saved")
            raise CheckpointMismatch(f"{self.directory} step {step}: cannot be read ({_short(e)}); the checkpoint "
                                     f"is incomplete or corrupt: {advice}, or start a new run directory",
                                     corrupt=True) from None
        controller = params["controller"]
        restored_ctrl = jax.tree.map(lambda x: x, controller)
        nnx.replace_by_pure_dict(restored_ctrl, out["params"]["controller"])
        result = {"step": step, "meta": dict(out["meta"]),
                  "params": {"controller": restored_ctrl, "lora": out["params"]["lora"]}}
        if opt_state is not None:
            result["opt_state"] = out["opt_state"]
        if tree is not None:
            result["tree"] = out["tree"]
        return result


def restore_policy(directory: str, policy, step: Optional[int] = None) -> int:
    """Load a training run's controller params, persistent tree and query space into an ActiveMem
    policy of the same config (LoRA, when the run had it, is merged into the engine)."""
    from activemem_jax.activemem.lora import merge_lora

    ckpt = Checkpoints(directory, async_save=False)
    try:
        step = ckpt.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"{directory}: no checkpoint to restore")
        meta = ckpt.manager.item_metadata(step)
        lora_shape = meta["params"]["lora"] if "lora" in meta["params"] else {}
        lora = jax.tree.map(lambda m: np.zeros(m.shape, m.dtype), dict(lora_shape)) if lora_shape else {}
        out = ckpt.restore({"controller": policy.params, "lora": lora}, tree=policy.memory_state, step=step)
    finally:
        ckpt.close()
    policy.params = out["params"]["controller"]
    policy.memory_state = out["tree"]
    if out["params"]["lora"]:
        alpha = float(out["meta"].get("lora_alpha", 16.0))
        policy.engine.set_weights(merge_lora(policy.model.state, out["params"]["lora"], alpha))
    return out["step"]


def jsonable(state):
    """A data-iterator state as JSON (grain iterator states may hold bytes)."""
    if isinstance(state, bytes):
        return {"__bytes__": state.hex()}
    if isinstance(state, dict):
        return {k: jsonable(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return [jsonable(v) for v in state]
    if isinstance(state, (np.integer,)):
        return int(state)
    return state


def from_jsonable(state):
    """The inverse of `jsonable`."""
    if isinstance(state, dict):
        if set(state) == {"__bytes__"}:
            return bytes.fromhex(state["__bytes__"])
        return {k: from_jsonable(v) for k, v in state.items()}
    if isinstance(state, list):
        return [from_jsonable(v) for v in state]
    return state


__all__ = ["CheckpointMismatch", "Checkpoints", "from_jsonable", "jsonable", "restore_policy", "to_saveable"]
