"""No model or server output crashes a run: 10,000 random and hostile outputs (tag soup,
JSON nested 1,000 deep, 1 MB strings, binary, lone surrogates, non-strings, raising
clients) through every parser, the response reader, the memory fold and the agent loops.
Zero exceptions, and every trace still writes as UTF-8 JSON."""

import json
import random
import time

from hymem import HyMemAgent, HyMemConfig, ScriptedClient, Toolbox, build, search_tools
from hymem.baselines import BaselineConfig, FlatAgent
from hymem.distill import distill
from hymem.llm import Completion, ModelError, OpenAIClient
from hymem.memory import Memories, fold
from hymem.parsing import (extract_json, labeled_fields, parse_answer, parse_confidence, parse_executor,
                           parse_iso, parse_planner, parse_results, tagged)
from tests.hymem.test_agent import DOCS

N = 10_000
MB = 1 << 20
PIECES = ["<think>", "</think>", "<task>", "</task>", "<answer>", "</answer>", "<confidence>", "</confidence>",
          "<isoReason>", "</isoReason>", "<prompt>", "</prompt>", "<description>", "<to_memory>", "<tool_call>",
          "</tool_call>", "<results>", "</results>", "<return>", "</return>", '{"name": "web_search", "arguments": ',
          '{"keywords": "Velmor"}}', '{"name": "parse_file", "arguments": {"file_path": "../../etc/passwd"}}',
          "STATUS: failed", "FINDINGS:", "CONFIDENCE: 1e999", "CONCLUSION:", "{", "}", "[", "]", '"', "\\", "x",
          " ", "0.5", "-3", "NaN", "\n", "\x00", "\ud800", "\U0001f600", '{"task_description": 1}']


def _nested(depth: int, kind: str) -> str:
    if kind == "object":
        return '{"a": ' * depth + "1" + "}" * depth
    if kind == "list":
        return "[" * depth + "]" * depth
    return "{" * depth  # unbalanced


def hostile_outputs(n: int = N, seed: int = 0) -> list:
    rng = random.Random(seed)
    fixed = [
        "<task>" * (MB // 6), "{" * MB, "<think>" * (MB // 7) + "<answer>x</answer>", "a" * MB,
        "<tool_call>" + '{"name": "web_search", "arguments": ' * 1000 + "</tool_call>",
        "<tool_call>" + '{"name": "web_search", "arguments": {"keywords": ' + _nested(1000, "list")
        + "}}</tool_call>",
        "<tool_call>" + _nested(1000, "object") + "</tool_call>", _nested(1000, "object"), _nested(1000, "list"),
        _nested(5000, "open"), "<results>" + "STATUS: " * 50000 + "</results>", "9" * MB,
        bytes(rng.randrange(256) for _ in range(4096)), None, 12345, {"text": "x"}, b"\xff\xfe<task>a</task>",
        "\ud800\udfff" * 1000 + "<answer>\udc80</answer>", "<answer>" + "\x00" * 1000 + "</answer>",
        '{"task_description": "' + "q" * MB + '"}',
    ]
    out = list(fixed)
    while len(out) < n:
        r = rng.random()
        if r < 0.55:
            out.append("".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 24))))
        elif r < 0.75:
            out.append("".join(chr(rng.randrange(0x110000)) for _ in range(rng.randrange(0, 64))))
        elif r < 0.85:
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64))).decode("latin-1"))
        elif r < 0.95:
            out.append(_nested(rng.choice([10, 999, 1000, 1001, 3000]), rng.choice(["object", "list", "open"])))
        else:
            body = _nested(rng.randrange(1, 1200), "object")
            out.append(f'<tool_call>{{"name": "web_search", "arguments": {{"keywords": {body}}}}}</tool_call>')
    return out


OUTPUTS = hostile_outputs()


def test_every_parser_survives_every_output():
    t0 = time.perf_counter()
    labeled = 0
    for text in OUTPUTS:
        assert parse_planner(text).kind in ("task", "iso", "fold", "answer", "invalid")
        assert parse_executor(text).kind in ("tool", "results", "invalid")
        assert parse_iso(text)[0] in ("task", "return", "invalid")
        assert isinstance(parse_results(text), dict)
        value = extract_json(text)
        assert value is None or isinstance(value, dict)
        c = parse_confidence(text)
        assert c is None or 0.0 <= c <= 1.0
        fields = labeled_fields(str(text), ("FINDINGS", "STATUS"))  # each a stripped slice after its label
        assert all(f"{k}:" in str(text) and v == v.strip() and v in str(text) for k, v in fields.items())
        assert set(fields) <= {"FINDINGS", "STATUS"} and (fields or not ("\nFINDINGS:" in str(text)
                                                                         or str(text).startswith("STATUS:")))
        labeled += bool(fields)
        assert isinstance(distill(text), str)
        done = parse_answer(text)
        assert done is None or isinstance(done[0], str)
        assert all(isinstance(b, str) for b in tagged("spawn", text))
    assert labeled > 100  # the labeled-fields checks above were not vacuous
    assert time.perf_counter() - t0 < 120  # linear parsers: seconds, not hours (not a benchmark)


