"""Delimiter steps for single-shot tasks (docs/design_memory.md#delimiter-steps): one response,
cut into steps.

    env = SegmentedEnv(MathEnv(), delimiter="\\n\\n", max_steps=8)

Each step's action is one segment of the response. A segment that ends with the
delimiter continues the episode (observation "", reward 0) until max_steps; the final
segment sends the whole response to the wrapped single-shot environment, whose reward
and info end the episode. Use with PolicyConfig(step_mode="delimiter"): the rollout
stops generation at the delimiter and renders the next step as a continuation of the
same assistant message, with the K latent slots after the text so far.
"""

from __future__ import annotations

from typing import Sequence


class SegmentedEnv:
    def __init__(self, env, delimiter: str = "\n\n", max_steps: int = 8):
        if not delimiter or max_steps < 1:
            raise ValueError("SegmentedEnv needs a non-empty delimiter and max_steps >= 1")
        self.env, self.delimiter, self.max_steps = env, delimiter, max_steps
        self.segments: list[list[str]] = []
        self.done: list[bool] = []

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        prompts = self.env.reset(tasks)
        self.segments = [[] for _ in prompts]
        self.done = [False] * len(prompts)
        return prompts

    def step(self, actions: Sequence[str]):
        n = len(self.segments)
        if len(actions) != n:
            raise ValueError(f"{len(actions)} actions for {n} episodes")
        finishing = []
        for i, text in enumerate(actions):
            if self.done[i]:
                continue
            self.segments[i].append(text if isinstance(text, str) else str(text))
            if not text.endswith(self.delimiter) or len(self.segments[i]) >= self.max_steps:
                finishing.append(i)
        results = {}
        if finishing:
            full = ["".join(s) for s in self.segments]
            _, rewards, _, infos = self.env.step(full)
            results = {i: (rewards[i], infos[i]) for i in finishing}
        obs, rewards, dones, infos = [], [], [], []
        for i in range(n):
            reward, info = 0.0, {"steps": len(self.segments[i])}
            if i in results:
                reward = float(results[i][0])
                info = {**results[i][1], "steps": len(self.segments[i]), "reward": reward,
                        "answer": "".join(self.segments[i]), "done": True}
                self.done[i] = True
            obs.append("")
            rewards.append(reward)
            dones.append(self.done[i])
            infos.append(info)
        return obs, rewards, dones, infos

    def abort(self, i: int) -> None:
        self.done[i] = True
