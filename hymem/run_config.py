"""The typed schema of an agent-evaluation config (`configs/agents_synthetic.py`,
`launch.eval_agents`), checked once, at load, as ActiveMem's run configs are
(`activemem_jax.schema`).

It shares that schema's sections where both have the thing: `engine` (the in-process
engine), `data` (the task family and its files: the same fields an ActiveMem
training or evaluation config uses, `activemem_jax.schema.Data`). What only the agent
harness has: `model` (an OpenAI-compatible endpoint, or the in-process model's path and
precision), `aux` (the auxiliary model of phi(o | d)), and one section per agent family
(`hymem`, `baselines`, `base`, `amem`, `thread`), whose fields are checked against the
agents' own config dataclasses, so a misspelt field stops the run here instead of
failing every task of that agent.

    run = load(cfg)    # an AgentsRun; a ConfigError names the first bad field
"""

from __future__ import annotations

import dataclasses
import typing

from activemem_jax.schema import ConfigError, Data, Engine, _need, _top, _typed, section


@dataclasses.dataclass(frozen=True)
class Endpoint:
    base_url: str = ""            # an OpenAI-compatible endpoint; "": the in-process engine on `path`
    name: str = ""                # the endpoint's model name
    api_key: str = ""
    path: str = "embedded"        # in-process model: a checkpoint path or "embedded"
    dtype: str = "float32"        # in-process precision (activemem_jax.schema.Model's fields)
    activation_dtype: str = ""
    quant: str = ""
    timeout: float = 600.0        # seconds per HTTP call
    retries: int = 2              # transient errors retried with backoff backoff_s, 2 x backoff_s, ...
    backoff_s: float = 1.0
    max_consecutive_failures: int = 3  # failed calls in a row that stop the run (a dead server)

    def check(self) -> None:
        from activemem_jax.schema import Model

        Model(dtype=self.dtype, activation_dtype=self.activation_dtype, quant=self.quant).check()
        _need(self.timeout > 0, f"model.timeout={self.timeout}: need > 0 seconds")
        _need(self.retries >= 0, f"model.retries={self.retries}: need >= 0")
        _need(self.backoff_s >= 0, f"model.backoff_s={self.backoff_s}: need >= 0")
        _need(self.max_consecutive_failures >= 1,
              f"model.max_consecutive_failures={self.max_consecutive_failures}: need >= 1")


@dataclasses.dataclass(frozen=True)
class Aux:
    base_url: str = ""            # "": the main model serves phi(o | d) too
    name: str = ""
    api_key: str = ""
    timeout: float = 600.0


def agent_sections() -> dict:
    """{config section: the agents' config dataclass that reads it}, as each agent
    registered it (`hymem.protocol.register(..., section=...)`)."""
    from hymem.protocol import config_sections

    return config_sections()


@dataclasses.dataclass(frozen=True)
class AgentsRun:
    """A checked agent-evaluation config."""
    agents: tuple
    model: Endpoint
    engine: Engine
    data: Data
    aux: Aux
    agent_config: dict            # {section: its fields}, each checked against its dataclass
    sampling: dict
    trials: int = 1
    concurrency: int = 8
    out_dir: str = ""


SECTIONS = {"model": Endpoint, "engine": Engine, "data": Data, "aux": Aux}
TOP_LEVEL = {"agents": tuple, "trials": int, "concurrency": int, "out_dir": str}
SAMPLING = {"temperature": float, "top_p": float, "max_tokens": int, "seed": int, "stop": tuple}


def _as_dict(values, name: str) -> dict:
    if hasattr(values, "to_dict"):
        values = values.to_dict()
    _need(isinstance(values, dict), f"{name}: a section of fields, not {values!r}")
    return dict(values)


def _agent_fields(cls: type, values, name: str) -> dict:
    values = _as_dict(values, name)
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(known))
    _need(not unknown, f"{name}.{unknown[0] if unknown else ''}: no such field of {cls.__name__} "
                       f"(known: {', '.join(known)})")
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        kind = hints[key]
        ok = (isinstance(value, bool) if kind is bool else
              isinstance(value, int) and not isinstance(value, bool) if kind is int else
              isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else
              isinstance(value, str) if kind is str else True)
        _need(ok, f"{name}.{key}={value!r}: need {getattr(kind, '__name__', kind)}")
    return values


def load(cfg) -> AgentsRun:
    """cfg (an agents ConfigDict or dict) checked and typed; a ConfigError names the first
    bad field. Sections it lacks take their defaults."""
    from hymem.protocol import names

    get = cfg.get
    for old, new in (("benchmark", "data"), ("retrieval_url", "data.retrieval_url")):
        _need(get(old) is None, f"{old}: renamed {new} (the task family and its files are named as ActiveMem's "
                                f"configs name them: --config.data.name=..., --config.data.retrieval_url=...)")
    agent_secs = agent_sections()
    top = _top(cfg, TOP_LEVEL, {**SECTIONS, **agent_secs, "sampling": dict})
    parts = {name: section(cls, get(name) or {}, name) for name, cls in SECTIONS.items()}
    agent_config = {name: _agent_fields(cls, get(name) or {}, name) for name, cls in agent_secs.items()}
    sampling = _as_dict(get("sampling") or {}, "sampling")
    unknown = sorted(set(sampling) - set(SAMPLING))
    _need(not unknown, f"sampling.{unknown[0] if unknown else ''}: no such field (known: {', '.join(SAMPLING)})")
    sampling = {k: v if v is None else _typed(v, SAMPLING[k], f"sampling.{k}") for k, v in sampling.items()}
    top.setdefault("agents", ())
    run = AgentsRun(agent_config=agent_config, sampling=sampling, **parts, **top)
    registered = names()
    bad = [a for a in run.agents if a not in registered]
    _need(run.agents and not bad, f"agents={run.agents}: {bad[0] if bad else 'none given'} is not a registered "
                                  f"agent (registered: {', '.join(registered)})")
    mode = agent_config.get("hymem", {}).get("constrained", "off")
    _need(mode in ("auto", "on", "off"), f"hymem.constrained={mode!r}: use one of auto, on, off")
    _need(run.trials >= 1, f"trials={run.trials}: need >= 1")
    _need(run.concurrency >= 1, f"concurrency={run.concurrency}: need >= 1")
    for key, low in (("temperature", 0), ("max_tokens", 1)):
        _need(sampling.get(key) is None or sampling[key] >= low, f"sampling.{key}={sampling.get(key)}: need >= {low}")
    return run


__all__ = ["AgentsRun", "Aux", "ConfigError", "Endpoint", "agent_sections", "load"]
