"""Memory-augmented rollouts (docs/design_memory.md#rollout-and-commit): a batch of episodes in lockstep.

    policy = ActiveMem(model, engine, PolicyConfig(num_latents=4))
    result = policy.rollout(env, tasks, seed=0)        # commits the op logs and maintains the tree
    result.trajectories[i].steps[t]                     # everything the trainer needs, per turn
    batch = collate(result.trajectories, num_latents=4) # padded arrays for the training forward

Per turn, for every live episode: render the prompt (K placeholders before the newest
observation), read the newest observation with the frozen backbone (`observe.py`: h_t at
its last token, q_t its centred, projected token mean), traverse the episode's overlay
(the frozen snapshot plus its pending nodes) with q_t, run the controller -> m_t and a
masked tree action, generate the turn with m_t spliced in, step the environment. At the
end (`commit.py`) the op logs are committed to the persistent tree, the activated paths
credited with the episode returns, the maintenance (EMA, prune, merge) runs, and the
observations are folded into the query space. `result.stats` holds the tree telemetry.

A query space with no observations yet is first calibrated on the environment's
`sample_observations()` (or the task prompts), so the first rollout already searches a
centred space.

Seeds depend on (seed, episode uid, turn) only, so an episode's rollout is the same in
any batch. G samples per prompt: `repeat_tasks(tasks, G)` (uids keep them distinct).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional, Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from activemem_jax import metrics
from activemem_jax.metrics import compile_clock
from activemem_jax.activemem.collate import collate
from activemem_jax.activemem import streams as stream_trees
from activemem_jax.activemem.commit import finish, finish_episodes, finish_groups, telemetry
from activemem_jax.activemem.controller import Controller
from activemem_jax.activemem.layout import PromptLayout
from activemem_jax.activemem.observe import ObservationEncoder
from activemem_jax.activemem.policy_config import PolicyConfig, Step, Trajectory
from activemem_jax.activemem.step import controller_step
from activemem_jax.engine import SamplingParams
from activemem_jax.memory import query_space as qs
from activemem_jax.memory import tree as hlmt
from activemem_jax.shapes import pow2

@flax.struct.dataclass
class RolloutResult:
    trajectories: list = flax.struct.field(pytree_node=False)
    logs: hlmt.OpLog          # [E] per-episode op logs (overlay slots / references)
    overlay_paths: jax.Array  # [E, turns, max_depth] paths in overlay slots
    committed: bool = flax.struct.field(pytree_node=False, default=False)
    stats: dict = flax.struct.field(pytree_node=False, default=None)  # tree telemetry (commit)
    snapshots: hlmt.Tree = None  # tree_scope='stream': [E] the trees the episodes started from
    slots: tuple = flax.struct.field(pytree_node=False, default=None)  # their stream store slots
    store: stream_trees.StreamStore = None  # the store with those slots assigned (committed with the trees)
    group_size: int = flax.struct.field(pytree_node=False, default=1)


@dataclasses.dataclass
class _Scripted:
    token_ids: list
    logprobs: list


EXPERT_ACTIONS = {"none": 0, "insert": 1, "update": 2}


def repeat_tasks(tasks: Sequence[dict], group_size: int) -> list[dict]:
    """Each task G times in a row (a GRPO group per prompt)."""
    return [t for t in tasks for _ in range(group_size)]


def request_seed(seed: int, uid: int, turn: int) -> int:
    return int(np.random.SeedSequence([seed, uid, turn]).generate_state(1)[0] & 0x7FFFFFFF)


def _stack(trees: Sequence, n: int):
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), trees)


CHARS_PER_TOKEN = 3  # policy.action_format="tags": free-text characters per token of the turn's budget


def action_constraint(config: PolicyConfig, env):
    """The constraint every turn of a rollout is decoded under (policy.action_format): None
    when off (""); "tags": the environment's action regex (`env.action_pattern`, the QA
    environments'; an environment without one is a ValueError), its free text bounded to
    CHARS_PER_TOKEN x policy.max_tokens characters so a turn closes its tags before its
    token budget; any other text: that regex. The engine applies it as a token mask in the
    same jitted steps (no new shapes)."""
    fmt = config.action_format
    if not fmt:
        return None
    from activemem_jax.engine.constraints import Constraint

    if fmt == "tags":
        pattern = getattr(env, "action_pattern", None)
        if not pattern:
            raise ValueError(f"policy.action_format='tags': {type(env).__name__} has no action_pattern "
                             "(the QA environments have one); give a regex or ''")
        return Constraint.regex(pattern(CHARS_PER_TOKEN * config.max_tokens) if callable(pattern) else pattern)
    return Constraint.regex(fmt)


def _cut_at_stop(text: str, stops: Sequence[str]) -> str:
    ends = [text.find(s) + len(s) for s in stops if s in text]
    return text[: min(ends)] if ends else text


def initial_memory(config: PolicyConfig, dim: int) -> dict:
    """A fresh policy's memory, as `ActiveMem.memory_state` holds it: an empty tree, an
    empty query space, and with tree_scope 'stream' the store of empty stream trees."""
    out = {"tree": hlmt.init_tree(config.capacity, dim, config.max_children, config.max_depth),
           "query": qs.init_query_space(dim, config.query_components, config.query_window)}
    if config.tree_scope == "stream":
        out["streams"] = stream_trees.init_store(config.stream_slots, config.capacity, dim, config.max_children,
                                                 config.max_depth)
    return out


@dataclasses.dataclass(frozen=True)
class RolloutOptions:
    """How `ActiveMem.rollout` acts. greedy: argmax tree actions; tree_rule: the threshold
    rule's tree actions (SFT); temperature: the sampling temperature of the responses;
    responder(episode, turn) -> text replaces the model's generation (scripted / expert
    turns; their log-probs are recorded as 0); group_size: tasks come in groups of this many
    consecutive copies of one episode (GRPO): with tree_scope 'stream', a group reads one
    snapshot and commits one tree; tree_expert(episode, turn) -> "insert" / "update" /
    "none": an expert's tree action (SFT with the environment's writes,
    `env.expert_write`), used where the mask allows, None at a turn leaving it to the
    policy."""
    seed: int = 0
    greedy: bool = False
    temperature: float = 1.0
    tree_rule: bool = False
    responder: Optional[Callable[[int, int], str]] = None
    group_size: int = 1
    tree_expert: Optional[Callable[[int, int], str]] = None
    constraint: Any = None  # the turns' decoding constraint (policy.action_format; `action_constraint`)


@dataclasses.dataclass
class _Lockstep:
    """One rollout's episodes as they advance turn by turn (`ActiveMem._turn`)."""
    env: object
    uids: list
    task_prompts: list
    snapshots: object      # the trees the episodes started from
    overlays: object       # the snapshots plus each episode's pending nodes
    logs: object           # [E] op logs
    histories: list        # per episode: (response, observation) per turn so far
    trajs: list
    done: list
    base_key: jax.Array
    step_config: object
    observation_key: Optional[Callable] = None
    paths: list = dataclasses.field(default_factory=list)    # per turn: [E, max_depth] overlay paths
    writers: list = dataclasses.field(default_factory=list)  # per turn: the writing turn of each path node
    start: float = dataclasses.field(default_factory=time.perf_counter)
    compiled0: float = dataclasses.field(default_factory=compile_clock.seconds)

    def elapsed(self) -> tuple[float, float]:
        """(wall time without compilation, compilation) since the rollout started."""
        c = compile_clock.seconds() - self.compiled0
        return time.perf_counter() - self.start - c, c


