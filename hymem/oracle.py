"""Scripted clients over the synthetic world, for the agent benchmarks (`launch/bench_agents.py`,
`launch/bench_horizon.py`) and their tests.

- `OracleClient` plays every context space of every agent from one task's gold hop chains
  (activemem_jax/tasks/synthetic.py's tasks; `TaskSet.source` is the world), so every agent
  does the same searches and the contexts differ only by how each agent manages them;
- `PacedOracleClient` sends the oracle's replies through a real engine (each call prefills
  the agent's prompt and decodes as many tokens as the reply);
- `AccountingClient` counts each call as an engine would see it: prompt, decoded and
  uncached tokens (a `PrefixCacheModel`), and MEM1's dependency length.

Importing this module imports no JAX.
"""

from __future__ import annotations

import json
import re


class OracleClient:
    """Plays every context space from the gold hop chains of one task."""

    def __init__(self, task, world, tokenizer):
        self.task, self.world, self.tok = task, world, tokenizer
        self.hops = [h for q in task["hops"] for h in q]
        self.done_hops = 0

    def _count(self, messages) -> int:
        return sum(len(self.tok(m["content"])["input_ids"]) for m in messages)

    def _fact(self, hop) -> str:
        from activemem_jax.data.oracle import read_fact

        doc = next(d for d in self.world.documents if d["docid"] == hop["docid"])
        value = read_fact(doc, hop["entity"], hop["relation"]) if hop["relation"] else hop["entity"]
        return f"{hop['entity']}: {hop['relation'] or 'matches'} = {value}"

    def complete(self, messages, tag=None, **sampling):
        from hymem.llm import Completion

        last = messages[-1]["content"]
        answer = "<answer>" + "; ".join(a[0] for a in self.task["answers"]) + "</answer><confidence>0.9</confidence>"
        if tag == "thread":  # THREAD's root: one child thread per hop, then the answer
            if self.done_hops >= len(self.hops):
                text = "<think>every child returned</think>" + answer
            else:
                hop = self.hops[self.done_hops]
                self.done_hops += 1
                text = f"<think>delegate</think><spawn>Find the {hop['relation']} of {hop['entity']}</spawn>"
        elif tag and tag.startswith("thread:"):  # a child: search, then answer with the fact
            hop = self.hops[self.done_hops - 1]
            if "<observation>" not in last:
                text = (f'<think>search</think><tool_call>{{"name": "web_search", "arguments": '
                        f'{{"keywords": "{hop["entity"]}"}}}}</tool_call>')
            else:
                text = f"<think>found</think><answer>{self._fact(hop)}</answer><confidence>0.9</confidence>"
        elif tag == "amem:note":  # A-MEM's note construction for the observation just made
            hop = self.hops[max(self.done_hops - 1, 0)]
            text = json.dumps({"keywords": [hop["entity"], hop["relation"] or "entity"], "context": self._fact(hop),
                               "tags": ["search", hop["relation"] or "entity", "evidence"]})
        elif tag == "amem:evolve":  # link the new note to its nearest one
            listed = last.split("Nearest notes:\n", 1)[-1]
            first = re.match(r"(\d+):", listed)
            text = json.dumps({"links": [int(first.group(1))] if first else [], "updates": []})
        elif tag in ("planner", "react", "summary", "resum", "amem"):
            if self.done_hops >= len(self.hops):
                text = "<think>all hops done</think>" + answer
            else:
                hop = self.hops[self.done_hops]
                self.done_hops += 1
                text = (f"<think>next I need {hop['relation']} of {hop['entity']}</think>"
                        + (f"<task>Find the {hop['relation']} of {hop['entity']}</task>" if tag == "planner" else
                           f'<tool_call>{{"name": "web_search", "arguments": {{"keywords": "{hop["entity"]}"}}}}</tool_call>'))
        elif tag == "executor":
            if "<observation>" not in last:
                target = messages[1]["content"].split("Search target: ", 1)[-1]
                entity = re.sub(r"^Find the \S+ of ", "", target).split("\n")[0]
                text = f'<think>search</think><tool_call>{{"name": "web_search", "arguments": {{"keywords": "{entity}"}}}}</tool_call>'
            else:
                hop = self.hops[self.done_hops - 1]
                text = (f"<think>found</think><results>FINDINGS: {self._fact(hop)}\nSOURCES: {hop['docid']}\n"
                        f"STATUS: success\nGAPS: none</results>")
        elif tag and tag.startswith("memory:"):
            kind = tag.split(":")[1]
            progress = f"{self.done_hops} of {len(self.hops)} hops resolved"
            text = json.dumps({"episode": {"task_description": "answer the questions", "key_events": [],
                                           "current_progress": progress},
                               "working": {"immediate_goal": progress, "current_challenges": "",
                                           "active_hypotheses": [], "next_actions": []},
                               "tool": {"tools_used": [{"tool_name": "web_search", "call_count": self.done_hops}],
                                        "derived_rules": ["search entity names"], "useful_sources": []}}[kind])
        elif tag == "distill":  # phi(o | d): the fact the current hop needs, as a distiller keeps it
            text = self._fact(self.hops[max(self.done_hops - 1, 0)]) if self.hops else "NONE"
        else:  # summarize
            text = f"Summary: {self.done_hops} hops resolved so far."
        return Completion(text=text, prompt_tokens=self._count(messages),
                          completion_tokens=len(self.tok(text)["input_ids"]))


