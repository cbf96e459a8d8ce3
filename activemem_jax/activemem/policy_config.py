"""ActiveMem's policy configuration and the records a rollout keeps (one `Step` per turn).

    cfg = PolicyConfig(num_latents=4, capacity=1024)     # or PolicyConfig.from_dict(config.policy)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from activemem_jax.activemem.step import StepConfig

SCOPES = ("persistent", "episode", "stream")
IDLE = ("keep", "decay")
STARTS = ("zero", "first")
DESCEND = ("threshold", "closer")
POOLS = ("mean", "leaf")
STEP_MODES = ("turn", "delimiter")
SEARCH_TURNS = ("read", "all")


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
    num_latents: int = 4           # K; 0 = w/o latent injection
    hidden: int = 512
    latent_init_std: float = 1e-3  # latent head kernel init (its bias starts at the placeholder embedding)
    activation: str = "gelu"
    layout: str = "constant"       # constant (MEM1) | full (plain full-history baseline) |
                                   # observation (newest observation only: no text across turns)
    latent_slots: str = "before_observation"  # | after_observation (no double prefill);
                                              # docs/design_memory.md#latent-injection
    system_prompt: str = "default"  # the chat's system message; "default": the template's own
    use_tree: bool = True          # False = w/o HLMT
    tree_actions: bool = True      # False = w/o tree action head (the threshold rule acts)
    maintenance: bool = True       # False = w/o merge/delete
    tree_scope: str = "persistent"  # one tree across episodes | a fresh tree per episode | one tree per
                                    # stream of episodes (activemem/streams.py; tasks carry "stream")
    stream_slots: int = 16         # tree_scope='stream': trees kept at once (streams in flight)
    capacity: int = 1024
    max_children: int = 16
    max_depth: int = 8
    max_ops: int = 16              # op-log entries per episode
    tau_stop: float = 0.6          # calibrated to the query space below (memory/query_space.py)
    tau_merge: float = 0.9
    path_pool: str = "mean"        # p_bar: the path's mean (paper) | "leaf": its last node (a path
                                   # through a group keeps one node's value, not the group's blend)
    descend: str = "threshold"     # the search steps to the best child while its cosine >= tau_stop;
                                   # "closer": and while it is closer to the query than its parent
    max_write_residual: float = 0.5  # cap on |W_ins u| and |W_upd u| (controller.py says why)
    key_head: bool = False         # a learned retrieval key k = normalize(q + W_key q) (SFT trains it
                                   # on the environment's observation keys: train.key_coef)
    query_components: int = 4      # top principal directions removed from the query space
    query_window: int = 4096       # observations in the running mean, then an EMA
    query_fold: bool = True        # fold each rollout's observations into the query space at commit
                                   # (False: the space stays as calibrated; stationary for training)
    max_obs_tokens: int = 512      # an observation longer than this is read by its last tokens
    ema_beta: float = 0.1
    prune_fraction: float = 0.05
    idle_utility: str = "keep"     # a node no activation reached this episode: keep its utility EMA, or
                                   # "decay" it (S = 0), so memories that are no longer read get pruned
    utility_start: str = "zero"    # S_EMA of a node never activated before: starts at 0 (the EMA's
                                   # prior) | "first": its first episode's S sets it (docs/design_memory.md#maintenance)
    credit_writes: bool = False    # a node the episode inserted counts as activated by it (credited
                                   # with its return), so a fresh memory is not ranked as never used
    max_tokens: int = 128          # per turn
    temperature: float = 1.0       # train 1.0; eval 0.01 (paper 6.1)
    tree_temperature: float = 1.0  # tree-head exploration: sampled (GRPO) rollouts draw from softmax(logits / T)
                                   # and the tree term scores that distribution (greedy evaluation and
                                   # SFT are unchanged): T > 1 keeps a confident SFT head trying others
    search_temperature: float = 0.0  # > 0: sampled (GRPO) rollouts sample the tree search at this
                                   # temperature over the children's key cosines and stop (tau_stop),
                                   # and GRPO credits the path it took (train.search_coef; memory/_search.py);
                                   # 0: the greedy search everywhere. Greedy evaluation and SFT search greedily
    search_turns: str = "read"     # the turns that sample it: those whose response the environment reads
                                   # (env.reads_response: questions; every turn where it does not say) | "all"
    top_p: float = 1.0
    stop: tuple = ("</search>", "</answer>")
    step_mode: str = "turn"        # turn: one agent turn per step; delimiter: single-shot tasks,
    delimiter: str = "\n\n"        # a step ends at the delimiter (wrap the env in SegmentedEnv)
    action_format: str = ""        # "": free text | "tags": every turn decoded under the environment's
                                   # action regex (env.action_pattern: the QA envs' <think>..</think> then
                                   # <search>..</search> or <answer>..</answer>) | any other text: that regex

    def __post_init__(self):
        if self.step_mode not in STEP_MODES:
            raise ValueError(f"policy.step_mode={self.step_mode!r}: use one of {STEP_MODES}")
        if self.step_mode == "delimiter" and not self.delimiter:
            raise ValueError("policy.step_mode='delimiter' needs a non-empty policy.delimiter")
        if self.tree_scope not in SCOPES:
            raise ValueError(f"policy.tree_scope={self.tree_scope!r}: use one of {SCOPES}")
        if self.path_pool not in POOLS:
            raise ValueError(f"policy.path_pool={self.path_pool!r}: use one of {POOLS}")
        if self.descend not in DESCEND:
            raise ValueError(f"policy.descend={self.descend!r}: use one of {DESCEND}")
        if self.utility_start not in STARTS:
            raise ValueError(f"policy.utility_start={self.utility_start!r}: use one of {STARTS}")
        if self.idle_utility not in IDLE:
            raise ValueError(f"policy.idle_utility={self.idle_utility!r}: use one of {IDLE}")
        if not self.tree_temperature > 0:
            raise ValueError(f"policy.tree_temperature={self.tree_temperature}: need > 0 (1 = the head as is)")
        if not self.search_temperature >= 0:
            raise ValueError(f"policy.search_temperature={self.search_temperature}: need >= 0 (0 = greedy search)")
        if self.search_turns not in SEARCH_TURNS:
            raise ValueError(f"policy.search_turns={self.search_turns!r}: use one of {SEARCH_TURNS}")
        if self.stream_slots < 1:
            raise ValueError(f"policy.stream_slots={self.stream_slots}: need >= 1")
        if self.max_ops < 1:
            raise ValueError(f"policy.max_ops={self.max_ops}: need >= 1")
        if self.capacity < 2:
            raise ValueError(f"policy.capacity={self.capacity}: need >= 2 (the root and one node)")
        if self.num_latents not in (0, 1, 2, 4, 8):
            raise ValueError(f"policy.num_latents={self.num_latents}: use 0, 1, 2, 4 or 8")
        if self.max_depth < 1 or self.max_children < 1:
            raise ValueError(f"policy.max_depth={self.max_depth} and policy.max_children="
                             f"{self.max_children}: need >= 1")
        if not isinstance(self.action_format, str):
            raise ValueError(f"policy.action_format={self.action_format!r}: '' (off), 'tags' or a regex")
        if self.query_components < 0:
            raise ValueError(f"policy.query_components={self.query_components}: need >= 0")

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
    def system(self):
        """The system message to render (None: the chat template's default)."""
        return None if self.system_prompt == "default" else self.system_prompt

    @property
    def step_config(self) -> StepConfig:
        return StepConfig(use_tree=self.use_tree, tree_actions=self.tree_actions,
                          tau_stop=self.tau_stop, tau_merge=self.tau_merge, closer=self.descend == "closer",
                          pool=self.path_pool, tree_temperature=self.tree_temperature,
                          search_temperature=self.search_temperature)


@dataclasses.dataclass
class Step:
    prompt_ids: list[int]
    latent_pos: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    text: str
    observation: str            # what the env returned after this turn
    h: np.ndarray               # [d] the read observation's last-token state
    p_bar: np.ndarray           # [d]
    tree_action: int
    tree_logp: float
    tree_mask: np.ndarray       # [3] bool
    path: np.ndarray            # [max_depth] int32: persistent slots after commit (-1 pad)
    reward: float = 0.0
    scored: bool = True         # False: the env does not score this response (no token loss)
    q: np.ndarray = None        # [d] unit query vector of the read observation
    pooled: np.ndarray = None   # [d] its token-mean state (folded into the query space)
    path_emb: np.ndarray = None     # [max_depth, d] path nodes when retrieved
    writer_turn: np.ndarray = None  # [max_depth] turn of this episode that last wrote each node
    writer_op: np.ndarray = None    # [max_depth] OP_INSERT / OP_UPDATE of that write (0 none)
    writer_prev: np.ndarray = None  # [max_depth, d] the node before that update
    path_len: int = 0               # nodes retrieved (0: an empty path)
    obs_key: str = ""               # the environment's name for what the observation is about
                                    # (env.observation_key; "" none): the key head's loss groups by it
    search_emb: np.ndarray = None   # [L, C, d] a sampled search's candidates per level (L = 0: greedy)
    search_ok: np.ndarray = None    # [L, C] bool
    search_pick: np.ndarray = None  # [L] the choice per level (C stop, -1 not reached)
    rule_action: int = 0            # the threshold rule's action on this state (SFT's head target
                                    # with train.sft_head="rule")
    credit_path: np.ndarray = None  # [max_depth] the path's node identities a GRPO group shares:
                                    # a snapshot node's slot, capacity + t for a node this rollout
                                    # last wrote at turn t (streams.credit_ids); what the
                                    # hierarchical advantage credits


@dataclasses.dataclass
class Trajectory:
    task: dict
    uid: int
    steps: list[Step]
    reward: float = 0.0
    info: dict = dataclasses.field(default_factory=dict)
    peak_tokens: int = 0
    dependency_length: float = 0.0
    time_s: float = 0.0     # wall time to the episode's end, compilation excluded
    compile_s: float = 0.0  # compilation during the episode (not in time_s)


__all__ = ["PolicyConfig", "SCOPES", "STEP_MODES", "Step", "Trajectory"]