def _bodies(text) -> list:
    content = text if isinstance(text, str) else repr(text)
    good = json.dumps({"choices": [{"message": {"content": content}}], "usage": {"prompt_tokens": 1e300}})
    return [text if isinstance(text, bytes) else str(text).encode("utf-8", "surrogatepass"), good.encode(),
            b"<html>502 Bad Gateway</html>", b"", b'{"choices": []}', b'{"choices": [{"message": {"content": 5}}]}',
            b"[" * 100000, b'{"usage": {"prompt_tokens": "many"}, "choices": [{"message": null}]}']


def test_response_reader_maps_every_body_to_a_completion_or_model_error():
    bodies = [b for text in OUTPUTS[:500] for b in _bodies(text)] + [o.encode("utf-8", "surrogatepass")
                                                                    for o in OUTPUTS if isinstance(o, str)]
    outcomes = {"ok": 0, "error": 0}
    for body in bodies:
        try:
            out = OpenAIClient.parse_response(body)
            assert isinstance(out.text, str) and out.prompt_tokens >= 0
            out.text.encode("utf-8")
            outcomes["ok"] += 1
        except ModelError:
            outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0


class HostileClient:
    """Replies from the hostile outputs in turn; every 37th call raises something."""

    def __init__(self, outputs):
        self.outputs, self.i = outputs, 0
        self.errors = [ModelError("boom", transient=True), RuntimeError("engine fault"), KeyError("x"),
                       ValueError("prompt too long"), MemoryError(), RecursionError()]

    def complete(self, messages, tag=None, **sampling):
        self.i += 1
        if self.i % 37 == 0:
            raise self.errors[self.i % len(self.errors)]
        text = self.outputs[self.i % len(self.outputs)]
        return Completion(text=text, prompt_tokens=self.i % 5000, completion_tokens=-1 if self.i % 11 else "x")

    def consumed(self) -> int:
        return self.i


def _check(result):
    assert isinstance(result.answer, str)
    json.dumps(result.trace, ensure_ascii=False, default=str).encode("utf-8")  # what eval_agents writes


def test_agent_loops_survive_every_output():
    tools = Toolbox(search_tools(_retriever()))
    client = HostileClient(OUTPUTS)
    hymem_cfg = HyMemConfig(planner_turns=4, execute_turns=3, max_iso_reasoning=2, max_iso_reasoning_turn=2,
                            fold_planner_turns=2, context_window=3000)
    small = {"amem": {"max_turns": 6, "window": 2}, "thread": {"root_turns": 4, "child_turns": 3},
             "sampling": {"max_tokens": 64}}
    runs = 0
    while client.consumed() < N:
        if runs % 2 == 0:
            agent = HyMemAgent(client, tools, hymem_cfg)
        elif runs % 4 == 1:
            agent = FlatAgent(client, tools, BaselineConfig(mode=("react", "summary", "resum")[runs % 3], max_turns=6,
                                                            context_window=300, summary_threshold=100))
        else:  # the other registered baselines
            agent = build(("amem", "thread", "base")[(runs // 4) % 3], client, tools, small)
        _check(agent.run("q"))
        runs += 1
    assert runs > 100


def test_memory_fold_survives_every_output():
    rng = random.Random(1)
    outputs = OUTPUTS[:50] + rng.sample(OUTPUTS, 200)
    memories, events = Memories(), []
    for i in range(0, len(outputs), 3):
        replies = iter(outputs[i:i + 6] * 2)
        fold(memories, lambda msgs, space: next(replies, ""), "q", "history", "exec", "recent", "tools",
             events.append)
        memories.render()
    assert memories.folds == (len(outputs) + 2) // 3


def test_scripted_fuzz_through_hymem_respects_budgets():
    cfg = HyMemConfig(planner_turns=4, execute_turns=3, max_iso_reasoning=2, max_iso_reasoning_turn=2,
                      fold_planner_turns=3)
    for seed in range(20):
        replies = random.Random(seed).sample(OUTPUTS, 8)
        counter = iter(range(10**6))
        result = HyMemAgent(ScriptedClient(lambda tag, m: str(replies[next(counter) % 8])), TOOLS, cfg).run("q")
        _check(result)
        assert result.usage.get("planner", {}).get("calls", 0) <= cfg.planner_turns + 1


def _retriever():
    from activemem_jax.data.retrieval import BM25Retriever

    return BM25Retriever(DOCS)


TOOLS = Toolbox(search_tools(_retriever()))
