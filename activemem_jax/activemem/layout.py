"""Prompt layouts for ActiveMem rollouts, with K latent placeholder tokens
(docs/design_memory.md#context-layout).

    layout = PromptLayout(tokenizer, num_latents=4, mode="constant")
    turn = layout.render(task_prompt, history=[(response_1, obs_1), ...])  # obs_t = newest
    turn.ids            # prompt ids with K placeholders right before the current observation
    turn.latent_pos     # [K] positions of the placeholders in turn.ids
    turn.plain_ids      # the same prompt without placeholders (state encoding, K = 0)

Modes: "constant" (MEM1's constant context, the default): the task prompt, the previous
turn's response (its <think> summary and action), then the placeholders and the new
observation; older turns are dropped. "full": every turn stays (the plain full-history
baseline). "observation": only the placeholders and the newest observation, no text
channel across turns (the model's own earlier responses are not carried: whatever
crosses turns goes through the memory; the recall task uses it). At turn 0 the
observation is the task prompt itself.

Slots: "before_observation" (docs/design_memory.md#latent-injection, the default) or
"after_observation" (the placeholders end the newest user message). After the observation,
the placeholder-free prompt that encodes h_t is a prefix of the generation prompt, so the
engine reuses its KV and a turn no longer prefills the observation twice (ActiveMem's
per-turn overhead drops to the K slots and the assistant header); the latents then no
longer condition how the model reads the observation, only what it writes.

The chat is rendered by the tokenizer's own template with a marker where the latents go;
the text on either side of the marker is tokenized separately, so `ids` and `plain_ids`
agree token for token outside the placeholders.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

MARK = "\ue000"  # private-use character: where the placeholders go
MODES = ("constant", "full", "observation")
SLOTS = ("before_observation", "after_observation")


@dataclasses.dataclass(frozen=True)
class TurnPrompt:
    ids: list[int]
    latent_pos: list[int]
    plain_ids: list[int]


class PromptLayout:
    def __init__(self, tokenizer, num_latents: int, mode: str = "constant",
                 placeholder: str = "\n", slots: str = "before_observation", system_prompt=None):
        if mode not in MODES:
            raise ValueError(f"layout mode={mode!r}: use one of {MODES}")
        if slots not in SLOTS:
            raise ValueError(f"latent slots={slots!r}: use one of {SLOTS}")
        self.slots = slots
        self.system_prompt = system_prompt  # None: the template's own default system prompt
        ph = tokenizer(placeholder, add_special_tokens=False)["input_ids"]
        if len(ph) != 1:
            raise ValueError(f"placeholder {placeholder!r} is {len(ph)} tokens; pick a string "
                             "that is exactly one token")
        self.tokenizer, self.num_latents, self.mode = tokenizer, num_latents, mode
        self.placeholder_id = ph[0]
        before, _ = self._split(self._system([{"role": "user", "content": MARK}]))
        self.preamble_tokens = len(self._tok(before))  # template system prompt + user header

    def _tok(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []

    def _split(self, messages):
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if text.count(MARK) != 1:
            raise ValueError("the chat template dropped or repeated the latent marker")
        before, after = text.split(MARK)
        return before, after

    def _system(self, msgs: list[dict]) -> list[dict]:
        if self.system_prompt is None:
            return msgs
        return [{"role": "system", "content": self.system_prompt}] + msgs

    def messages(self, task_prompt: str, history: Sequence[tuple[str, str]]) -> list[dict]:
        """history: (response, observation that followed it) of earlier turns, oldest
        first; the last observation is the current one."""
        return self._system(self._messages(task_prompt, history))

    def _messages(self, task_prompt: str, history: Sequence[tuple[str, str]]) -> list[dict]:
        def with_mark(text):
            return MARK + text if self.slots == "before_observation" else text + MARK

        if not history:
            return [{"role": "user", "content": with_mark(task_prompt)}]
        if self.mode == "observation":
            return [{"role": "user", "content": with_mark(history[-1][1])}]
        msgs = [{"role": "user", "content": task_prompt}]
        kept = history if self.mode == "full" else history[-1:]
        for i, (response, obs) in enumerate(kept):
            msgs.append({"role": "assistant", "content": response})
            last = i == len(kept) - 1
            msgs.append({"role": "user", "content": with_mark(obs) if last else obs})
        return msgs

    def render(self, task_prompt: str, history: Sequence[tuple[str, str]] = ()) -> TurnPrompt:
        """The prompt of the next turn."""
        return self._turn(*self._split(self.messages(task_prompt, history)))

    def render_continuation(self, task_prompt: str, partial: str) -> TurnPrompt:
        """Delimiter steps of a single-shot task (MemGen-style): the assistant message so
        far stays open, the K placeholders follow it, and the model continues it."""
        msgs = self._system([{"role": "user", "content": task_prompt},
                             {"role": "assistant", "content": partial + MARK}])
        text = self.tokenizer.apply_chat_template(msgs, tokenize=False, continue_final_message=True)
        if text.count(MARK) != 1:
            raise ValueError("the chat template dropped or repeated the latent marker")
        return self._turn(*text.split(MARK))

    def _turn(self, before: str, after: str) -> TurnPrompt:
        left, right = self._tok(before), self._tok(after)
        k = self.num_latents
        return TurnPrompt(ids=left + [self.placeholder_id] * k + right,
                          latent_pos=list(range(len(left), len(left) + k)),
                          plain_ids=left + right)


__all__ = ["MODES", "PromptLayout", "SLOTS", "TurnPrompt"]
