"""The HyMem orchestrator: planner, executor, isolated reasoning and memory manager in
separate context spaces; only typed returns cross their boundaries (paper section 3).

    agent = HyMemAgent(client, toolbox, HyMemConfig())
    result = agent.run(question)   # Result(answer, confidence, trace, usage)

Fold trigger (Eq. 17, docs/design_hymem.md#memories-and-folds): every counter counts since the
last fold, consecutive executor failures included; context utilization is the token count
of the planner prompt the next call would send (`client.count_tokens` when the client has
it, else the prompt's characters at the tokens-per-character rate of the run's last real
call). Fold (Eq. 13): each memory is rewritten from its previous value and the histories
(`hymem.memory.fold`).
Distillation (Eq. 8): a tool observation reaches the executor as phi(o | d), the rule
filter's text distilled by the auxiliary client (`aux`, by default the main one) for
the executor's directive d (`hymem.distill`).
Context guard: an executor or isolated session whose next prompt would not fit the
context window ends there and returns what it has.

Ablations (paper Table 2): `isolated_reasoning=False` takes the isoReason option out of
the planner's prompt (an <isoReason> it writes anyway is an invalid action);
`memory_management=False` has no memories and no folds: the planner's prompt does not
mention memory or <to_memory>, its history is kept whole and, only when the next prompt
would pass the context window, its oldest exchanges are dropped. The executor and
isolated sessions stay isolated in both.

Constrained decoding (`constrained`: "auto" | "on" | "off"): when on, the planner's turns,
the executor's, the isolated sessions' and the forced answer turn are each sent with the
Lark grammar of their protocol (`hymem.grammars`, as the sampling key `guided_grammar`),
so an endpoint that decodes under it can only write a valid action of that turn, with
bounded free text. "auto" is on when the client says its endpoint takes it
(`client.supports_constraints()`: this project's own server and the in-process engine),
off otherwise; memory folds and distillation stay unconstrained. The default is "off": the
baselines (ReAct, Summary, ...) decode unconstrained, so an evaluation that turns it on for
HyMem alone compares two decodings, not two agents; `python -m hymem` defaults to "auto".
"""

from __future__ import annotations

import dataclasses
import json
from typing import Callable, Optional

from hymem import grammars, prompts
from hymem.distill import Distiller
from hymem.events import (Answer, ContextGuard, ContextTruncated, Event, Fold, ForcedAnswer, InvalidAction,
                          PlannerTurn)
from hymem.memory import Memories, fold
from hymem.parsing import parse_executor, parse_iso, parse_planner, parse_results
from hymem.protocol import Result, RunState, agent_fields, register
from hymem.tools import Toolbox


@dataclasses.dataclass
class HyMemConfig:
    planner_turns: int = 12
    execute_turns: int = 10
    max_iso_reasoning: int = 5
    max_iso_reasoning_turn: int = 3
    context_window: int = 32768  # planner tokens; utilization > fold_utilization folds
    fold_utilization: float = 0.99
    fold_executor_calls: int = 5
    fold_executor_failures: int = 3
    fold_planner_turns: int = 8
    fold_tool_calls: int = 10
    recent_turns: int = 4  # tau(H): planner messages an isoReason inherits
    isolated_reasoning: bool = True  # ablation "w/o isolated reasoning"
    memory_management: bool = True  # ablation "w/o memory management"
    model_distill: bool = True  # phi(o | d) by the auxiliary model after the rule filter; False: rules only
    sampling: dict = dataclasses.field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 1024})
    constrained: str = "off"  # on | off | auto: on when the client's endpoint takes grammars (module doc);
    # off by default so an evaluation compares HyMem with baselines decoded the same way (the CLI: auto)


CONSTRAINED = ("auto", "on", "off")


def constraints_on(mode: str, client) -> bool:
    """Whether turns go out with their grammar: mode "on"/"off" as said; "auto" asks the
    client (`supports_constraints()`; a client without it, or one that fails to answer, is
    off)."""
    if mode not in CONSTRAINED:
        raise ValueError(f"constrained={mode!r}: use one of {', '.join(CONSTRAINED)}")
    if mode != "auto":
        return mode == "on"
    probe = getattr(client, "supports_constraints", None)
    try:
        return bool(probe()) if callable(probe) else False
    except Exception:
        return False


@dataclasses.dataclass
class FoldMark:
    """The counters at the last fold (Eq. 17 counts since then)."""
    executor_calls: int = 0
    tool_calls: int = 0
    planner_turn: int = 0


