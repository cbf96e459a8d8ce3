"""A one-turn sanity environment whose reward the latent prefix can control.

    env = FirstTokenEnv(tokenizer, lambda token_id: token_id < 1000)
    prompts = env.reset([{"id": "t0", "prompt": "Say something."}])
    obs, rewards, dones, infos = env.step(["Hello"])   # reward 1 if the predicate holds

The reward looks at the first token of the response (re-encoded by the tokenizer). It is
the pipeline check the GRPO tests and the quick demos use: a trainer that works raises
its mean reward within a few dozen steps, whatever the backbone knows.
"""

from __future__ import annotations

from typing import Callable, Sequence


class FirstTokenEnv:
    def __init__(self, tokenizer, predicate: Callable[[int], bool], max_turns: int = 1):
        self.tokenizer, self.predicate, self.max_turns = tokenizer, predicate, max_turns
        self.done: list[bool] = []

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            if not isinstance(t.get("prompt"), str):
                raise ValueError(f"task {t.get('id')!r}: needs a 'prompt' string")
        self.done = [False] * len(tasks)
        return [t["prompt"] for t in tasks]

    def first_token(self, text: str) -> int:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
        return int(ids[0]) if ids else -1

    def step(self, actions: Sequence[str]):
        obs, rewards, dones, infos = [], [], [], []
        for i, text in enumerate(actions):
            reward = 0.0
            if not self.done[i]:
                tok = self.first_token(text)
                reward = float(tok >= 0 and bool(self.predicate(tok)))
                self.done[i] = True
            obs.append("")
            rewards.append(reward)
            dones.append(True)
            infos.append({"reward": reward, "answer": text, "done": True})
        return obs, rewards, dones, infos

    def abort(self, i: int) -> None:
        self.done[i] = True
