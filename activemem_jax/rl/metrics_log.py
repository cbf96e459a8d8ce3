"""Training metrics: JSONL (always), TensorBoard event files (tensorboardX), and a rich
progress bar on a terminal (plain log lines otherwise)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys

log = logging.getLogger(__name__)
SHOWN = ("reward_mean", "em", "loss", "kl", "clip_frac", "entropy", "grad_norm", "tree_path_share", "tree_path_len",
         "tree_inserts", "tree_updates", "tree_pruned", "tree_merged", "tree_size", "tree_depth", "grad_shared",
         "grad_latent", "grad_tree", "grad_insert", "grad_gate", "grad_update", "grad_key", "key_loss", "search_loss",
         "search_logp", "adv_node", "adv_turn", "adv_write", "tree_kl", "time_rollout", "time_reference", "time_update",
         "time_step")


class MetricsLog:
    def __init__(self, out_dir: str, tensorboard: bool = True, resume_step: int = 0, enabled: bool = True):
        """resume_step: lines of steps after it (written by a run that died before its
        next checkpoint, and about to be redone) are dropped. enabled=False (hosts other
        than the first): nothing is written."""
        self.enabled = enabled
        self._tb = None
        if not enabled:
            return
        os.makedirs(out_dir, exist_ok=True)
        self.path = os.path.join(out_dir, "metrics.jsonl")
        if os.path.exists(self.path):
            with open(self.path) as f:
                kept = [line for line in f if _step_of(line) is not None and _step_of(line) <= resume_step]
            with open(self.path, "w") as f:
                f.writelines(kept)
        self._file = open(self.path, "a")
        self._tb = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            self._tb = SummaryWriter(os.path.join(out_dir, "tensorboard"))

    def write(self, metrics: dict) -> None:
        if not self.enabled:
            return
        self._file.write(json.dumps({k: _plain(v) for k, v in metrics.items()}) + "\n")
        self._file.flush()
        if self._tb is not None:
            step = int(metrics["step"])
            for k, v in metrics.items():
                if k != "step" and isinstance(_plain(v), (int, float)):
                    self._tb.add_scalar(f"train/{k}", float(v), step)
            self._tb.flush()

    @contextlib.contextmanager
    def progress(self, total: int, start: int = 0):
        def line(m):
            text = "  ".join(f"{k} {m[k]:.4g}" for k in SHOWN if k in m)
            if m.get("tree_turns") and not m.get("tree_path_share") and m.get("use_tree", True):
                text += "  [no turn retrieved a path: the memory is not read]"
            if m.get("tree_turns_log_full"):
                text += f"  [{m['tree_turns_log_full']} turns could not write: op log full, raise policy.max_ops]"
            return (f"{m['algo']}  " if "algo" in m else "") + text

        if not self.enabled:
            yield lambda m: None
            return
        if not sys.stderr.isatty():
            yield lambda m: log.info("step %d/%d  %s", m["step"], total, line(m))
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      TextColumn("{task.description}")) as bar:
            task = bar.add_task("", total=total, completed=start)
            yield lambda m: bar.update(task, completed=m["step"], description=line(m))

    def close(self) -> None:
        if not self.enabled:
            return
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def _step_of(line: str):
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None


def _plain(v):
    try:
        return v.item()
    except AttributeError:
        return v
