"""Memory-augmented rollouts (SPEC 4.3-4.4): a batch of episodes in lockstep.

    policy = ActiveMem(model, engine, PolicyConfig(num_latents=4))
    result = policy.rollout(env, tasks, seed=0)        # commits the op logs and maintains the tree
    result.trajectories[i].steps[t]                     # everything the trainer needs, per turn
    batch = collate(result.trajectories, num_latents=4) # padded arrays for the training forward

Per turn, for every live episode: render the prompt (K placeholders before the newest
observation), encode the placeholder-free prompt -> h_t (the engine keeps its KV, so the
generation request reuses the shared prefix), traverse the episode's overlay (the frozen
snapshot plus its pending nodes), run the controller -> m_t and a masked tree action,
generate the turn with m_t spliced in, step the environment. At the end the op logs are
committed to the persistent tree, the activated paths credited with the episode
returns, and the maintenance (EMA, prune, merge) runs.

Seeds depend on (seed, episode uid, turn) only, so an episode's rollout is the same in
any batch. G samples per prompt: `repeat_tasks(tasks, G)` (uids keep them distinct).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional, Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from activemem_jax import metrics
from activemem_jax.activemem.controller import Controller
from activemem_jax.activemem.layout import PromptLayout
from activemem_jax.activemem.step import StepConfig, controller_step
from activemem_jax.engine import SamplingParams
from activemem_jax.memory import tree as hlmt

SCOPES = ("persistent", "episode")
STEP_MODES = ("turn", "delimiter")


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
    num_latents: int = 4           # K; 0 = w/o latent injection
    hidden: int = 512
    activation: str = "gelu"
    layout: str = "constant"       # constant (MEM1) | full (plain full-history baseline)
    latent_slots: str = "before_observation"  # SPEC 4.3 | after_observation (no double prefill)
    use_tree: bool = True          # False = w/o HLMT
    tree_actions: bool = True      # False = w/o tree action head (always noop)
    maintenance: bool = True       # False = w/o merge/delete
    tree_scope: str = "persistent"
    capacity: int = 1024
    max_children: int = 16
    max_depth: int = 8
    max_ops: int = 16              # op-log entries per episode
    tau_stop: float = 0.5
    tau_merge: float = 0.9
    ema_beta: float = 0.1
    prune_fraction: float = 0.05
    max_tokens: int = 128          # per turn
    temperature: float = 1.0       # train 1.0; eval 0.01 (paper 6.1)
    top_p: float = 1.0
    stop: tuple = ("</search>", "</answer>")
    step_mode: str = "turn"        # turn: one agent turn per step; delimiter: single-shot tasks,
    delimiter: str = "\n\n"        # a step ends at the delimiter (wrap the env in SegmentedEnv)

    def __post_init__(self):
        if self.step_mode not in STEP_MODES:
            raise ValueError(f"step_mode={self.step_mode!r}: use one of {STEP_MODES}")
        if self.step_mode == "delimiter" and not self.delimiter:
            raise ValueError("step_mode='delimiter' needs a non-empty delimiter")
        if self.tree_scope not in SCOPES:
            raise ValueError(f"tree_scope={self.tree_scope!r}: use one of {SCOPES}")
        if self.max_ops < 1 or self.capacity < 2:
            raise ValueError("max_ops must be >= 1 and capacity >= 2")

    @classmethod
    def from_dict(cls, d) -> "PolicyConfig":
        d = dict(d)
        unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown policy config keys {unknown}; known: "
                             f"{[f.name for f in dataclasses.fields(cls)]}")
        if "stop" in d:
            d["stop"] = tuple(d["stop"])
        return cls(**d)

    @property
    def step_config(self) -> StepConfig:
        return StepConfig(use_tree=self.use_tree, tree_actions=self.tree_actions,
                          tau_stop=self.tau_stop, tau_merge=self.tau_merge)


@dataclasses.dataclass
class Step:
    prompt_ids: list[int]
    latent_pos: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    text: str
    observation: str
    h: np.ndarray               # [d]
    p_bar: np.ndarray           # [d]
    tree_action: int
    tree_logp: float
    tree_mask: np.ndarray       # [3] bool
    path: np.ndarray            # [max_depth] int32: persistent slots after commit (-1 pad)
    reward: float = 0.0


@dataclasses.dataclass
class Trajectory:
    task: dict
    uid: int
    steps: list[Step]
    reward: float = 0.0
    info: dict = dataclasses.field(default_factory=dict)
    peak_tokens: int = 0
    dependency_length: float = 0.0
    time_s: float = 0.0


@flax.struct.dataclass
class RolloutResult:
    trajectories: list = flax.struct.field(pytree_node=False)
    logs: hlmt.OpLog          # [E] per-episode op logs (overlay slots / references)
    overlay_paths: jax.Array  # [E, turns, max_depth] paths in overlay slots
    committed: bool = flax.struct.field(pytree_node=False, default=False)


@dataclasses.dataclass
class _Scripted:
    token_ids: list
    logprobs: list


def repeat_tasks(tasks: Sequence[dict], group_size: int) -> list[dict]:
    """Each task G times in a row (a GRPO group per prompt)."""
    return [t for t in tasks for _ in range(group_size)]


def request_seed(seed: int, uid: int, turn: int) -> int:
    return int(np.random.SeedSequence([seed, uid, turn]).generate_state(1)[0] & 0x7FFFFFFF)


def _stack(trees: Sequence, n: int):
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), trees)


def _cut_at_stop(text: str, stops: Sequence[str]) -> str:
    ends = [text.find(s) + len(s) for s in stops if s in text]
    return text[: min(ends)] if ends else text


class ActiveMem:
    """The frozen backbone + controller + persistent latent memory tree."""

    def __init__(self, model, engine, config: PolicyConfig = PolicyConfig(), *,
                 controller: Optional[Controller] = None, seed: int = 0):
        self.model, self.engine, self.config = model, engine, config
        d = model.config.hidden_size
        self.layout = PromptLayout(model.tokenizer, config.num_latents, config.layout,
                                   slots=config.latent_slots)
        if controller is None:
            emb = np.asarray(model.module.embed_tokens(jnp.asarray([self.layout.placeholder_id])),
                             np.float32)[0]  # the placeholder's own embedding (dequantized if int8)
            controller = Controller(d, num_latents=config.num_latents, hidden=config.hidden,
                                    activation=config.activation, latent_init=emb,
                                    rngs=nnx.Rngs(seed))
        self.graphdef, self.params = nnx.split(controller)
        self.tree = self.empty_tree()
        self._step = jax.jit(controller_step, static_argnums=(0, 7))
        self._finish = jax.jit(self._finish_fn, static_argnums=(0,))

    # ---------------------------------------------------------------- state
    @property
    def controller(self) -> Controller:
        return nnx.merge(self.graphdef, self.params)

    def empty_tree(self) -> hlmt.Tree:
        """A fresh tree, replicated on the model's mesh: the placement the jitted steps
        give back, so the second rollout does not recompile them for a new placement."""
        c = self.config
        tree = hlmt.init_tree(c.capacity, self.model.config.hidden_size, c.max_children, c.max_depth)
        return jax.device_put(tree, NamedSharding(self.model.mesh, PartitionSpec()))

    # ---------------------------------------------------------------- rollout
    def rollout(self, env, tasks: Sequence[dict], *, seed: int = 0, greedy: bool = False,
                uids: Optional[Sequence[int]] = None, commit: bool = True,
                temperature: Optional[float] = None, tree_rule: bool = False,
                responder: Optional[Callable[[int, int], str]] = None) -> RolloutResult:
        """Roll out `tasks` in lockstep. greedy: argmax tree actions; tree_rule: the
        threshold rule's tree actions (SFT); responder(episode, turn) -> text replaces the
        model's generation (scripted / expert turns; their log-probs are recorded as 0)."""
        c, eng = self.config, self.engine
        e = len(tasks)
        if e == 0:
            raise ValueError("rollout needs at least one task")
        uids = list(range(e)) if uids is None else [int(u) for u in uids]
        if len(uids) != e:
            raise ValueError(f"{len(uids)} uids for {e} tasks")
        temperature = c.temperature if temperature is None else temperature
        task_prompts = env.reset(tasks)
        snapshot = self.tree if c.tree_scope == "persistent" else self.empty_tree()
        overlays = _stack(snapshot, e)
        logs = _stack(hlmt.new_log(c.max_ops, self.model.config.hidden_size), e)
        histories: list[list[tuple[str, str]]] = [[] for _ in range(e)]
        trajs = [Trajectory(task=t, uid=u, steps=[]) for t, u in zip(tasks, uids)]
        done = [False] * e
        paths = []
        start = time.perf_counter()
        base_key = jax.random.PRNGKey(seed)
        scfg = dataclasses.replace(c.step_config, greedy=greedy, rule=tree_rule)
        turn = 0
        while not all(done):
            live = [i for i in range(e) if not done[i]]
            prompts = {i: self._prompt(task_prompts[i], histories[i]) for i in live}
            too_long = [i for i in live if len(prompts[i].ids) + 1 > eng.max_len]
            for i in too_long:  # the context is full: the episode ends unanswered
                done[i] = True
                trajs[i].info["context_overflow"] = True
                env.abort(i)
            live = [i for i in live if i not in too_long]
            if not live:
                break
            h = np.zeros((e, self.model.config.hidden_size), np.float32)
            h[live] = eng.encode_hidden([prompts[i].plain_ids for i in live])
            keys = jax.vmap(lambda u: jax.random.fold_in(jax.random.fold_in(base_key, u), turn))(
                jnp.asarray(uids, jnp.uint32))
            live_mask = np.zeros((e,), bool)
            live_mask[live] = True
            overlays, logs, out = self._step(self.graphdef, self.params, overlays, logs,
                                             jnp.asarray(h), keys, jnp.asarray(live_mask), scfg)
            paths.append(out.path)
            out = jax.device_get(out)
            if responder is None:
                outputs = self._generate(prompts, live, out.latents, uids, turn, seed, temperature)
                texts = {i: _cut_at_stop(self.model.tokenizer.decode(o.token_ids, skip_special_tokens=True),
                                         self.stop_strings) for i, o in outputs.items()}
            else:
                texts = {i: responder(i, turn) for i in live}
                outputs = {i: self._scripted(texts[i]) for i in live}
            texts = [texts.get(i, "") for i in range(e)]
            obs, rewards, dones, infos = env.step(texts)
            now = time.perf_counter() - start
            for i in live:
                o = outputs[i]
                trajs[i].steps.append(Step(
                    prompt_ids=prompts[i].ids, latent_pos=prompts[i].latent_pos,
                    response_ids=list(o.token_ids), response_logprobs=list(o.logprobs),
                    text=texts[i], observation=obs[i], h=h[i], p_bar=np.asarray(out.p_bar[i]),
                    tree_action=int(out.action[i]), tree_logp=float(out.logp[i]),
                    tree_mask=np.asarray(out.mask[i]), path=np.asarray(out.path[i]),
                    reward=float(rewards[i])))
                histories[i].append((texts[i], obs[i]))
                trajs[i].info = {**trajs[i].info, **infos[i]}
                if dones[i]:
                    done[i] = True
                    trajs[i].reward = float(infos[i]["reward"])
                    trajs[i].time_s = now
            turn += 1
        for t in trajs:
            if not t.time_s:
                t.time_s = time.perf_counter() - start
            self._measure(t)
        max_depth = c.max_depth
        overlay_paths = (jnp.stack(paths, axis=1) if paths
                         else jnp.full((e, 0, max_depth), -1, jnp.int32))
        result = RolloutResult(trajectories=trajs, logs=logs, overlay_paths=overlay_paths)
        return self.commit(result) if commit else result

    def _prompt(self, task_prompt: str, history):
        if self.config.step_mode == "delimiter" and history:
            return self.layout.render_continuation(task_prompt, "".join(text for text, _ in history))
        return self.layout.render(task_prompt, history)

    @property
    def stop_strings(self) -> tuple:
        c = self.config
        return ((c.delimiter,) if c.step_mode == "delimiter" else ()) + tuple(c.stop)

    def _generate(self, prompts, live, latents, uids, turn, seed, temperature) -> dict:
        """The live episodes' turns on the engine, m_t spliced over the placeholders."""
        c = self.config
        handles = {}
        with self.engine.batch():  # admitted together: batched prefills, fixed shapes
            for i in live:
                p = prompts[i]
                params = SamplingParams(temperature=temperature, top_p=c.top_p, max_tokens=c.max_tokens,
                                        stop=self.stop_strings, seed=request_seed(seed, uids[i], turn))
                if c.num_latents:
                    handles[i] = self.engine.submit(p.ids, params, latents=latents[i],
                                                    latent_positions=p.latent_pos)
                else:
                    handles[i] = self.engine.submit(p.ids, params)
        return {i: h.result() for i, h in handles.items()}

    def _scripted(self, text: str) -> "_Scripted":
        """A scripted (expert) turn: its tokens and the EOS that ends it; log-probs 0."""
        tok = self.model.tokenizer
        ids = list(tok(text, add_special_tokens=False)["input_ids"])
        ids += [tok.eos_token_id] if tok.eos_token_id is not None else []
        return _Scripted(ids, [0.0] * len(ids))

    def _measure(self, t: Trajectory):
        pre = self.layout.preamble_tokens
        t.peak_tokens = metrics.peak_tokens(len(s.prompt_ids) + len(s.response_ids) - pre for s in t.steps)
        t.dependency_length = metrics.dependency_length(
            (len(s.prompt_ids) - pre, len(s.response_ids)) for s in t.steps)

    # ---------------------------------------------------------------- commit
    def commit(self, result: RolloutResult, gather: Optional[Callable] = None) -> RolloutResult:
        """Commit the logs to the persistent tree, credit the activated paths with the
        episode returns and run the maintenance; steps' paths become persistent slots.
        gather(logs, overlay_paths, turns, returns) -> (the same for every process's
        rollouts, offset of this process's first episode): multi-host training commits
        every host's rollouts in the same order, so all hosts keep one identical tree."""
        c = self.config
        if result.committed:
            raise ValueError("this rollout is already committed")
        if not c.use_tree:
            return result.replace(committed=True)
        returns = jnp.asarray([t.reward for t in result.trajectories], jnp.float32)
        turns = jnp.asarray([len(t.steps) for t in result.trajectories], jnp.int32)
        logs, paths, offset = result.logs, result.overlay_paths, 0
        if gather is not None:
            logs, paths, turns, returns, offset = gather(logs, paths, turns, returns)
        if paths.shape[1] == 0:
            return result.replace(committed=True)
        base = self.tree if c.tree_scope == "persistent" else self.empty_tree()
        tree, resolved = self._finish(c, base, logs, paths, turns, returns)
        if c.tree_scope == "persistent":
            self.tree = tree
        resolved = np.asarray(resolved)[offset:offset + len(result.trajectories)]
        for i, t in enumerate(result.trajectories):
            for j, s in enumerate(t.steps):
                s.path = resolved[i, j]
        return result.replace(committed=True)

    @staticmethod
    def _finish_fn(c: PolicyConfig, tree, logs, overlay_paths, turns, returns):
        tree, assigned = hlmt.commit(tree, logs, return_slots=True)
        resolved = jax.vmap(hlmt.resolve_slots)(logs, assigned, overlay_paths)
        e, n_turns, depth = resolved.shape
        real = jnp.arange(n_turns)[None, :] < turns[:, None]
        resolved = jnp.where(real[..., None], resolved, -1)

        def credit(t, xs):
            nodes, r = xs
            length = jnp.sum(nodes >= 0).astype(jnp.int32)
            return hlmt.record_activations(t, hlmt.Path(nodes, length, jnp.zeros((depth,))), r), None

        flat = resolved.reshape(e * n_turns, depth)
        tree, _ = jax.lax.scan(credit, tree, (flat, jnp.repeat(returns, n_turns)))
        if c.maintenance:
            tree = hlmt.end_episode(tree, c.ema_beta, c.prune_fraction, c.tau_merge)
        else:  # w/o merge/delete: utilities still tracked, nothing pruned or merged
            tree = hlmt.end_episode(tree, c.ema_beta, 0.0, 2.0)
        return tree, resolved


