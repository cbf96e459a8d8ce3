"""The ActiveMem trainer: rollout -> rewards -> advantages -> PPO-style epochs (GRPO), or
expert trajectories -> cross-entropy (SFT). Config-driven (see configs/activemem_*.py).

    trainer = Trainer(cfg)            # loads the backbone, engine, policy; resumes if it can
    trainer.train()                   # cfg.train.steps steps, checkpoints, metrics
    trainer.close()

Everything heavy is jitted: the rollout's controller step, the engine's prefill/decode,
the update (`rl.update.TrainStep`). Rows (one per agent turn) are padded to a fixed
mini-batch of `train.mini_batch_rows` rows and a power-of-two length, so compiles are
few. Resuming restores params, optimizer state, tree, data iterator and step; rollout
seeds depend on (seed, step) only, so a resumed run repeats an uninterrupted one.
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
from jax.sharding import NamedSharding, PartitionSpec

from activemem_jax.activemem import ActiveMem, PolicyConfig, collate, init_lora, merge_lora, repeat_tasks
from activemem_jax.rl import grpo
from activemem_jax.rl.checkpoints import Checkpoints
from activemem_jax.rl.metrics_log import MetricsLog
from activemem_jax.rl.update import LossConfig, TrainStep, make_optimizer

log = logging.getLogger(__name__)


# metrics a tree-only update (unscored rows, no backbone pass) reports meaningfully
TREE_METRICS = ("tree_loss", "tree_acc", "grad_norm", "skipped", "grad_shared", "grad_tree", "grad_insert",
                "grad_gate", "grad_update")


def _bucket(n: int, lo: int = 32) -> int:
    """Row length: a power of two up to 512, then a multiple of 256 (few compiles, little padding)."""
    b = lo
    while b < n and b < 512:
        b *= 2
    return b if b >= n else -(-n // 256) * 256


def build_tasks(cfg, model):
    """(train tasks, env factory, expert search or None) for cfg.data."""
    d = cfg.data
    if d.name == "synthetic":
        from activemem_jax.data import synthetic_world
        from activemem_jax.data.retrieval import BM25Retriever
        from activemem_jax.envs import MultiObjectiveQAEnv

        world = synthetic_world.generate(seed=d.seed, n_entities=d.n_entities)
        retriever = BM25Retriever(world.documents)
        tasks = []
        for n in d.n_objectives:
            tasks += synthetic_world.make_tasks(world, d.split, n, d.n_tasks, seed=d.seed)
        return tasks, (lambda: MultiObjectiveQAEnv(retriever, max_turns=d.max_turns, topk=d.retrieval_topk,
                                                   format_reward=d.format_reward)), retriever
    if d.name == "recall":
        from activemem_jax.envs.recall import RecallEnv, make_recall_tasks

        n_q = d.get("n_questions", 0) or d.n_facts
        if d.max_turns < d.n_facts + n_q:
            raise ValueError(f"data.n_facts={d.n_facts} and data.n_questions={n_q} need data.max_turns >= "
                             f"{d.n_facts + n_q} (a turn per fact and per question); it is {d.max_turns}")
        tasks = make_recall_tasks(d.split, d.n_tasks, d.n_facts, seed=d.seed, n_questions=n_q)
        return tasks, (lambda: RecallEnv(d.split, max_turns=d.max_turns)), None
    if d.name == "first_token":
        from activemem_jax.envs import FirstTokenEnv

        vocab = model.config.vocab_size
        tasks = [{"id": f"ft-{i}", "prompt": p} for i, p in enumerate(d.prompts)]
        if d.target_words:  # reward: the response starts with one of these words
            tok = model.tokenizer
            targets = {tok(v, add_special_tokens=False)["input_ids"][0]
                       for w in d.target_words for v in (w, " " + w)}
            predicate = targets.__contains__
        else:  # reward: the first token's id is in the lowest `fraction` of the vocabulary
            predicate = lambda t: t < vocab * d.fraction  # noqa: E731
        return tasks, (lambda: FirstTokenEnv(model.tokenizer, predicate)), None
    raise ValueError(f"data.name={d.name!r}: synthetic, recall or first_token")


class Trainer:
    def __init__(self, cfg, *, model=None, engine=None):
        from activemem_jax.data.loaders import grain_dataset
        from activemem_jax.engine import Engine
        from activemem_jax.models import load_pretrained
        from activemem_jax.sharding import make_mesh

        self.cfg = cfg
        t = cfg.train
        if t.algo not in ("grpo", "sft"):
            raise ValueError(f"train.algo={t.algo!r}: grpo or sft")
        if t.mini_batch_rows < 1 or t.group_size < 1 or t.prompts_per_step < 1:
            raise ValueError("train.mini_batch_rows, group_size and prompts_per_step must be >= 1")
        if t.algo == "grpo" and t.group_size < 2:
            raise ValueError("GRPO needs train.group_size >= 2 (advantages are relative to the group)")
        if cfg.model.get("quant", ""):
            raise ValueError(f"model.quant={cfg.model.quant!r}: int8 weights are for evaluation and serving "
                             "(launch/eval_activemem.py, activemem_jax.serve); train on float weights "
                             "(model.dtype bfloat16 or float32) and evaluate the checkpoint with quant='int8'")
        if model is None:
            m = cfg.mesh
            mesh = make_mesh(data=m.data, fsdp=m.fsdp, tensor=m.tensor)
            model = load_pretrained(cfg.model.path, dtype=cfg.model.dtype, mesh=mesh,
                                    rules=dict(cfg.sharding.rules) if "sharding" in cfg else None,
                                    remat=cfg.model.remat, activation_dtype=cfg.model.get("activation_dtype", ""))
        self.model = model  # the training backbone, sharded over the global mesh
        self.mesh = model.mesh
        self.nproc = jax.process_count()
        self.gen_model = model
        if self.nproc > 1:  # each host rolls out on its own devices, with its own engine
            self.gen_model = load_pretrained(cfg.model.path, dtype=cfg.model.dtype,
                                             activation_dtype=cfg.model.get("activation_dtype", ""),
                                             mesh=make_mesh(devices=jax.local_devices()),
                                             rules=dict(cfg.sharding.rules) if "sharding" in cfg else None)
            if t.mini_batch_rows % self.nproc:
                raise ValueError(f"train.mini_batch_rows={t.mini_batch_rows} must be a multiple of the "
                                 f"{self.nproc} processes")
        self._own_engine = engine is None
        self.engine = engine or Engine(self.gen_model, max_slots=cfg.engine.max_slots, max_len=cfg.engine.max_len)
        self.policy = ActiveMem(self.gen_model, self.engine, PolicyConfig.from_dict(cfg.policy.to_dict()),
                                seed=cfg.seed)
        self.tasks, self.make_env, self.search = build_tasks(cfg, model)
        self.data = iter(grain_dataset(self.tasks, t.prompts_per_step, seed=cfg.seed, shuffle=True,
                                       process_index=jax.process_index(), process_count=jax.process_count(),
                                       drop_remainder=True).repeat().to_iter_dataset()) \
            if len(self.tasks) >= t.prompts_per_step else None
        if self.data is None:
            raise ValueError(f"{len(self.tasks)} training tasks; train.prompts_per_step is {t.prompts_per_step}")
        lora = {}
        if cfg.lora.rank:
            lora = init_lora(model.state, cfg.lora.rank, tuple(cfg.lora.targets), jax.random.PRNGKey(cfg.seed))
        self.params = self._replicate({"controller": self.policy.params, "lora": lora})
        self.ref_params = self._replicate(self.params)  # phi_0 (and zero LoRA): the reference
        o = cfg.optim
        self.optimizer = make_optimizer(o.lr_controller, o.lr_lora, o.warmup_steps, o.weight_decay,
                                        o.max_grad_norm)
        self.opt_state = self._replicate(self.optimizer.init(self.params))
        self.loss_cfg = LossConfig(algo=t.algo, clip_eps=t.clip_eps, clip_eps_high=t.clip_eps_high or None,
                                   agg=t.agg, beta=t.beta, tree_coef=t.tree_coef,
                                   lora_alpha=cfg.lora.alpha, chunk=t.logprob_chunk,
                                   micro_batch_rows=t.micro_batch_rows)
        self._updates: dict = {}
        self.update = self._update_fn(t.algo, False)
        self.sft_steps = int(t.get("sft_steps", 0)) if t.algo == "grpo" else 0  # SFT warm start, then GRPO
        self.step = 0
        self.ckpt = Checkpoints(os.path.join(cfg.out_dir, "checkpoints"), keep=cfg.checkpoint.keep,
                                async_save=cfg.checkpoint.async_save)
        if cfg.checkpoint.resume and self.ckpt.latest_step() is not None:
            self._restore()
        self.metrics = MetricsLog(cfg.out_dir, tensorboard=cfg.log.tensorboard, resume_step=self.step,
                                 enabled=jax.process_index() == 0)
        self._sync_policy()

    # ------------------------------------------------------------------ state
    def _replicate(self, tree):
        """A copy of `tree` replicated over the global mesh (identical on every host)."""
        sharding = NamedSharding(self.mesh, PartitionSpec())

        def put(x):
            x = np.asarray(x.addressable_data(0) if isinstance(x, jax.Array) else x)
            return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])

        return jax.tree.map(put, tree)

    def _local(self, tree):
        """This host's copy of replicated global arrays (the rollout side uses them)."""
        if self.nproc == 1:
            return tree
        return jax.tree.map(lambda x: jnp.asarray(np.asarray(x.addressable_data(0))), tree)

    def _sync_policy(self):
        self.policy.params = self._local(self.params["controller"])
        if self.params["lora"]:
            lora = self._local(self.params["lora"])
            self.engine.set_weights(merge_lora(self.gen_model.state, lora, self.cfg.lora.alpha))

    def _meta(self) -> dict:
        return {"step": self.step, "data": _jsonable(self.data.get_state()), "seed": self.cfg.seed,
                "lora_alpha": float(self.cfg.lora.alpha), "algo": self.cfg.train.algo}

    def save(self):
        memory = jax.tree.map(np.asarray, self.policy.memory_state)  # host arrays: the same on every host
        self.ckpt.save(self.step, self.params, self.opt_state, memory, self._meta())

    def _restore(self):
        out = self.ckpt.restore(self.params, self.opt_state, jax.tree.map(np.asarray, self.policy.memory_state))
        self.params = self._replicate(out["params"])
        self.opt_state = self._replicate(out["opt_state"])
        self.policy.memory_state = out["tree"]
        self.step = int(out["meta"]["step"])
        self.data.set_state(_from_jsonable(out["meta"]["data"]))
        log.info("resumed from %s at step %d", self.ckpt.directory, self.step)

    # ------------------------------------------------------------------ one step
    def _agree(self, *values: int) -> list[int]:
        """The maximum of each value over all hosts (so every host pads alike)."""
        if self.nproc == 1:
            return list(values)
        from jax.experimental import multihost_utils

        got = multihost_utils.process_allgather(np.asarray(values, np.int64))
        return [int(v) for v in np.max(got.reshape(self.nproc, -1), axis=0)]

    def _rows(self, result, adv_rows, tree_adv_rows, extra=None) -> dict:
        """This host's rows, padded to sizes all hosts agree on: rows to a multiple of
        mini_batch_rows / processes; for GRPO, responses to a power of two of the turn
        budget (max_tokens) and rows to a bucket of the longest prompt plus that budget, as
        veRL pads to its max response length, so the shapes depend on the prompts only, not
        on how long the sampled answers were; for SFT (expert answers, no budget), to the
        longest row. Paths pad to max_depth (one shape whatever the tree retrieved)."""
        t = self.cfg.train
        k = self.policy.config.num_latents
        steps = [s for tr in result.trajectories for s in tr.steps]
        budget = self.policy.config.max_tokens if self.algo == "grpo" else 0
        longest, resp, n_rows = self._agree(max(len(s.prompt_ids) + max(len(s.response_ids), budget)
                                                for s in steps),
                                            max(max(len(s.response_ids) for s in steps), budget), len(steps))
        batch = collate(result.trajectories, k, max_len=_bucket(longest),
                        resp_len=1 << max(resp - 1, 0).bit_length(), path_len=self.policy.config.max_depth)
        r = batch["tokens"].shape[0]
        batch["adv"], batch["tree_adv"] = adv_rows.astype(np.float32), tree_adv_rows.astype(np.float32)
        batch["row_valid"] = np.ones((r,), bool)
        if extra:
            batch.update(extra)
        # rows of unscored turns (the env scores no response there) go last, in chunks of
        # their own that train the tree head only, with no backbone pass
        scored = batch.pop("scored")
        n_scored, n_other = self._agree(int(scored.sum()), int((~scored).sum()))
        mb = t.mini_batch_rows // self.nproc

        def group(rows, total):
            part = {key: v[rows] for key, v in batch.items()}
            pad = -(-total // mb) * mb - len(rows)
            part = {key: np.concatenate([v, np.zeros((pad,) + v.shape[1:], v.dtype)]) for key, v in part.items()}
            part["latent_pos"][len(rows):] = -1
            part["resp_pos"][len(rows):] = -1
            return part

        first = group(np.flatnonzero(scored), n_scored)
        rest = group(np.flatnonzero(~scored), n_other)
        rest["resp_mask"][:] = False
        padded = {key: np.concatenate([first[key], rest[key]]) for key in batch}
        padded["tree_only"] = np.arange(len(padded["tokens"])) >= len(first["tokens"])
        return padded

    def _shard(self, batch: dict) -> dict:
        """Rows -> global arrays, split over the mesh's data and fsdp axes (each host
        contributes its own rows when there are several)."""
        axes = tuple(a for a in ("data", "fsdp") if self.mesh.shape[a] > 1)
        size = int(np.prod([self.mesh.shape[a] for a in axes])) if axes else 1
        rows = NamedSharding(self.mesh, PartitionSpec(axes or None))

        def put(x):
            if self.nproc > 1:
                return jax.make_array_from_process_local_data(rows, x)
            spec = rows if x.shape[0] % size == 0 else NamedSharding(self.mesh, PartitionSpec())
            return jax.device_put(x, spec)

        skip = ("episode", "reward", "path", "action_mask", "old_logp", "resp_old_logp", "tree_only")
        return {k: put(v) for k, v in batch.items() if k not in skip}

    def _chunks(self, batch: dict) -> list[tuple[dict, bool]]:
        """(chunk, tree_only) per mini-batch."""
        mb = self.cfg.train.mini_batch_rows // self.nproc
        rows = batch["tokens"].shape[0]
        return [(self._shard({k: v[i:i + mb] for k, v in batch.items()}), bool(batch["tree_only"][i]))
                for i in range(0, rows, mb)]

    def _update_fn(self, algo: str, tree_only: bool) -> TrainStep:
        """The jitted update for (algo, tree_only), built on first use."""
        key = (algo, tree_only)
        if key not in self._updates:
            cfg = dataclasses.replace(self.loss_cfg, algo=algo, tree_only=tree_only)
            self._updates[key] = TrainStep(self.model.graphdef, self.policy.graphdef, cfg, self.optimizer)
        return self._updates[key]

    def _gather(self, logs, paths, turns, returns):
        """Every host's op logs / paths / returns, host by host (multi-host commit)."""
        from jax.experimental import multihost_utils

        (max_turns,) = self._agree(paths.shape[1])
        paths = jnp.pad(paths, ((0, 0), (0, max_turns - paths.shape[1]), (0, 0)), constant_values=-1)
        gather = lambda x: jnp.asarray(multihost_utils.process_allgather(np.asarray(x), tiled=True))  # noqa: E731
        return (jax.tree.map(gather, logs), gather(paths), gather(turns), gather(returns),
                jax.process_index() * len(returns))

    @property
    def algo(self) -> str:
        """This step's algorithm: SFT for the first train.sft_steps steps, then train.algo."""
        return "sft" if self.step < self.sft_steps else self.cfg.train.algo

    def rollout(self):
        t = self.cfg.train
        tasks = next(self.data)
        if self.algo == "sft":  # expert turns are deterministic: G batches of distinct prompts, not G copies
            for _ in range(t.group_size - 1):
                tasks = list(tasks) + list(next(self.data))
            group = list(tasks)
        else:
            group = repeat_tasks(tasks, t.group_size)
        base = (self.step * self.nproc + jax.process_index()) * len(group)
        uids = [base + i for i in range(len(group))]
        env = self.make_env()
        self.engine.clear_prefix_cache()
        if self.algo == "sft":
            return self._expert_rollout(env, group, uids), group
        result = self.policy.rollout(env, group, seed=self.cfg.seed, uids=uids, commit=self.nproc == 1,
                                     temperature=self.policy.config.temperature)
        if self.nproc > 1:
            result = self.policy.commit(result, gather=self._gather)
        return result, group

    def _expert_rollout(self, env, group, uids):
        from activemem_jax.data.oracle import expert_actions

        if hasattr(env, "expert"):  # the environment knows its right responses (recall)
            result = self.policy.rollout(env, group, seed=self.cfg.seed, uids=uids, tree_rule=True,
                                         commit=self.nproc == 1, responder=env.expert)
            return self.policy.commit(result, gather=self._gather) if self.nproc > 1 else result
        if self.search is None:
            raise ValueError("SFT needs a benchmark with an oracle solver (data.name='synthetic')")
        k = self.cfg.data.retrieval_topk
        scripts = [expert_actions(task, lambda q, n: self.search.search(q, n), k) for task in group]
        result = self.policy.rollout(env, group, seed=self.cfg.seed, uids=uids, tree_rule=True,
                                     commit=self.nproc == 1,
                                     responder=lambda i, turn: scripts[i][min(turn, len(scripts[i]) - 1)])
        return self.policy.commit(result, gather=self._gather) if self.nproc > 1 else result

    def train_step(self) -> dict:
        t = self.cfg.train
        algo = self.algo
        t0 = time.perf_counter()
        result, group = self.rollout()
        t1 = time.perf_counter()
        rewards = np.asarray([tr.reward for tr in result.trajectories], np.float32)
        if self.nproc == 1 and not any(tr.steps for tr in result.trajectories):
            # every prompt overflowed the engine's context: nothing to learn from
            log.warning("step %d: no turns (prompts longer than engine.max_len?); update skipped", self.step)
            self.step += 1
            return {"step": self.step, "reward_mean": float(rewards.mean()), "skipped": 1.0, "updates": 0,
                    "time_step": time.perf_counter() - t0}
        episode = np.asarray([i for i, tr in enumerate(result.trajectories) for _ in tr.steps], np.int32)
        paths = np.stack([s.path for tr in result.trajectories for s in tr.steps]).astype(np.int32)
        extra = {}
        if algo == "grpo":  # A_{i,t} for the token (and latent) loss and the tree term alike (SPEC 4.5 R2)
            tree_adv = np.asarray(grpo.hierarchical_advantages(rewards, t.group_size, episode, paths,
                                                               self.policy.config.capacity, t.lambda_h, t.adv_eps))
            adv_rows = tree_adv
        else:
            adv_rows = tree_adv = np.zeros((len(episode),), np.float32)
            extra["tree_target"] = np.asarray([s.tree_action for tr in result.trajectories for s in tr.steps],
                                              np.int32)
        batch = self._rows(result, adv_rows, tree_adv, extra)
        state = self.model.state
        chunks = self._chunks(batch)
        if algo == "grpo":  # old policy (this params) and reference (phi_0) log-probs per chunk
            for c, tree_only in chunks:
                if tree_only:
                    continue
                if t.ppo_epochs > 1 or len(chunks) > 1:  # else the loss detaches the current ones
                    c["old_logp"] = self.update.logprobs(self.params, state, c)
                if t.beta:
                    c["ref_logp"] = self.update.logprobs(self.ref_params, state, c)
            jax.block_until_ready(chunks)
        t2 = time.perf_counter()
        sums: dict = {}
        counts: dict = {}
        n_updates = 0
        for epoch in range(t.ppo_epochs):
            order = np.random.default_rng([self.cfg.seed, self.step, epoch]).permutation(len(chunks))
            for j in order:
                chunk, tree_only = chunks[j]
                update = self._update_fn(algo, tree_only)
                self.params, self.opt_state, m = update(self.params, self.opt_state, state, chunk)
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
        all_rewards = rewards
        if self.nproc > 1:
            from jax.experimental import multihost_utils

            all_rewards = np.asarray(multihost_utils.process_allgather(rewards, tiled=True))
        metrics.update(
            step=self.step, reward_mean=float(all_rewards.mean()), reward_std=float(all_rewards.std()),
            em=float(np.mean([np.mean(tr.info["per_question_em"]) if tr.info.get("per_question_em")
                              else tr.reward for tr in result.trajectories])),
            skipped=sums.get("skipped", 0.0), updates=n_updates, rows=int(len(episode)), algo=algo,
            use_tree=self.policy.config.use_tree,
            **{f"tree_{k}" if not k.startswith("tree_") else k: v for k, v in (result.stats or {}).items()},
            tokens_per_s=(generated + int(batch["attention_mask"].sum())) / max(t3 - t0, 1e-9),
            generated_tokens=generated, time_rollout=t1 - t0, time_reference=t2 - t1,
            time_update=t3 - t2, time_step=t3 - t0)
        return metrics

    # ------------------------------------------------------------------ loop
    def train(self, steps: Optional[int] = None) -> list[dict]:
        steps = self.cfg.train.steps if steps is None else steps
        history = []
        with self.metrics.progress(total=steps, start=self.step) as advance:
            while self.step < steps:
                m = self.train_step()
                if m["skipped"]:
                    log.warning("step %d: %d update(s) skipped (non-finite loss or gradient)",
                                self.step, int(m["skipped"]))
                self.metrics.write(m)
                advance(m)
                history.append(m)
                if self.step % self.cfg.checkpoint.every == 0 or self.step == steps:
                    self.save()
        self.ckpt.wait()
        return history

    def close(self):
        self.ckpt.close()
        self.metrics.close()
        if self._own_engine:
            self.engine.close()


def _jsonable(state):
    """grain iterator states may hold bytes; JSON needs text."""
    if isinstance(state, bytes):
        return {"__bytes__": state.hex()}
    if isinstance(state, dict):
        return {k: _jsonable(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return [_jsonable(v) for v in state]
    if isinstance(state, (np.integer,)):
        return int(state)
    return state


def _from_jsonable(state):
    if isinstance(state, dict):
        if set(state) == {"__bytes__"}:
            return bytes.fromhex(state["__bytes__"])
        return {k: _from_jsonable(v) for k, v in state.items()}
    if isinstance(state, list):
        return [_from_jsonable(v) for v in state]
    return state


__all__ = ["Trainer", "build_tasks"]
