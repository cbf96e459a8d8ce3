"""HyMem's protocol as grammars, for endpoints that decode under a constraint
(docs/hymem_cli.md#constrained-decoding).

One Lark grammar (llguidance's dialect, which this project's server and vLLM's
`guided_grammar` take) per turn kind: the planner's action, the executor's tool call or
results, the isolated session's task or return, and the forced answer turn. Each accepts
only turns that `hymem.parsing` reads as a valid action of that kind, with free text where
the protocol has free text, bounded in length (a small model that would ramble on ends
its turn): `TEXT` is at most 400 characters without "<", not all blank (a blank task or
answer is no action), the executor's results 1,200.

    sampling = {**config.sampling, "guided_grammar": grammars.planner(iso=True, memory=True)}

The agent sends one only when its `constrained` option is on (`hymem.agent.HyMemConfig`,
`python -m hymem --constrained`); a client passes it on as the vLLM-style request field
(`OpenAIClient`) or as an engine constraint (`EngineClient`).
"""

from __future__ import annotations

import json
from typing import Optional

TEXT_CHARS = 400
RESULTS_CHARS = 1200
ARG_CHARS = 200

_COMMON = f"""
think: "<think>" TEXT "</think>" SEP
TEXT: /[ \\n]{{0,3}}[^<\\s][^<]{{0,{TEXT_CHARS - 1}}}/
SEP: /[ \\n]{{0,2}}/
"""
_ANSWER = """
answer: "<answer>" TEXT "</answer>" SEP "<confidence>" CONF "</confidence>"
CONF: /[ ]?(0(\\.[0-9]{1,3})?|1(\\.0{1,3})?|\\.[0-9]{1,3})[ ]?/
"""


def planner(iso: bool = True, memory: bool = True) -> str:
    """The planner's turn: an optional <think>, then exactly one action it is offered
    (<task>, <isoReason> with <description> and <prompt>, <to_memory>, or <answer> with
    <confidence>)."""
    actions = ["task"] + (["iso"] if iso else []) + (["to_memory"] if memory else []) + ["answer"]
    rules = ['task: "<task>" TEXT "</task>"']
    if iso:
        rules.append('iso: "<isoReason>" SEP "<description>" TEXT "</description>" SEP '
                     '"<prompt>" TEXT "</prompt>" SEP "</isoReason>"')
    if memory:
        rules.append('to_memory: "<to_memory>"')
    return ("start: think? action\naction: " + " | ".join(actions) + "\n" + "\n".join(rules)
            + _COMMON + _ANSWER)


def forced_answer() -> str:
    """The forced answer turn: <answer>...</answer><confidence>0-1</confidence> only."""
    return "start: answer\n" + _COMMON + _ANSWER


def iso() -> str:
    """An isolated-reasoning turn: an optional <think>, then <task> or <return>."""
    return ('start: think? (task | ret)\ntask: "<task>" TEXT "</task>"\nret: "<return>" TEXT "</return>"\n'
            + _COMMON)


def tool_call_schema(tools) -> dict:
    """The JSON schema of one tool call to any tool of `tools` (a Toolbox, or a dict
    name -> Tool): {"name": its name, "arguments": {each input: a string}}."""
    table = getattr(tools, "tools", tools) or {}
    options = []
    for name, tool in table.items():
        inputs = list(getattr(tool, "inputs", {}) or {})
        options.append({"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                        "properties": {
                            "name": {"const": name},
                            "arguments": {"type": "object", "additionalProperties": False, "required": inputs,
                                          "properties": {k: {"type": "string", "maxLength": ARG_CHARS}
                                                         for k in inputs}}}})
    if not options:  # no tools: nothing but results can be written
        return {}
    return options[0] if len(options) == 1 else {"anyOf": options}


def executor(tools=None) -> str:
    """The executor's turn: an optional <think>, then one <tool_call> whose JSON names a
    tool of `tools` with its arguments (strings), or <results>...</results>."""
    schema = tool_call_schema(tools) if tools is not None else {}
    head = "start: think? (results | call)\n" if schema else "start: think? results\n"
    call = f'call: "<tool_call>" %json {json.dumps(schema)} "</tool_call>"\n' if schema else ""
    return (head + call + f'results: "<results>" RESULTS "</results>"\nRESULTS: /[^<]{{1,{RESULTS_CHARS}}}/\n'
            + _COMMON)


def for_turn(kind: str, tools=None, iso_on: bool = True, memory: bool = True) -> Optional[str]:
    """The grammar of a turn kind: planner | forced | executor | iso (None: unconstrained)."""
    if kind == "planner":
        return planner(iso_on, memory)
    if kind == "forced":
        return forced_answer()
    if kind == "executor":
        return executor(tools)
    if kind == "iso":
        return iso()
    return None
