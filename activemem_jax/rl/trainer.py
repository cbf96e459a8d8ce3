"""The ActiveMem trainer: rollout -> rewards -> advantages -> PPO-style epochs (GRPO), or
expert trajectories -> cross-entropy (SFT). Config-driven (see configs/activemem_*.py).

    trainer = Trainer(cfg)            # loads the backbone, engine, policy; resumes if it can
    trainer.train()                   # cfg.train.steps steps, checkpoints, metrics
    trainer.close()

Everything heavy is jitted: the rollout's controller step, the engine's prefill/decode,
the update (`rl.update.TrainStep`). Rows (one per agent turn) are cut into mini-batches
of `train.mini_batch_rows` rows (the last one padded to a power of two) of a
power-of-two length, and the columns before the first latent run forward only
(rl/rows.py, docs/training_speed.md), so compiles are few and the backward is short.
Resuming restores params, optimizer state, tree, data iterator and step; rollout seeds
depend on (seed, step) only, so a resumed run repeats an uninterrupted one.

A fresh run (no checkpoint of its own in out_dir) with `checkpoint.init_from` starts from
another run's controller (and LoRA) params, read only (`_init_from`); a run with its own
checkpoints resumes them and ignores init_from.

This file holds the loop; the tasks come from activemem_jax/tasks/ (`data.name`), the padded rows
and mini-batches from rl/rows.py, and the multi-host plumbing from rl/hosts.py.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from activemem_jax import build, schema
from activemem_jax.activemem import init_lora, merge_lora, repeat_tasks
from activemem_jax.data.streams import join_episodes
from activemem_jax.rl import grpo, preemption, rows
from activemem_jax.rl.checkpoints import Checkpoints, backbone_record, from_jsonable, jsonable, read_init
from activemem_jax.rl.hosts import Hosts
from activemem_jax.shapes import batch_rows
from activemem_jax.rl.metrics_log import MetricsLog
from activemem_jax.build import step_lr_factor
from activemem_jax.rl.update import TrainStep

log = logging.getLogger(__name__)


# metrics a tree-only update (unscored rows, no backbone pass) reports meaningfully
TREE_METRICS = ("tree_loss", "tree_acc", "tree_kl", "grad_norm", "skipped", "grad_shared", "grad_tree", "grad_insert",
                "grad_gate", "grad_update", "key_loss", "key_acc", "grad_key", "search_loss", "search_logp")


class Trainer:
    def __init__(self, cfg, *, model=None, engine=None):
        """cfg: a run config (checked by `schema.load`: a ConfigError names a bad field) or a
        checked `schema.Run`; model / engine: ones already built. Its parts come from one
        call (`build.training`); this class keeps the loop."""
        from activemem_jax.data.loaders import grain_dataset
        from activemem_jax.data.streams import StreamOrder, is_streamed

        parts = build.training(cfg, backbone=model, engine_=engine)
        self.cfg = cfg
        self.run = run = parts.run  # every field checked (types, ranges, contradictions), one error naming it
        t = run.train
        self.model = parts.model  # the training backbone, sharded over the global mesh
        self.mesh = self.model.mesh
        self.hosts = Hosts(self.mesh)
        self.gen_model = parts.gen_model  # each host's copy for rollouts (the same with one process)
        self._own_engine = parts.own_engine
        self.engine = parts.engine
        self.policy = parts.policy
        self.tasks, self.make_env, self.search = parts.task_set.tasks, parts.task_set.make_env, parts.task_set.search
        self.streamed = is_streamed(self.tasks)  # episodes of streams (envs/dossier.py): in order
        if not self.streamed and len(self.tasks) < t.prompts_per_step:
            raise schema.ConfigError(f"train.prompts_per_step={t.prompts_per_step}: the data section gives "
                                     f"{len(self.tasks)} training tasks; lower it or raise data.n_tasks")
        if self.streamed:
            self.data = StreamOrder(self.tasks, t.prompts_per_step, seed=run.seed, process_index=self.hosts.index,
                                    process_count=self.hosts.count)
        else:
            self.data = iter(grain_dataset(self.tasks, t.prompts_per_step, seed=run.seed, shuffle=True,
                                           process_index=self.hosts.index, process_count=self.hosts.count,
                                           drop_remainder=True).repeat().to_iter_dataset())
        self._check_span(t)
        lora = {}
        if run.lora.rank:
            lora = init_lora(self.model.state, run.lora.rank, tuple(run.lora.targets), jax.random.PRNGKey(run.seed))
        self.params = self.hosts.replicate({"controller": self.policy.params, "lora": lora})
        self.ref_params = self.hosts.replicate(self.params)  # phi_0 (and zero LoRA): the reference
        self.tree_ref = None  # train.tree_kl: the params GRPO started from (`_tree_reference`)
        self.optimizer = parts.optimizer
        self.opt_state = self.hosts.replicate(self.optimizer.init(self.params))
        self.loss_cfg = parts.loss
        # GRPO's own rate scales the optimizer's updates (Adam: the same as its lr), so SFT and
        # GRPO share one optimizer state
        self.grpo_scale = parts.grpo_scale
        self.decay_steps = parts.decay_steps
        self._updates: dict = {}
        self.update = self._update_fn(t.algo, False)
        self.sft_steps = t.sft_steps if t.algo == "grpo" else 0  # SFT warm start, then GRPO
        self.step = 0
        self.ckpt = self._checkpoints(os.path.join(run.out_dir, "checkpoints"))
        c = run.checkpoint
        if self.ckpt.steps() and not c.resume:
            if not c.overwrite:
                raise schema.ConfigError(
                    f"checkpoint.resume=False, but {run.out_dir} holds a run (checkpoint steps {self.ckpt.steps()}): "
                    "resume it (checkpoint.resume=True), give a new --config.out_dir, or set "
                    "--config.checkpoint.overwrite=True to set it aside")
            self._set_aside_run()
        self.init_from: Optional[dict] = None  # checkpoint.init_from's {"path", "step"} when this run began there
        if c.resume and self.ckpt.steps():
            if c.init_from:
                log.info("checkpoint.init_from=%r ignored: %s holds this run's own checkpoints (steps %s); resuming "
                         "them", c.init_from, self.ckpt.directory, self.ckpt.steps())
            self._restore(c.step or None)
        elif c.step:
            raise schema.ConfigError(f"checkpoint.step={c.step}: {self.ckpt.directory} holds no checkpoint to restore")
        elif c.init_from:
            self._init_from(c.init_from, c.init_step)
        self.metrics = MetricsLog(run.out_dir, tensorboard=run.log.tensorboard, resume_step=self.step,
                                 enabled=jax.process_index() == 0)
        self._sync_policy()

    # ------------------------------------------------------------------ state
    def _sync_policy(self):
        self.policy.params = self.hosts.local(self.params["controller"])
        if self.params["lora"]:
            lora = self.hosts.local(self.params["lora"])
            self.engine.set_weights(merge_lora(self.gen_model.state, lora, self.run.lora.alpha))

    def _meta(self) -> dict:
        return {"step": self.step, "data": jsonable(self.data.get_state()), "seed": self.run.seed,
                "lora_alpha": float(self.run.lora.alpha), "algo": self.run.train.algo,
                "backbone": self.backbone(), **({"init_from": self.init_from} if self.init_from else {})}

    def backbone(self) -> dict:
        """What this run's checkpoints record about its frozen model (`backbone_record`)."""
        return backbone_record(self.run.model.path, self.model.config)

    def save(self):
        memory = jax.tree.map(np.asarray, self.policy.memory_state)  # host arrays: the same on every host
        self.ckpt.save(self.step, self.params, self.opt_state, memory, self._meta())

    def _set_aside_run(self):
        """checkpoint.overwrite: the old run's checkpoints and metrics are renamed (kept)."""
        n = 1
        while os.path.exists(f"{self.ckpt.directory}.replaced{n}"):
            n += 1
        self.ckpt.close()
        os.rename(self.ckpt.directory, f"{self.ckpt.directory}.replaced{n}")
        metrics = os.path.join(self.run.out_dir, "metrics.jsonl")
        if os.path.exists(metrics):
            os.rename(metrics, f"{metrics}.replaced{n}")
        log.warning("checkpoint.overwrite: the run in %s was set aside as checkpoints.replaced%d", self.run.out_dir, n)
        self.ckpt = self._checkpoints(self.ckpt.directory)

    def _checkpoints(self, directory: str) -> Checkpoints:
        """The run's checkpoints: the newest checkpoint.keep, and for good the SFT warm start's
        end (step train.sft_steps: the "SFT only" row, and train.tree_kl's reference on a resume)."""
        c = self.run.checkpoint
        sft_end = (self.sft_steps,) if 0 < self.sft_steps < self.run.train.steps else ()
        return Checkpoints(directory, keep=c.keep, async_save=c.async_save, preserve=sft_end)

    def _restore(self, step: Optional[int] = None):
        out = self.ckpt.restore_readable(self.params, self.opt_state,
                                         jax.tree.map(np.asarray, self.policy.memory_state), step=step)
        self.params = self.hosts.replicate(out["params"])
        self.opt_state = self.hosts.replicate(out["opt_state"])
        self.policy.memory_state = out["tree"]
        self.step = int(out["meta"]["step"])
        self.data.set_state(from_jsonable(out["meta"]["data"]))
        log.info("resumed from %s at step %d", self.ckpt.directory, self.step)

    def _init_from(self, source: str, step: int = 0):
        """checkpoint.init_from: the controller params (and the LoRA adapters, when both runs
        have LoRA) of `source`'s checkpoint at `step` (0: its newest readable one), read
        only, after the checks of `read_init` (the backbone it records, the shapes). They
        are also this run's reference (train.beta's KL to phi_0: where this run began).
        Fresh, as in any new run: the optimizer state (Adam's moments belong to the source's
        data, and the warm-up and decay schedules count this run's steps), the step counter
        (train.steps and train.sft_steps are this run's own), the data order (another data
        section), and the memory tree (it holds the source's episodes; a run's evaluation
        then measures what its controller learned, not what an earlier run stored)."""
        out = read_init(source, self.params, step, backbone=self.backbone())
        self.params = self.hosts.replicate(out["params"])
        self.ref_params = self.hosts.replicate(out["params"])
        self.opt_state = self.hosts.replicate(self.optimizer.init(self.params))
        self.init_from = {"path": os.path.abspath(source), "step": out["step"]}
        taken = "controller and LoRA" if out["lora_taken"] else "controller"
        fresh = "; LoRA starts fresh (the checkpoint has none)" if self.run.lora.rank and not out["lora_taken"] else ""
        log.info("%s from %s step %d (checkpoint.init_from); optimizer, step and tree start fresh%s",
                 taken, out["directory"], out["step"], fresh)

    def _tree_reference(self):
        """train.tree_kl's reference: the params at the first GRPO step (the SFT warm
        start's end), kept from that step on; a run resumed past it reads them from the
        checkpoint of step train.sft_steps, and says so if that checkpoint is gone."""
        if self.tree_ref is None:
            if self.step == self.sft_steps:
                self.tree_ref = jax.tree.map(jnp.copy, self.params)  # the update donates self.params
            elif self.sft_steps in self.ckpt.steps():
                self.tree_ref = self.hosts.replicate(self.ckpt.restore(self.params, step=self.sft_steps)["params"])
            else:
                raise schema.ConfigError(
                    f"train.tree_kl={self.run.train.tree_kl}: resuming at step {self.step} needs the head GRPO "
                    f"started from, the checkpoint of step train.sft_steps={self.sft_steps}, and "
                    f"{self.ckpt.directory} holds {self.ckpt.steps()}: restore that checkpoint there, or set "
                    "train.tree_kl=0")
        return self.tree_ref

    # ------------------------------------------------------------------ one step
    def _rows(self, result, adv_rows, tree_adv_rows, extra=None) -> dict:
        """This host's rows of a rollout, padded (rl/rows.py)."""
        c = self.policy.config
        return rows.pad_rows(result, adv_rows, tree_adv_rows, extra, k=c.num_latents,
                             budget=c.max_tokens if self.algo == "grpo" else 0, path_len=c.max_depth,
                             mini_batch_rows=self.run.train.mini_batch_rows, hosts=self.hosts,
                             frozen=not self.run.lora.rank, micro_batch_rows=self.run.train.micro_batch_rows)

    @staticmethod
    def _key_rows(result) -> dict:
        """key_q [K, d] / key_id [K] of the step's observations (K a power of two, id -1
        for padding and for observations the environment names nothing)."""
        steps = [s for tr in result.trajectories for s in tr.steps]
        names: dict = {}
        ids = [names.setdefault(s.obs_key, len(names)) if s.obs_key else -1 for s in steps]
        k = batch_rows(len(steps))
        q = np.zeros((k, steps[0].q.shape[-1]), np.float32)
        q[:len(steps)] = np.stack([s.q for s in steps])
        key_id = np.full((k,), -1, np.int32)
        key_id[:len(steps)] = ids
        return {"key_q": jax.numpy.asarray(q), "key_id": jax.numpy.asarray(key_id)}

    def _chunks(self, batch: dict) -> list[tuple[dict, bool]]:
        """(chunk, tree_only) per mini-batch."""
        return rows.chunks(batch, self.run.train.mini_batch_rows, self.hosts)

    def lr_scale(self, algo: str, step: int) -> float:
        """What multiplies the optimizer's updates at training step `step`: GRPO with its own
        rate (optim.lr_grpo) runs at that rate; otherwise the decay schedule
        (`step_lr_factor`, 1 without optim.decay_steps)."""
        if algo == "grpo" and self.grpo_scale != 1.0:
            return self.grpo_scale
        return step_lr_factor(self.decay_steps, self.run.optim.final_lr_ratio, step)

    def _update_fn(self, algo: str, tree_only: bool) -> TrainStep:
        """The jitted update for (algo, tree_only), built on first use."""
        key = (algo, tree_only)
        if key not in self._updates:
            cfg = dataclasses.replace(self.loss_cfg, algo=algo, tree_only=tree_only)
            self._updates[key] = TrainStep(self.model.graphdef, self.policy.graphdef, cfg, self.optimizer)
        return self._updates[key]

    @property
    def algo(self) -> str:
        """This step's algorithm: SFT for the first train.sft_steps steps, then train.algo."""
        return "sft" if self.step < self.sft_steps else self.run.train.algo

    def _check_span(self, t) -> None:
        """train.grpo_span > 1 joins consecutive episodes of a stream (`join_episodes`): the
        span must tile each stream from its first episode, SFT's one episode a step included."""
        span = t.grpo_span
        if span == 1 or t.algo != "grpo" or t.steps <= t.sft_steps:
            return
        if not self.streamed:
            raise schema.ConfigError(f"train.grpo_span={span} joins a stream's episodes; data.name="
                                     f"{self.run.data.name!r} has no streams: set train.grpo_span=1")
        if self.data.episodes % span or t.sft_steps % span:
            raise schema.ConfigError(
                f"train.grpo_span={span} must divide the streams' {self.data.episodes} episodes and "
                f"train.sft_steps={t.sft_steps} (each SFT step runs one episode), so a span starts at a stream's "
                "first episode")

    def rollout(self):
        t = self.run.train
        tasks = next(self.data)
        span = self.run.train.grpo_span if self.algo == "grpo" and self.streamed else 1
        if span > 1:  # one rollout runs `span` consecutive episodes of each stream
            tasks = join_episodes([tasks] + [next(self.data) for _ in range(span - 1)])
        if self.algo == "sft" and not self.streamed:  # expert turns are deterministic: G batches of
            for _ in range(t.group_size - 1):                # distinct prompts, not G copies (a stream's
                                                             # next episodes must wait for this one)
                tasks = list(tasks) + list(next(self.data))
            group = list(tasks)
        elif self.algo == "sft":  # a stream's expert episode is deterministic: one copy each
            group = list(tasks)
        else:
            group = repeat_tasks(tasks, t.group_size)
        base = (self.step * self.hosts.count + self.hosts.index) * len(group)
        uids = [base + i for i in range(len(group))]
        env = self.make_env()
        if span > 1 and getattr(env, "max_turns", None):  # data.max_turns bounds one episode
            env.max_turns *= span
        self.engine.clear_prefix_cache()
        if self.algo == "sft":
            return self._expert_rollout(env, group, uids), group
        result = self.policy.rollout(env, group, seed=self.run.seed, uids=uids, commit=self.hosts.count == 1,
                                     temperature=self.policy.config.temperature, group_size=t.group_size)
        if self.hosts.count > 1:
            result = self.policy.commit(result, gather=self.hosts.gather_commit)
        return result, group

    def _expert_rollout(self, env, group, uids):
        from activemem_jax.data.oracle import expert_actions

        oracle = self.search is not None and all("hops" in t for t in group)  # the synthetic world's
        if hasattr(env, "expert") and not oracle:  # the environment knows its right replies (recall,
            # dossier, code's canonical solutions, QA files' gold answers, math's worked solutions)
            writes = None
            if self.run.train.sft_tree == "expert":
                writes = getattr(env, "expert_write", None)
                if writes is None:
                    raise schema.ConfigError(f"train.sft_tree='expert': data.name={self.run.data.name!r} has no "
                                             "expert writes (env.expert_write); use sft_tree='rule'")
            result = self.policy.rollout(env, group, seed=self.run.seed, uids=uids, tree_rule=True,
                                         commit=self.hosts.count == 1, responder=env.expert, tree_expert=writes)
            return self.policy.commit(result, gather=self.hosts.gather_commit) if self.hosts.count > 1 else result
        if not oracle:
            raise schema.ConfigError(f"train.sft_steps={self.sft_steps}: SFT needs expert turns, and data.name="
                                     f"{self.run.data.name!r} has neither an environment expert nor an oracle "
                                     "solver; set train.sft_steps=0 (the families with one: synthetic, recall, "
                                     "dossier, the QA files, gsm8k / math without delimiter steps, the code families)")
        k = self.run.data.retrieval_topk
        scripts = [expert_actions(task, lambda q, n: self.search.search(q, n), k) for task in group]
        result = self.policy.rollout(env, group, seed=self.run.seed, uids=uids, tree_rule=True,
                                     commit=self.hosts.count == 1,
                                     responder=lambda i, turn: scripts[i][min(turn, len(scripts[i]) - 1)])
        return self.policy.commit(result, gather=self.hosts.gather_commit) if self.hosts.count > 1 else result

    def _grpo_advantages(self, result, rewards: np.ndarray, episode: np.ndarray) -> tuple:
        """GRPO's advantages: (per row for the token and latent loss, per row for the tree
        term, {"node", "turn", "write"}: the mean size of what each credit option changed).

        A_{i,t} for both losses (docs/design_training.md#hierarchical-advantage), node credit keyed by
        identity (streams.credit_ids: snapshot slots, then one id per writing turn); with
        train.credit "turn" a scored turn's tokens and search take their own turn's group
        advantage; with train.write_credit "to_go" a write is credited with the answers
        after it, plus the node term. train.advantage "reinforce" / "reinforce_pp" swap A_i
        for the batch-baseline advantage (rl/grpo.py: batch_advantages), the node term kept."""
        t = self.run.train
        trajs = result.trajectories
        paths = np.stack([s.credit_path for tr in trajs for s in tr.steps]).astype(np.int32)
        ids = self.policy.config.capacity + max(len(tr.steps) for tr in trajs)
        tree_adv = np.asarray(grpo.hierarchical_advantages(rewards, t.group_size, episode, paths, ids,
                                                           t.lambda_h, t.adv_eps))
        base = np.asarray(grpo.group_advantages(rewards, t.group_size, t.adv_eps))[episode]
        if t.advantage != "grpo":  # REINFORCE(++): the batch baseline's A_i, the node term on top
            batch = np.asarray(grpo.episode_advantages(rewards, t.advantage, t.group_size, t.adv_eps))[episode]
            tree_adv = (tree_adv - base + batch).astype(np.float32)
            base = batch
        adv_rows = tree_adv
        steps = [s for tr in trajs for s in tr.steps]
        turn = np.asarray([j for tr in trajs for j in range(len(tr.steps))], np.int32)
        scored = np.asarray([s.scored for s in steps], bool)
        step_rewards = np.asarray([s.reward for s in steps], np.float32)
        by_turn = dict(episode=episode, turn=turn, scored=scored, num_episodes=len(trajs),
                       group_size=t.group_size, eps=t.adv_eps, num_turns=int(turn.max()) + 1)
        if t.credit == "turn":  # a scored turn's answer (and its search) by its own reward in the group
            per_turn = np.asarray(grpo.turn_advantages(step_rewards, **by_turn))
            adv_rows = np.where(scored, per_turn, tree_adv).astype(np.float32)
        # what per-question credit changed: mean |A_turn - A_{i,t}| over the rows (0 with "episode")
        turn_term = float(np.mean(np.abs(adv_rows - tree_adv)))
        # the node term's size: |A_{i,t} - A_i| (0 where no turn read a node the group shares)
        node_term = float(np.mean(np.abs(tree_adv - base)))
        write_term = 0.0
        if t.write_credit == "to_go":  # a write by the answers after it, and the node term
            to_go = (np.asarray(grpo.to_go_advantages(step_rewards, **by_turn)) + tree_adv - base)
            write_term = float(np.mean(np.abs(to_go - tree_adv)))  # what it changed: mean |change|
            tree_adv = to_go.astype(np.float32)
        return adv_rows, tree_adv, {"node": node_term, "turn": turn_term, "write": write_term}

    def _sft_targets(self, result) -> dict:
        """SFT's tree-head targets: the writes SFT acted by, or with train.sft_head="rule" the
        threshold rule on the same states (the expert's writes build the trees the latents
        learn to read); "mix": both, the rule's action weighted train.sft_rule_share
        (rl/update.py)."""
        t = self.run.train
        field = "rule_action" if t.sft_head == "rule" else "tree_action"
        steps = [s for tr in result.trajectories for s in tr.steps]
        extra = {"tree_target": np.asarray([getattr(s, field) for s in steps], np.int32)}
        if t.sft_head == "mix":
            extra["tree_target_rule"] = np.asarray([s.rule_action for s in steps], np.int32)
        return extra

    def train_step(self) -> dict:
        t = self.run.train
        algo = self.algo
        t0 = time.perf_counter()
        enc = self.policy.encoder
        reads0, lookups0 = enc.reads, enc.lookups
        result, group = self.rollout()
        t1 = time.perf_counter()
        rewards = np.asarray([tr.reward for tr in result.trajectories], np.float32)
        if self.hosts.count == 1 and not any(tr.steps for tr in result.trajectories):
            # every prompt overflowed the engine's context: nothing to learn from
            log.warning("step %d: no turns (prompts longer than engine.max_len?); update skipped", self.step)
            self.step += 1
            return {"step": self.step, "reward_mean": float(rewards.mean()), "skipped": 1.0, "updates": 0,
                    "time_step": time.perf_counter() - t0}
        episode = np.asarray([i for i, tr in enumerate(result.trajectories) for _ in tr.steps], np.int32)
        if algo == "grpo":
            adv_rows, tree_adv, terms = self._grpo_advantages(result, rewards, episode)
            extra = {}
        else:
            adv_rows = tree_adv = np.zeros((len(episode),), np.float32)
            extra, terms = self._sft_targets(result), {}
        batch = self._rows(result, adv_rows, tree_adv, extra)
        state = self.model.state
        old_from = self.run.train.old_logp
        chunks = self._chunks(batch)
        if algo == "sft" and self.loss_cfg.key_coef:  # the key loss sees every observation of the step
            chunks[0][0].update(self._key_rows(result))
        if algo == "grpo" and t.tree_kl:  # the tree head's log-probs under the head GRPO started from
            reference = self._tree_reference()
            for c, _ in chunks:
                c["ref_tree_lp"] = self.update.tree_logprobs(reference, c)
        if algo == "grpo":  # old policy (this params) and reference (phi_0) log-probs per chunk
            token_chunks = sum(not tree_only for _, tree_only in chunks)
            # one update per token chunk: the loss detaches the current log-probs (no pass);
            # tree-only chunks do not change what the token chunk sees. Otherwise the
            # engine's log-probs of what it sampled (this params), or one more pass
            need_old = t.ppo_epochs > 1 or token_chunks > 1
            recorded = (rows.rollout_logprobs(batch, t.mini_batch_rows, self.hosts)
                        if need_old and old_from == "rollout" else [None] * len(chunks))
            for (c, tree_only), old in zip(chunks, recorded):
                if tree_only:
                    continue
                if need_old:
                    c["old_logp"] = old if old is not None else self.update.logprobs(self.params, state, c)
                if t.beta:
                    c["ref_logp"] = self.update.logprobs(self.ref_params, state, c)
            jax.block_until_ready(chunks)
        t2 = time.perf_counter()
        sums: dict = {}
        counts: dict = {}
        n_updates = 0
        scale = self.lr_scale(algo, self.step + 1)
        for epoch in range(t.ppo_epochs):
            order = np.random.default_rng([self.run.seed, self.step, epoch]).permutation(len(chunks))
            for j in order:
                chunk, tree_only = chunks[j]
                update = self._update_fn(algo, tree_only)
                self.params, self.opt_state, m = update(self.params, self.opt_state, state, chunk, scale)
                for key, v in m.items():  # token-side metrics average over the updates that have tokens
                    if tree_only and key not in TREE_METRICS:
                        continue
                    sums[key] = sums.get(key, 0.0) + float(v)
                    counts[key] = counts.get(key, 0) + 1
                n_updates += 1
        self._sync_policy()
        t3 = time.perf_counter()
        self.step += 1
        generated = int(batch["resp_mask"].sum())
        metrics = {key: v / max(counts[key], 1) for key, v in sums.items()}
        all_rewards = self.hosts.allgather(rewards)
        metrics.update(
            step=self.step, reward_mean=float(all_rewards.mean()), reward_std=float(all_rewards.std()),
            em=float(np.mean([np.mean(tr.info["per_question_em"]) if tr.info.get("per_question_em")
                              else tr.reward for tr in result.trajectories])),
            skipped=sums.get("skipped", 0.0), updates=n_updates, lr_scale=scale, rows=int(len(episode)), algo=algo,
            **({f"adv_{k}": v for k, v in terms.items()} if algo == "grpo" else {}),
            use_tree=self.policy.config.use_tree,
            **{f"tree_{k}" if not k.startswith("tree_") else k: v for k, v in (result.stats or {}).items()},
            obs_reads=enc.reads - reads0, obs_lookups=enc.lookups - lookups0,
            tokens_per_s=(generated + sum(len(s.prompt_ids) for tr in result.trajectories for s in tr.steps))
            / max(t3 - t0, 1e-9),
            generated_tokens=generated, time_rollout=t1 - t0, time_reference=t2 - t1,
            time_update=t3 - t2, time_step=t3 - t0)
        return metrics

    # ------------------------------------------------------------------ loop
    def train(self, steps: Optional[int] = None) -> list[dict]:
        steps = self.run.train.steps if steps is None else steps
        history = []
        with self.metrics.progress(total=steps, start=self.step) as advance, preemption.deferred():
            while self.step < steps:
                m = self.train_step()
                if m["skipped"]:
                    log.warning("step %d: %d update(s) skipped (non-finite loss or gradient)",
                                self.step, int(m["skipped"]))
                self.metrics.write(m)
                advance(m)
                history.append(m)
                saved = self.step % self.run.checkpoint.every == 0 or self.step in (steps, *self.ckpt.preserve)
                if saved:
                    self.save()
                signum = preemption.requested(self.hosts)
                if signum:  # rl/preemption.py: this step is kept; a rerun resumes after it
                    if not saved:
                        self.save()
                    self.ckpt.wait()
                    raise preemption.Preempted(signum, self.step, self.ckpt.directory)
        self.ckpt.wait()
        return history

    def close(self):
        self.ckpt.close()
        self.metrics.close()
        if self._own_engine:
            self.engine.close()


__all__ = ["TREE_METRICS", "Trainer"]