@dataclasses.dataclass
class HyMemRun(RunState):
    """One task's state across the planner, executor, isolated and memory spaces."""
    memories: Memories = dataclasses.field(default_factory=Memories)
    last_tokens: dict = dataclasses.field(default_factory=dict)  # space -> tokens of its last call
    executor_calls: int = 0
    executor_failures: int = 0  # consecutive; a fold resets it
    tool_calls: int = 0
    planner_turn: int = 0
    iso_used: int = 0
    tool_log: list = dataclasses.field(default_factory=list)
    executor_summaries: list = dataclasses.field(default_factory=list)
    iso_summaries: list = dataclasses.field(default_factory=list)
    tokens_per_char: float = 0.3  # until a call reports its prompt tokens
    since_fold: FoldMark = dataclasses.field(default_factory=FoldMark)


class HyMemAgent:
    persistent_space = "planner"

    def __init__(self, client, tools: Toolbox, config: Optional[HyMemConfig] = None, aux=None,
                 on_event: Optional[Callable[[Event], None]] = None):
        """aux: the auxiliary model's client (phi(o | d)); None: the main client.
        on_event(event): called with each trace event as it happens (the CLI's progress)."""
        self.client, self.tools, self.config = client, tools, config or HyMemConfig()
        self.on_event = on_event
        self._distill = Distiller((aux or client) if self.config.model_distill else None)
        cfg = self.config  # an ablated planner is told only of the actions it has (Table 2)
        self._planner_system = prompts.planner_prompt(cfg.isolated_reasoning, cfg.memory_management)
        self._planner_correction = prompts.planner_correction(cfg.isolated_reasoning, cfg.memory_management)
        if cfg.constrained not in CONSTRAINED:
            raise ValueError(f"hymem.constrained={cfg.constrained!r}: use one of {', '.join(CONSTRAINED)}")
        self._constrained: Optional[bool] = None  # resolved at the first constrained turn
        self._grammars: dict = {}

    def _grammar(self, kind: str) -> Optional[str]:
        """The grammar a `kind` turn is sent with (None: constraints off)."""
        if self._constrained is None:
            self._constrained = constraints_on(self.config.constrained, self.client)
        if not self._constrained:
            return None
        if kind not in self._grammars:
            cfg = self.config
            self._grammars[kind] = grammars.for_turn(kind, self.tools, cfg.isolated_reasoning, cfg.memory_management)
        return self._grammars[kind]

    # ------------------------------------------------------------------ model calls
    def _call(self, run: HyMemRun, messages: list, space: str, turn: Optional[str] = None) -> str:
        """turn: the turn kind whose grammar the call carries when constraints are on."""
        grammar = self._grammar(turn) if turn else None
        sampling = {**self.config.sampling, "guided_grammar": grammar} if grammar else self.config.sampling
        out = run.call(self.client, messages, space, sampling)
        run.last_tokens[space.split(":")[0]] = out.prompt_tokens + out.completion_tokens
        chars = _chars(messages)
        if out.prompt_tokens > 0 and chars > 0:
            run.tokens_per_char = out.prompt_tokens / chars
        return out.text

    def _tokens(self, run: HyMemRun, messages: list) -> int:
        """The prompt's token count: the client's own count, else an estimate at the rate
        of the last real call."""
        count = getattr(self.client, "count_tokens", None)
        if count is not None:
            try:
                return int(count(messages))
            except Exception:
                pass
        return int(_chars(messages) * run.tokens_per_char)

    def _fits(self, run: HyMemRun, messages: list, space: str) -> bool:
        """Context guard for executor and isolated sessions."""
        n = self._tokens(run, messages)
        if n <= self.config.context_window:
            return True
        run.emit(ContextGuard(space, n, self.config.context_window))
        return False

    # ------------------------------------------------------------------ executor
    def _execute(self, run: HyMemRun, directive: str) -> dict:
        """A fresh executor context: the directive and tool memory only. Returns the typed
        result; raw observations stay inside."""
        cfg = self.config
        run.executor_calls += 1
        tool_memory = run.memories.render(("tool",)) if cfg.memory_management else ""
        messages = [{"role": "system", "content": prompts.EXECUTOR.format(tools=self.tools.describe())},
                    # stable text first (tool memory changes only at a fold): the prefix cache
                    # serves it to every executor session between two folds
                    {"role": "user", "content": (f"{tool_memory}\n\n" if tool_memory else "")
                                                + f"Search target: {directive}"}]
        result = None
        for turn in range(cfg.execute_turns):
            if not self._fits(run, messages, "executor"):
                result = {"findings": "", "evidence": "", "sources": "", "status": "failed",
                          "gaps": f"the executor context was full after {turn} turns"}
                break
            text = self._call(run, messages, "executor", "executor")
            messages.append({"role": "assistant", "content": text})
            action = parse_executor(text)
            if action.kind == "results":
                result = parse_results(action.results)
                break
            if action.kind == "invalid":
                run.emit(InvalidAction("executor", action.reason[:200]))
                messages.append({"role": "user", "content": prompts.EXECUTOR_CORRECTION.format(why=action.reason)})
                continue
            ok, raw, args = run.tool(self.tools, action)
            run.tool_calls += 1
            run.tool_log.append({"tool": action.name[:100], "arguments": args, "ok": ok})
            seen = (self._distill(raw, directive, run.usage, run.trace) if ok
                    else f"TOOL FAILED: {raw.splitlines()[0][:300] if raw else 'error'}")
            messages.append({"role": "user", "content": f"<observation>{seen or 'No usable content.'}</observation>"})
        if result is None:
            result = {"findings": "", "evidence": "", "sources": "", "status": "failed",
                      "gaps": f"no results within {cfg.execute_turns} executor turns"}
        # consecutive failures; a fold resets the count (Eq. 17: since the last fold)
        run.executor_failures = run.executor_failures + 1 if result["status"] == "failed" else 0
        run.executor_summaries.append(f"{directive} -> {result['status']}: {result['findings'][:300]}")
        return result

    @staticmethod
    def _render_results(result: dict) -> str:
        return ("<results>\n" + "\n".join(f"{k.upper()}: {v}" for k, v in result.items()) + "\n</results>")

    # ------------------------------------------------------------------ isolated reasoning
    def _iso(self, run: HyMemRun, objective: str, planner_history: list) -> dict:
        cfg = self.config
        recent = planner_history[-cfg.recent_turns:]
        state = "\n".join(f"[{m['role']}] {m['content']}" for m in recent)
        messages = [{"role": "system", "content": prompts.ISO_REASON},
                    {"role": "user", "content": f"Question (MAIN): {run.question}\n\n"
                                                f"{run.memories.render()}\n\nRecent MAIN state:\n{state}\n\n"
                                                f"Assigned reasoning objective: {objective}"}]
        ret = None
        for turn in range(cfg.max_iso_reasoning_turn):
            if not self._fits(run, messages, "iso"):
                ret = {"conclusion": "no conclusion: the isolated context was full", "key_evidence": "",
                       "confidence": 0.0, "notes": f"context window reached after {turn} turns"}
                break
            text = self._call(run, messages, "iso", "iso")
            messages.append({"role": "assistant", "content": text})
            kind, value = parse_iso(text)
            if kind == "return":
                ret = value
                break
            if kind == "task":
                messages.append({"role": "user", "content": self._render_results(self._execute(run, value))})
            else:
                run.emit(InvalidAction("iso", str(value)[:200]))
                messages.append({"role": "user", "content": prompts.ISO_CORRECTION})
        if ret is None:
            ret = {"conclusion": "no conclusion within the turn budget", "key_evidence": "",
                   "confidence": 0.0, "notes": f"{cfg.max_iso_reasoning_turn} isolated turns used"}
        run.iso_summaries.append(f"{objective[:300]} -> {str(ret['conclusion'])[:300]} "
                                 f"(confidence {ret['confidence']})")
        return ret

    # ------------------------------------------------------------------ memory
    def _fold(self, run: HyMemRun, history: list, trigger: str) -> None:
        run.emit(Fold(trigger, run.planner_turn))
        text = "\n".join(f"[{m['role']}] {m['content']}" for m in history)
        recent = "\n".join(f"[{m['role']}] {m['content']}" for m in history[-self.config.recent_turns:])
        tools = json.dumps(run.tool_log[-50:], ensure_ascii=False)
        # inputs clipped to about half the window, at the run's tokens-per-character rate
        max_chars = int(0.5 * self.config.context_window / max(run.tokens_per_char, 1e-3))
        fold(run.memories, lambda msgs, space: self._call(run, msgs, space), run.question, text,
             "\n".join(run.executor_summaries[-20:]), recent, tools, run.trace.append,
             iso_summary="\n".join(run.iso_summaries[-10:]), max_input_chars=max_chars)
        history.clear()
        run.executor_failures = 0
        run.since_fold = FoldMark(run.executor_calls, run.tool_calls, run.planner_turn)

    def _slide(self, run: HyMemRun, history: list) -> None:
        """w/o memory management there is no fold: the planner keeps its whole history, and
        when the next prompt would pass the context window the oldest exchanges are dropped
        (a sliding window; nothing is summarized)."""
        limit = self.config.fold_utilization * self.config.context_window
        dropped = 0
        while len(history) > 1 and self._tokens(run, self._planner_messages(run, history)) > limit:
            del history[: 2 if len(history) > 2 else 1]
            dropped += 1
        if dropped:
            run.emit(ContextTruncated(run.planner_turn, dropped))

    def _trigger(self, run: HyMemRun, history: list) -> Optional[str]:
        """Eq. 17: the first fold condition that holds, or None. Every counter counts since
        the last fold."""
        cfg, since = self.config, run.since_fold
        if self._tokens(run, self._planner_messages(run, history)) > cfg.fold_utilization * cfg.context_window:
            return "context_utilization"
        if run.executor_calls - since.executor_calls >= cfg.fold_executor_calls:
            return "executor_calls"
        if run.executor_failures >= cfg.fold_executor_failures:
            return "executor_failures"
        if run.planner_turn - since.planner_turn >= cfg.fold_planner_turns:
            return "planner_turns"
        if run.tool_calls - since.tool_calls >= cfg.fold_tool_calls:
            return "tool_calls"
        return None

    # ------------------------------------------------------------------ planner
    def _planner_messages(self, run: HyMemRun, history: list) -> list:
        mem = run.memories.render() if self.config.memory_management else ""
        return ([{"role": "system", "content": self._planner_system},
                 {"role": "user", "content": f"Question: {run.question}" + (f"\n\n{mem}" if mem else "")}]
                + history)

    def run(self, question: str) -> Result:
        cfg = self.config
        run = HyMemRun(question, listener=self.on_event)
        history: list[dict] = []
        answer, confidence = None, None
        while run.planner_turn < cfg.planner_turns and answer is None:
            if not cfg.memory_management:
                self._slide(run, history)
            text = self._call(run, self._planner_messages(run, history), "planner", "planner")
            run.planner_turn += 1
            history.append({"role": "assistant", "content": text})
            action = parse_planner(text)
            did = action.kind if action.kind != "invalid" else f"invalid: {action.reason[:80]}"
            if action.kind == "answer":
                answer, confidence = action.content, action.confidence
            elif (action.kind == "iso" and not cfg.isolated_reasoning) or (
                    action.kind == "fold" and not cfg.memory_management):  # not offered: invalid
                did = f"invalid: {action.kind} is not available"
                run.emit(InvalidAction("planner", f"{action.kind} is not available in this configuration"))
                history.append({"role": "user", "content": self._planner_correction})
            elif action.kind == "task":
                history.append({"role": "user", "content": self._render_results(self._execute(run, action.content))})
            elif action.kind == "iso":
                if run.iso_used >= cfg.max_iso_reasoning:
                    history.append({"role": "user", "content": "isoReason is not available (budget used); "
                                                               "use <task> or answer."})
                else:
                    run.iso_used += 1
                    ret = self._iso(run, action.content, history)
                    history.append({"role": "user", "content": "<return>\n" + "\n".join(
                        f"{k.upper().replace('_', ' ')}: {v}" for k, v in ret.items()) + "\n</return>"})
            elif action.kind == "fold":
                self._fold(run, history, "to_memory")
            else:
                run.emit(InvalidAction("planner", action.reason[:200]))
                history.append({"role": "user", "content": self._planner_correction})
            run.emit(PlannerTurn(run.planner_turn, run.last_tokens.get("planner", 0), run.total_tokens(),
                                 len(history), did))
            if answer is None and action.kind != "fold" and cfg.memory_management:
                trigger = self._trigger(run, history)
                if trigger:
                    self._fold(run, history, trigger)
        if answer is None:  # one forced-answer turn; an unparsable reply is no answer (strict)
            messages = self._planner_messages(run, history) + [{"role": "user", "content": prompts.FORCE_ANSWER.format(
                question=run.question)}]
            text = self._call(run, messages, "planner", "forced")
            action = parse_planner(text)
            answer = action.content if action.kind == "answer" else ""
            confidence = action.confidence if action.kind == "answer" else None
            run.emit(ForcedAnswer(action.kind == "answer", text, _forced_why(action, text)))
        run.emit(Answer(answer, confidence, run.planner_turn, run.memories.folds))
        return run.result(answer, confidence)


def _forced_why(action, text: str) -> str:
    """What the parser found in the forced turn."""
    if action.kind == "answer":
        return "the forced turn wrote an <answer>"
    if not str(text).strip():
        return "the forced turn returned no text"
    if action.kind == "invalid":
        return ("no <answer> tag in the forced turn" if action.reason == "no action"
                else f"no single <answer> in the forced turn ({action.reason})")
    return f"the forced turn wrote a {action.kind} action instead of an <answer>"


def _chars(messages: list) -> int:
    return sum(len(str(m.get("content", ""))) for m in messages)


@register("hymem", "hymem_no_iso", "hymem_no_memory", section=("hymem", HyMemConfig))
def _build(name, client, tools, config, aux):
    """HyMem and the ablations of Table 2; config section `hymem` (HyMemConfig fields)."""
    fields = agent_fields(config, "hymem")
    fields.update({"hymem_no_iso": {"isolated_reasoning": False},
                   "hymem_no_memory": {"memory_management": False}}.get(name, {}))
    return HyMemAgent(client, tools, HyMemConfig(**fields), aux=aux)
