"""bench_horizon's accounting against hand-computed figures (a word-level fake tokenizer)."""

from activemem_jax.engine.prefix_policy import PrefixCacheModel
from hymem import ScriptedClient
from hymem.oracle import AccountingClient


class WordModel:
    """encode_chat: one id per word of every message; tokenizer: one id per word."""

    vocab: dict = {}

    def _ids(self, text):
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]

    def encode_chat(self, messages):
        return [i for m in messages for i in self._ids(m["content"])]

    def tokenizer(self, text):
        return {"input_ids": self._ids(text)}


def test_dependency_length_cache_and_context_are_counted_per_call():
    oracle = ScriptedClient({"react": ["a b c d", "e f"]})
    client = AccountingClient(oracle, WordModel(), PrefixCacheModel(slots=2, rows=1000))
    client.persistent_space = "react"  # bench_horizon sets it from the agent it runs
    first = [{"role": "user", "content": " ".join(f"w{i}" for i in range(40))}]
    out = client.complete(first, tag="react")
    assert (out.prompt_tokens, out.completion_tokens, out.cached_tokens) == (40, 4, 0)
    second = first + [{"role": "assistant", "content": "a b c d"}, {"role": "user", "content": "x y z"}]
    out = client.complete(second, tag="react")
    # the first call's row holds its 40 prompt + 4 reply tokens; the second prompt continues them
    assert (out.prompt_tokens, out.completion_tokens, out.cached_tokens) == (47, 2, 44)
    t = client.totals
    assert t["dependency_length"] == (40 + 4 / 2) * 4 + (47 + 2 / 2) * 2
    assert t["prompt_tokens"] == 87 and t["uncached_prompt_tokens"] == 87 - 44
    assert t["decoded_tokens"] == 6 and t["planner_context"] == 47 and t["model_calls"] == 2