class ActiveMem:
    """The frozen backbone + controller + persistent latent memory tree."""

    def __init__(self, model, engine, config: PolicyConfig = PolicyConfig(), *,
                 controller: Optional[Controller] = None, seed: int = 0):
        self.model, self.engine, self.config = model, engine, config
        d = model.config.hidden_size
        self.layout = PromptLayout(model.tokenizer, config.num_latents, config.layout,
                                   slots=config.latent_slots, system_prompt=config.system)
        if controller is None:
            emb = np.asarray(model.module.embed_tokens(jnp.asarray([self.layout.placeholder_id])),
                             np.float32)[0]  # the placeholder's own embedding (dequantized if int8)
            controller = Controller.from_policy(d, config, latent_init=emb, rngs=nnx.Rngs(seed))
        self.graphdef, self.params = nnx.split(controller)
        self.encoder = ObservationEncoder(model, config.max_obs_tokens)
        memory = {k: self._replicated(v) for k, v in initial_memory(config, d).items()}
        self.tree, self.query, self.streams = memory["tree"], memory["query"], memory.get("streams")
        self._step = jax.jit(controller_step, static_argnums=(0, 9))
        self._finish = jax.jit(finish, static_argnums=(0,))
        self._finish_episodes = jax.jit(finish_episodes, static_argnums=(0,))
        self._finish_groups = jax.jit(finish_groups, static_argnums=(0, 1))
        self._observe = jax.jit(qs.observe)
        self._project = jax.jit(qs.project)

    # ---------------------------------------------------------------- state
    @property
    def controller(self) -> Controller:
        return nnx.merge(self.graphdef, self.params)

    def _replicated(self, x):
        """x replicated on the model's mesh: the placement the jitted steps give back, so
        the second rollout does not recompile them for a new placement."""
        return jax.device_put(x, NamedSharding(self.model.mesh, PartitionSpec()))

    def empty_tree(self) -> hlmt.Tree:
        c = self.config
        return self._replicated(hlmt.init_tree(c.capacity, self.model.config.hidden_size, c.max_children,
                                               c.max_depth))

    @property
    def memory_state(self) -> dict:
        """What a checkpoint keeps of the memory: the persistent tree (with tree_scope
        'stream', the store of stream trees too) and the query space."""
        state = {"tree": self.tree, "query": self.query}
        if self.streams is not None:
            state["streams"] = self.streams
        return state

    @memory_state.setter
    def memory_state(self, state: dict) -> None:
        self.tree = self._replicated(jax.tree.map(jnp.asarray, state["tree"]))
        self.query = self._replicated(jax.tree.map(jnp.asarray, state["query"]))
        if self.streams is not None:
            if "streams" not in state:
                raise ValueError("this memory state has no stream trees, but policy.tree_scope is 'stream'")
            self.streams = self._replicated(jax.tree.map(jnp.asarray, state["streams"]))

    def fold_observations(self, pooled) -> None:
        """Fold pooled observation states [n, d] into the query space (rows padded to a
        power of two, so few shapes compile)."""
        pooled = np.asarray(pooled, np.float32)
        n = len(pooled)
        if n == 0:
            return
        rows = pow2(n)
        x = np.zeros((rows, pooled.shape[1]), np.float32)
        x[:n] = pooled
        w = np.zeros((rows,), np.float32)
        w[:n] = 1.0
        self.query = self._observe(self.query, x, w)

    def calibrate(self, texts: Sequence[str], batch: int = 64) -> None:
        """Fold these observation texts into the query space (a fresh space's first fill)."""
        for i in range(0, len(texts), batch):
            self.fold_observations(self.encoder(list(texts[i:i + batch]))[1])

    def read(self, texts: Sequence[str]):
        """(h [n, d], pooled [n, d], q [n, d]) of observation texts."""
        h, pooled = self.encoder(texts)
        return h, pooled, np.asarray(self._project(self.query, pooled))

    # ---------------------------------------------------------------- rollout
    def rollout(self, env, tasks: Sequence[dict], *, seed: int = 0, greedy: bool = False,
                uids: Optional[Sequence[int]] = None, commit: bool = True,
                temperature: Optional[float] = None, tree_rule: bool = False,
                responder: Optional[Callable[[int, int], str]] = None, group_size: int = 1,
                tree_expert: Optional[Callable[[int, int], str]] = None) -> RolloutResult:
        """Roll out `tasks` in lockstep (the options: `RolloutOptions`); commit=False returns
        the result without committing it. Each step records the environment's name for its
        observation (`env.observation_key`) when the environment has one: what the key
        head's loss groups by."""
        c = self.config
        opts = RolloutOptions(seed=seed, greedy=greedy,
                              temperature=c.temperature if temperature is None else temperature,
                              tree_rule=tree_rule, responder=responder, group_size=group_size, tree_expert=tree_expert,
                              constraint=action_constraint(c, env))
        e = len(tasks)
        if e == 0:
            raise ValueError("rollout needs at least one task")
        uids = list(range(e)) if uids is None else [int(u) for u in uids]
        if len(uids) != e:
            raise ValueError(f"{len(uids)} uids for {e} tasks")
        check = getattr(env, "check_policy", None)  # an environment may refuse a tree that cannot solve it
        if check is not None:
            check(c, tasks)
        task_prompts = env.reset(tasks)
        if c.use_tree and float(self.query.count) == 0:
            sample = getattr(env, "sample_observations", None)
            self.calibrate(sample() if sample is not None else task_prompts)
        if e % group_size:
            raise ValueError(f"{e} tasks do not split into groups of {group_size}")
        slots = store = None
        if c.tree_scope == "stream":
            store, slots = stream_trees.assign(self.streams, tasks)  # the policy's store changes at commit
            overlays = stream_trees.gather(store, slots)
        else:
            overlays = _stack(self.tree if c.tree_scope == "persistent" else self.empty_tree(), e)
        st = _Lockstep(env=env, uids=uids, task_prompts=task_prompts, snapshots=overlays, overlays=overlays,
                       logs=_stack(hlmt.new_log(c.max_ops, self.model.config.hidden_size), e),
                       histories=[[] for _ in range(e)],
                       trajs=[Trajectory(task=t, uid=u, steps=[]) for t, u in zip(tasks, uids)], done=[False] * e,
                       base_key=jax.random.PRNGKey(seed),
                       step_config=dataclasses.replace(c.step_config, greedy=greedy, rule=tree_rule),
                       observation_key=getattr(env, "observation_key", None))
        turn = 0
        while not all(st.done) and self._turn(st, opts, turn):
            turn += 1
        for t in st.trajs:
            if not t.time_s:
                t.time_s, t.compile_s = st.elapsed()
            self._measure(t)
        overlay_paths = (jnp.stack(st.paths, axis=1) if st.paths
                         else jnp.full((e, 0, c.max_depth), -1, jnp.int32))
        writer_turns = jnp.stack(st.writers, axis=1) if st.writers else overlay_paths
        credit = np.asarray(stream_trees.credit_ids(st.snapshots.valid, overlay_paths, writer_turns, c.capacity))
        for i, t in enumerate(st.trajs):
            for j, s in enumerate(t.steps):
                s.credit_path = credit[i, j]
        result = RolloutResult(trajectories=st.trajs, logs=st.logs, overlay_paths=overlay_paths,
                               snapshots=st.snapshots if c.tree_scope == "stream" else None,
                               store=store if c.tree_scope == "stream" else None,
                               slots=tuple(int(x) for x in slots) if slots is not None else None,
                               group_size=group_size)
        return self.commit(result) if commit else result

    def _turn(self, st: "_Lockstep", opts: "RolloutOptions", turn: int) -> bool:
        """One turn of every live episode: render and read each prompt, search and act on
        the tree, generate (or take the responder's text), step the environment and record
        the Step. False when no episode was left to run (every live context was full)."""
        c, eng, env, e = self.config, self.engine, st.env, len(st.trajs)
        live = [i for i in range(e) if not st.done[i]]
        prompts = {i: self._prompt(st.task_prompts[i], st.histories[i]) for i in live}
        too_long = [i for i in live if len(prompts[i].ids) + 1 > eng.max_len]
        for i in too_long:  # the context is full: the episode ends unanswered
            st.done[i] = True
            st.trajs[i].info["context_overflow"] = True
            env.abort(i)
        live = [i for i in live if i not in too_long]
        if not live:
            return False
        d = self.model.config.hidden_size
        h, pooled, q = (np.zeros((e, d), np.float32) for _ in range(3))
        if c.use_tree or c.num_latents:  # else nothing reads the observation's states
            h[live], pooled[live], q[live] = self.read([self._observation(st.task_prompts[i], st.histories[i])
                                                        for i in live])
        keys = jax.vmap(lambda u: jax.random.fold_in(jax.random.fold_in(st.base_key, u), turn))(
            jnp.asarray(st.uids, jnp.uint32))
        live_mask = np.zeros((e,), bool)
        live_mask[live] = True
        forced = None
        if opts.tree_expert is not None:
            forced = np.full((e,), -1, np.int32)
            for i in live:
                write = opts.tree_expert(i, turn)
                forced[i] = -1 if write is None else EXPERT_ACTIONS[write]
            forced = jnp.asarray(forced)
        explore = self._search_turns(env, live, e)
        st.overlays, st.logs, out = self._step(self.graphdef, self.params, st.overlays, st.logs, jnp.asarray(h),
                                               jnp.asarray(q), keys, jnp.asarray(live_mask), jnp.int32(turn),
                                               st.step_config, forced, explore)
        st.paths.append(out.path)
        st.writers.append(out.writer_turn)
        out = jax.device_get(out)
        if opts.responder is None:
            asked = [i for i in live if self._reads_response(env, i)]
            outputs = (self._generate(prompts, asked, out.latents, st.uids, turn, opts.seed, opts.temperature,
                                      opts.constraint)
                       if asked else {})
            texts = {i: _cut_at_stop(self.model.tokenizer.decode(o.token_ids, skip_special_tokens=True),
                                     self.stop_strings) for i, o in outputs.items()}
            for i in set(live) - set(asked):  # nothing reads it: no response generated
                outputs[i], texts[i] = _Scripted([], []), ""
        else:
            texts = {i: opts.responder(i, turn) for i in live}
            outputs = {i: self._scripted(texts[i]) for i in live}
        texts = [texts.get(i, "") for i in range(e)]
        obs, rewards, dones, infos = env.step(texts)
        now, compiling = st.elapsed()
        for i in live:
            o, trajectory = outputs[i], st.trajs[i]
            trajectory.steps.append(Step(
                prompt_ids=prompts[i].ids, latent_pos=prompts[i].latent_pos,
                response_ids=list(o.token_ids), response_logprobs=list(o.logprobs),
                text=texts[i], observation=obs[i], h=h[i], p_bar=np.asarray(out.p_bar[i]),
                tree_action=int(out.action[i]), tree_logp=float(out.logp[i]),
                rule_action=int(out.rule_action[i]),
                tree_mask=np.asarray(out.mask[i]), path=np.asarray(out.path[i]),
                reward=float(rewards[i]), scored=bool(infos[i].get("scored", True)), q=q[i],
                pooled=pooled[i], path_emb=np.asarray(out.path_emb[i]),
                writer_turn=np.asarray(out.writer_turn[i]), writer_op=np.asarray(out.writer_op[i]),
                writer_prev=np.asarray(out.writer_prev[i]), path_len=int(out.path_len[i]),
                search_emb=out.search_emb[i], search_ok=out.search_ok[i], search_pick=out.search_pick[i],
                obs_key=st.observation_key(i, turn) if st.observation_key is not None else ""))
            st.histories[i].append((texts[i], obs[i]))
            trajectory.info = {**trajectory.info, **infos[i]}
            if dones[i]:
                st.done[i] = True
                trajectory.reward = float(infos[i]["reward"])
                trajectory.time_s, trajectory.compile_s = now, compiling
        return True

    def _search_turns(self, env, live, e: int):
        """[E] bool, the episodes whose search is sampled this turn (policy.search_turns
        "read": those whose response the environment reads, `env.reads_response`), or None:
        every episode (policy.search_turns "all", or an environment that does not say)."""
        reads = getattr(env, "reads_response", None)
        if self.config.search_temperature <= 0 or self.config.search_turns == "all" or reads is None:
            return None
        out = np.zeros((e,), bool)
        out[[i for i in live if reads(i)]] = True
        return jnp.asarray(out)

    def _reads_response(self, env, i: int) -> bool:
        """Whether episode i's response this turn can matter: the environment reads it
        (`env.reads_response(i)`, True when the environment does not say), or a later
        prompt shows it (every layout but "observation" carries responses forward, as do
        delimiter steps). A response nothing reads is not generated: the turn's row then
        has an empty response, which the environment does not score."""
        reads = getattr(env, "reads_response", None)
        if reads is None or self.layout.mode != "observation" or self.config.step_mode == "delimiter":
            return True
        return bool(reads(i))

    def _observation(self, task_prompt: str, history) -> str:
        """What the controller reads this turn: the newest observation (the task prompt at
        turn 0; with delimiter steps, the newest segment of the model's own answer)."""
        if not history:
            return task_prompt
        return history[-1][0] if self.config.step_mode == "delimiter" else history[-1][1]

    def _prompt(self, task_prompt: str, history):
        if self.config.step_mode == "delimiter" and history:
            return self.layout.render_continuation(task_prompt, "".join(text for text, _ in history))
        return self.layout.render(task_prompt, history)

    @property
    def stop_strings(self) -> tuple:
        c = self.config
        return ((c.delimiter,) if c.step_mode == "delimiter" else ()) + tuple(c.stop)

    def _generate(self, prompts, live, latents, uids, turn, seed, temperature, constraint=None) -> dict:
        """The live episodes' turns on the engine, m_t spliced over the placeholders."""
        c = self.config
        handles = {}
        with self.engine.batch():  # admitted together: batched prefills, fixed shapes
            for i in live:
                p = prompts[i]
                params = SamplingParams(temperature=temperature, top_p=c.top_p, max_tokens=c.max_tokens,
                                        stop=self.stop_strings, seed=request_seed(seed, uids[i], turn),
                                        constraint=constraint)
                if c.num_latents:
                    handles[i] = self.engine.submit(p.ids, params, latents=latents[i],
                                                    latent_positions=p.latent_pos)
                else:
                    handles[i] = self.engine.submit(p.ids, params)
        outputs = {i: h.result() for i, h in handles.items()}
        failed = [o.error for o in outputs.values() if o.finish_reason == "error"]
        if failed:  # never train or score on a turn the engine failed to produce
            raise RuntimeError(f"the engine failed {len(failed)} of {len(outputs)} turn requests: {failed[0]}")
        return outputs

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
    def preview(self, result: RolloutResult) -> dict:
        """The tree telemetry `commit` would report for `result` (inserts, updates, prunes,
        merges, tree size and depth), computed on a copy: the policy's tree and query space
        are left as they are. What evaluations use, so that measuring a policy never
        changes it."""
        c = self.config
        if not c.use_tree or result.overlay_paths.shape[1] == 0:
            return telemetry(result.trajectories, {}, self.tree)
        returns = jnp.asarray([t.reward for t in result.trajectories], jnp.float32)
        turns = jnp.asarray([len(t.steps) for t in result.trajectories], jnp.int32)
        tree, _, counts = self._finish_logs(result.logs, result.overlay_paths, turns, returns, result)
        return telemetry(result.trajectories, jax.device_get(counts), tree, result.logs)

    def _finish_logs(self, logs, paths, turns, returns, result: RolloutResult):
        """(tree, resolved, counts) of committing these logs: onto the persistent tree,
        each episode onto its own fresh tree (tree_scope='episode'), or each group onto its
        stream's snapshot (tree_scope='stream': trees [groups]). Assigns nothing."""
        c = self.config
        if c.tree_scope == "persistent":
            return self._finish(c, self.tree, logs, paths, turns, returns)
        if c.tree_scope == "stream":
            credit = stream_trees.snapshot_paths(result.snapshots.valid, paths)
            return self._finish_groups(c, result.group_size, result.snapshots, logs, paths, credit, turns,
                                       returns)
        return self._finish_episodes(c, self.empty_tree(), logs, paths, turns, returns)

    def commit(self, result: RolloutResult, gather: Optional[Callable] = None,
               gather_rows: Optional[Callable] = None) -> RolloutResult:
        """Commit the logs to the persistent tree, credit the activated paths with the
        episode returns, run the maintenance and fold the observations into the query
        space; steps' paths become persistent slots; `result.stats` gets the telemetry.
        gather(logs, overlay_paths, turns, returns) -> (the same for every process's
        rollouts, offset of this process's first episode) and gather_rows(x) -> every
        process's rows of x: multi-host training commits every host's rollouts in the same
        order, so all hosts keep one identical tree and query space."""
        c = self.config
        if result.committed:
            raise ValueError("this rollout is already committed")
        if not c.use_tree:
            return result.replace(committed=True, stats=telemetry(result.trajectories, {}, self.tree))
        steps = [s for t in result.trajectories for s in t.steps]
        if steps and c.query_fold:
            pooled = np.stack([s.pooled for s in steps])
            self.fold_observations(gather_rows(pooled) if gather_rows is not None else pooled)
        returns = jnp.asarray([t.reward for t in result.trajectories], jnp.float32)
        turns = jnp.asarray([len(t.steps) for t in result.trajectories], jnp.int32)
        logs, paths, offset = result.logs, result.overlay_paths, 0
        if gather is not None:
            if c.tree_scope == "stream":
                raise ValueError("policy.tree_scope='stream' keeps each process's streams on that process; "
                                 "multi-process training with stream trees is not supported yet")
            logs, paths, turns, returns, offset = gather(logs, paths, turns, returns)
        if paths.shape[1] == 0:
            return result.replace(committed=True, stats=telemetry(result.trajectories, {}, self.tree))
        tree, resolved, counts = self._finish_logs(logs, paths, turns, returns, result)
        if c.tree_scope == "persistent":
            self.tree = tree
        elif c.tree_scope == "stream":
            self.streams = stream_trees.scatter(result.store, result.slots, tree, result.group_size)
        resolved = np.asarray(resolved)[offset:offset + len(result.trajectories)]
        for i, t in enumerate(result.trajectories):
            for j, s in enumerate(t.steps):
                s.path = resolved[i, j]
        stats = telemetry(result.trajectories, jax.device_get(counts), tree, result.logs)
        return result.replace(committed=True, stats=stats)


__all__ = ["ActiveMem", "PolicyConfig", "RolloutOptions", "RolloutResult", "Step", "Trajectory", "collate",
           "repeat_tasks", "request_seed"]  # PolicyConfig, Step, Trajectory, collate: re-exported
