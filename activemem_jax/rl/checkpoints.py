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

    out = read_init("runs/a", params, backbone=backbone_record(path, model.config))
    # checkpoint.init_from: another run's controller (and LoRA) params, read only
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


def _mismatch(want: dict, have: dict) -> str:
    """'' when the saved shapes `have` fit `want` ({'a/b': shape}, `_shapes`); else what
    differs: missing and unexpected paths, and each path whose shapes differ, with both."""
    same_keys = set(want) == set(have)
    if (same_keys and want == have) or (not same_keys and sorted(want.values()) == sorted(have.values())):
        return ""
    missing = sorted(set(want) - set(have))[:3]
    extra = sorted(set(have) - set(want))[:3]
    shape = [f"{k}: checkpoint {have[k]} vs model {want[k]}" for k in want if k in have and have[k] != want[k]][:3]
    return f"missing {missing}, unexpected {extra}, shapes {shape}"


class _ReadOnlyNotice(logging.Filter):
    def filter(self, record) -> bool:
        return "is read only" not in record.getMessage()


class Checkpoints:
    def __init__(self, directory: str, keep: int = 3, async_save: bool = True, preserve=(),
                 read_only: bool = False):
        """read_only: nothing is created, saved, deleted or set aside in `directory`
        (checkpoint.init_from reads another run's checkpoints this way)."""
        from orbax.checkpoint import checkpoint_managers as cm

        self.directory = os.path.abspath(directory)
        self.read_only = read_only
        self.preserve = tuple(sorted(set(int(s) for s in preserve)))
        kept = cm.AnyPreservationPolicy([cm.LatestN(keep), cm.CustomSteps(self.preserve)])
        options = ocp.CheckpointManagerOptions(preservation_policy=kept, enable_async_checkpointing=async_save,
                                               create=not read_only, read_only=read_only,
                                               **({"save_interval_steps": 0} if read_only else {}))
        handlers = {name: ocp.StandardCheckpointHandler() for name in ("params", "opt_state", "tree")}
        handlers["meta"] = ocp.JsonCheckpointHandler()
        quiet = _ReadOnlyNotice()  # orbax warns that a read-only directory is read only
        logging.getLogger("absl").addFilter(quiet)
        try:
            self.manager = ocp.CheckpointManager(self.directory, options=options, item_handlers=handlers)
        finally:
            logging.getLogger("absl").removeFilter(quiet)

    def latest_step(self) -> Optional[int]:
        return self.manager.latest_step()

    def steps(self) -> list[int]:
        return sorted(self.manager.all_steps())

    def set_aside(self, step: int, why: str) -> str:
        """Rename step's folder to '<step>.<why>' (kept, never deleted), so later saves of
        lower steps are not refused behind it; returns the new path."""
        if self.read_only:
            raise PermissionError(f"{self.directory} is opened read only: step {step} is not set aside")
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
        differs = _mismatch(_shapes(target), _shapes(saved))
        if differs:
            raise CheckpointMismatch(
                f"{self.directory} step {step}: '{name}' does not match this config "
                f"({differs}); restore with the config the run was trained with, or start a new run directory")

    def read_meta(self, step: int) -> dict:
        """A step's meta item alone (no arrays read)."""
        return dict(self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"])

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


BACKBONE_FIELDS = ("path", "model_type", "hidden_size", "num_layers", "vocab_size")


def backbone_record(path: str, config) -> dict:
    """What a checkpoint's meta records about the frozen model it was trained over (meta
    "backbone"): model.path (resolved when it is a local file or folder; "" when the model
    was passed in and the config names none is left out) and the architecture's sizes."""
    out = {"path": os.path.realpath(path) if path and os.path.exists(path) else path}
    out.update({k: getattr(config, k) for k in BACKBONE_FIELDS[1:] if hasattr(config, k)})
    return {k: v for k, v in out.items() if v not in ("", None)}


def backbone_mismatch(saved: dict, current: dict) -> str:
    """'' when two backbone records agree on every field both hold; else the fields that
    differ, each with both values."""
    return ", ".join(f"model.{k}: checkpoint {saved[k]!r} vs this run {current[k]!r}" for k in BACKBONE_FIELDS
                     if k in saved and k in current and saved[k] != current[k])


def checkpoint_folder(path: str) -> str:
    """A run directory's checkpoints folder, or `path` itself when it is one."""
    inner = os.path.join(path, "checkpoints")
    return inner if os.path.isdir(inner) else path


def read_init(source: str, params: dict, step: int = 0, backbone: Optional[dict] = None) -> dict:
    """checkpoint.init_from: another run's controller params (and its LoRA adapters when
    this run has LoRA) in the structure of `params` ({"controller", "lora"}), read only:
    nothing in `source` is created, renamed or written. step 0: the newest step that can be
    read (an unreadable one is skipped with a warning, not set aside).

    Refuses, in one line each: no directory or no readable checkpoint there; a checkpoint
    whose meta records another backbone than `backbone` (`backbone_record`; compared on
    the fields both record); a checkpoint whose controller (or LoRA) shapes differ from
    `params` (the path and both shapes); a checkpoint with LoRA adapters into a run
    without LoRA (its controller learned over the adapted backbone). A run with LoRA from
    a checkpoint without it keeps its fresh adapters (result "lora_taken" False).
    Returns {"step", "directory", "meta", "params", "lora_taken"}."""
    where = f"checkpoint.init_from={source!r}"
    if not os.path.isdir(source):
        raise FileNotFoundError(f"{where}: no such directory (give a run directory or its checkpoints folder)")
    directory = checkpoint_folder(source)
    ckpt = Checkpoints(directory, async_save=False, read_only=True)
    try:
        steps = ckpt.steps()
        if not steps:
            raise FileNotFoundError(f"{where}: {directory} holds no checkpoint (give a run directory with "
                                    "saved steps, or its checkpoints folder)")
        if step and step not in steps:
            raise FileNotFoundError(f"checkpoint.init_step={step}: {directory} holds steps {steps}")
        problems = []
        for s in [step] if step else reversed(steps):
            try:
                try:
                    meta = ckpt.read_meta(s)
                    saved = ckpt.manager.item_metadata(s)["params"]
                except Exception as e:  # truncated / corrupt files
                    raise CheckpointMismatch(_short(e), corrupt=True) from None
                return _take_init(ckpt, s, meta, saved, params, backbone or {}, where)
            except CheckpointMismatch as e:
                if not e.corrupt:
                    raise
                problems.append(f"step {s}: {str(e)[:200]}")
                if not step:
                    log.warning("%s: step %d cannot be read; trying an older one", where, s)
        raise FileNotFoundError(f"{where}: no readable checkpoint in {directory} ({'; '.join(problems)})")
    finally:
        ckpt.close()


def _take_init(ckpt: "Checkpoints", step: int, meta: dict, saved, params: dict, backbone: dict, where: str) -> dict:
    """read_init's checks and restore of one readable step."""
    differs = backbone_mismatch(meta.get("backbone", {}), backbone)
    if differs:
        raise CheckpointMismatch(f"{where}: step {step} was trained over another backbone ({differs}); a "
                                 "controller reads and writes one model's hidden states: start from a run of "
                                 "this model, or train from scratch")
    saved_lora = dict(saved["lora"]) if "lora" in saved else {}
    if saved_lora and not params["lora"]:
        raise CheckpointMismatch(f"{where}: step {step} holds LoRA adapters (its controller learned over the "
                                 "adapted backbone) and this run has lora.rank=0: set lora.rank and lora.targets "
                                 "to the source run's")
    take_lora = bool(saved_lora and params["lora"])
    target = {"controller": params["controller"], "lora": params["lora"] if take_lora else {}}
    differs = _mismatch(_shapes(to_saveable(target)), _shapes(saved))
    if differs:
        raise CheckpointMismatch(f"{where}: step {step}'s parameters do not fit this run ({differs}); give the "
                                 "policy (and lora) sections the source run trained with")
    out = ckpt.restore(target, step=step)
    lora = out["params"]["lora"] if take_lora else params["lora"]
    return {"step": step, "directory": ckpt.directory, "meta": out["meta"], "lora_taken": take_lora,
            "params": {"controller": out["params"]["controller"], "lora": lora}}


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


__all__ = ["BACKBONE_FIELDS", "CheckpointMismatch", "Checkpoints", "backbone_mismatch", "backbone_record",
           "checkpoint_folder", "from_jsonable", "jsonable", "read_init", "restore_policy", "to_saveable"]