class PacedOracleClient:
    """The oracle's replies, paced by the real engine: each call prefills the agent's
    actual prompt and decodes as many tokens as the oracle's reply (greedy, EOS ignored),
    so both agents follow the same protocol and pay real prefill, prefix-cache and
    decode costs for the contexts they build."""

    def __init__(self, oracle, engine):
        self.oracle, self.engine = oracle, engine

    def complete(self, messages, tag=None, **sampling):
        from activemem_jax.engine import SamplingParams
        from hymem.llm import Completion

        reply = self.oracle.complete(messages, tag)
        out = self.engine.submit(list(messages), SamplingParams(
            temperature=0, max_tokens=max(reply.completion_tokens, 1), ignore_eos=True)).result()
        return Completion(reply.text, out.prompt_tokens, out.completion_tokens, out.cached_tokens)


METRICS = ("planner_context", "prompt_tokens", "uncached_prompt_tokens", "decoded_tokens", "dependency_length",
           "model_calls")


class AccountingClient:
    """The oracle's replies, each call accounted as the engine would see it."""

    def __init__(self, oracle, model, cache):
        self.oracle, self.model, self.cache = oracle, model, cache
        self.persistent_space = "planner"  # set to the agent's own before it runs
        self.totals = dict.fromkeys(METRICS, 0)

    def complete(self, messages, tag=None, **sampling):
        from hymem.llm import Completion

        reply = self.oracle.complete(messages, tag)
        prompt = self.model.encode_chat(list(messages))
        completion = self.model.tokenizer(reply.text)["input_ids"]
        cached = self.cache.serve(prompt, completion)
        c, n = len(prompt), len(completion)
        t = self.totals
        t["prompt_tokens"] += c
        t["uncached_prompt_tokens"] += c - cached
        t["decoded_tokens"] += n
        t["dependency_length"] += (c + n / 2) * n
        t["model_calls"] += 1
        if tag == self.persistent_space:
            t["planner_context"] = max(t["planner_context"], c)
        return Completion(reply.text, c, n, cached)


def oracle_bench(objectives, n_tasks: int):
    """What both agent benchmarks start from: (world, {N: tasks}, tools, the embedded
    model). The synthetic family (activemem_jax/tasks/synthetic.py) of world 0, `n_tasks`
    chain questions of the dev split per N in `objectives`, drawn with seed 1; the tools
    search the world's documents; the model (built by activemem_jax.build) counts tokens."""
    from activemem_jax import build
    from activemem_jax.tasks import build_section
    from activemem_jax.tasks.synthetic import synthetic_section
    from hymem.tools import Toolbox, search_tools

    ts = build_section(synthetic_section(world_seed=0, seed=1, n_objectives=tuple(objectives), n_tasks=n_tasks,
                                         kinds=("chain",)))
    tools = Toolbox(search_tools(ts.search, list(ts.documents)))
    model = build.model(build.config(model={"path": "embedded", "dtype": "float32", "remat": False}))
    return ts.source, ts.by_group(), tools, model


__all__ = ["METRICS", "AccountingClient", "OracleClient", "PacedOracleClient", "oracle_bench"]