def collate(trajectories: Sequence[Trajectory], num_latents: int, max_len: Optional[int] = None,
            pad_to: int = 64, resp_len: Optional[int] = None) -> dict:
    """One training row per turn: prompt + response ids, right-padded to a multiple of
    `pad_to` (or max_len). action_mask marks the model's own tokens (the response);
    old_logp holds the rollout's log-probs at those positions. The compact response view:
    resp_pos [n, A] (token positions, -1 pad), resp_mask, resp_old_logp, with A = resp_len
    or the next power of two of the longest response."""
    steps = [(i, s) for i, t in enumerate(trajectories) for s in t.steps]
    if not steps:
        raise ValueError("no steps to collate")
    longest = max(len(s.prompt_ids) + len(s.response_ids) for _, s in steps)
    t_len = max_len or -(-longest // pad_to) * pad_to
    if longest > t_len:
        raise ValueError(f"a turn has {longest} tokens; max_len is {t_len}")
    n, k = len(steps), num_latents
    d = steps[0][1].h.shape[-1]
    longest_resp = max(len(s.response_ids) for _, s in steps)
    a = resp_len or 1 << max(longest_resp - 1, 0).bit_length()
    if longest_resp > a:
        raise ValueError(f"a response has {longest_resp} tokens; resp_len is {a}")
    out = {"tokens": np.zeros((n, t_len), np.int32), "attention_mask": np.zeros((n, t_len), bool),
           "action_mask": np.zeros((n, t_len), bool), "old_logp": np.zeros((n, t_len), np.float32),
           "latent_pos": np.full((n, k), -1, np.int32), "h": np.zeros((n, d), np.float32),
           "p_bar": np.zeros((n, d), np.float32), "tree_action": np.zeros((n,), np.int32),
           "tree_logp": np.zeros((n,), np.float32), "tree_mask": np.zeros((n, 3), bool),
           "path": np.stack([s.path for _, s in steps]).astype(np.int32),
           "episode": np.asarray([i for i, _ in steps], np.int32),
           "reward": np.asarray([trajectories[i].reward for i, _ in steps], np.float32),
           "resp_pos": np.full((n, a), -1, np.int32), "resp_mask": np.zeros((n, a), bool),
           "resp_old_logp": np.zeros((n, a), np.float32)}
    for row, (_, s) in enumerate(steps):
        p, r = len(s.prompt_ids), len(s.response_ids)
        out["tokens"][row, :p + r] = s.prompt_ids + s.response_ids
        out["attention_mask"][row, :p + r] = True
        out["action_mask"][row, p:p + r] = True
        out["old_logp"][row, p:p + r] = s.response_logprobs
        out["resp_pos"][row, :r] = np.arange(p, p + r)
        out["resp_mask"][row, :r] = True
        out["resp_old_logp"][row, :r] = s.response_logprobs
        out["latent_pos"][row, :len(s.latent_pos)] = s.latent_pos[:k]
        out["h"][row], out["p_bar"][row] = s.h, s.p_bar
        out["tree_action"][row], out["tree_logp"][row] = s.tree_action, s.tree_logp
        out["tree_mask"][row] = s.tree_mask
    return out


__all__ = ["ActiveMem", "PolicyConfig", "RolloutResult", "Step", "Trajectory", "collate",
           "repeat_tasks", "request_seed"]
