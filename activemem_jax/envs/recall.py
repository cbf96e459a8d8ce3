"""A recall task where the score depends on what only the memory can carry.

    tasks = make_recall_tasks("train", n_tasks=64, n_facts=4, seed=0)
    env = RecallEnv(split="train")
    obs = env.reset(tasks)                         # the first fact of each episode
    obs, rewards, dones, infos = env.step(texts)

An episode shows N facts "The code for <name> is <code>.", one per turn, then asks M
questions (M = N by default: each fact once, in a shuffled order; M > N asks every fact
once and some twice), one per turn: "What is the code for <name>? Answer with one word."
A question turn scores 1 when the response's first word is the code. The episode reward
is the fraction answered right. Fact turns are not scored (info
"scored" False: the trainer puts no token loss on their responses). Codes are drawn uniformly from a closed
set of 8 words. Run it with the `observation` prompt layout: the model sees only the
newest observation, never its own earlier turns, so nothing but the latent memory
crosses turns.

What a score means is read against `recall_baselines(tasks)`, computed on the same tasks:
the chance rate of a policy that answers in the code set (1/8 only for such a policy: one
that never names a code scores 0, which `format_failure`, the share of answers outside
the set, tells apart), the best constant code (chosen on these very tasks, so it bounds
every constant answer), the last-fact rule (answer with the code of the newest fact
shown), a perfect memory of the last k facts for k = 1..N (right when the asked fact is
among them, chance otherwise) and the ceiling 1.0.

Names come from a deterministic pool split into disjoint train and test halves (no test
name is ever seen in training). Everything is a pure function of (split, seed).
"""

from __future__ import annotations

import itertools
import re
from typing import Optional, Sequence

import numpy as np

CODES = ("red", "blue", "green", "yellow", "black", "white", "orange", "purple")
_SYLLABLES = ("ka", "lo", "mi", "ren", "tu", "sa", "vor", "el", "dan", "pi", "zu", "mar", "ti", "gol",
              "nes", "ba", "qui", "fen", "ro", "ash")
SPLITS = ("train", "test")
FACT = "The code for {name} is {code}."
QUESTION = "What is the code for {name}? Answer with one word."


def name_pool(split: str, syllables: int = 2) -> list[str]:
    """The split's names: names of `syllables` distinct syllables (2: 190 a split, 3: 3,420),
    shuffled once (seed 0) and halved."""
    if split not in SPLITS:
        raise ValueError(f"recall split={split!r}: use one of {SPLITS}")
    names = sorted({"".join(p).capitalize() for p in itertools.permutations(_SYLLABLES, syllables)})
    order = np.random.default_rng(0).permutation(len(names))
    half = len(names) // 2
    picked = order[:half] if split == "train" else order[half:]
    return [names[i] for i in sorted(picked)]


def make_recall_tasks(split: str, n_tasks: int, n_facts: int, seed: int = 0,
                      codes: Sequence[str] = CODES, n_questions: int = 0) -> list[dict]:
    """n_tasks episodes of n_facts facts each (distinct names within an episode) and
    n_questions questions (0: n_facts)."""
    if n_facts < 1:
        raise ValueError(f"data.n_facts={n_facts}: need >= 1")
    n_questions = n_questions or n_facts
    if n_questions < n_facts:
        raise ValueError(f"data.n_questions={n_questions}: need >= data.n_facts={n_facts} (each fact is asked)")
    if len(codes) < 2:
        raise ValueError(f"data.codes={list(codes)}: need at least 2 distinct codes (with one, every answer is "
                         "right by construction and no baseline can be told from memory)")
    if len(set(codes)) != len(codes) or any(first_word(c) != c for c in codes):
        raise ValueError(f"data.codes={list(codes)}: codes must be distinct lowercase words (the env scores "
                         "an answer by its first word)")
    pool = name_pool(split)
    if n_facts > len(pool):
        raise ValueError(f"data.n_facts={n_facts}: the {split} split has {len(pool)} names")
    rng = np.random.default_rng([seed, SPLITS.index(split)])
    tasks = []
    for i in range(n_tasks):
        names = [pool[j] for j in rng.choice(len(pool), n_facts, replace=False)]
        answers = [codes[j] for j in rng.integers(0, len(codes), n_facts)]
        asked = list(range(n_facts)) + [int(j) for j in rng.integers(0, n_facts, n_questions - n_facts)]
        order = [asked[j] for j in rng.permutation(n_questions)]
        tasks.append({"id": f"recall-{split}-{seed}-{i}", "names": names, "answers": answers,
                      "order": order, "prompt": FACT.format(name=names[0], code=answers[0])})
    return tasks


def recall_baselines(tasks: Sequence[dict], codes: Sequence[str] = CODES) -> dict:
    """Accuracies of the rules that need no training, on `tasks` (see the module doc):
    {"chance", "best_constant", "last_fact", "memory_1".."memory_N", "ceiling"}; each is
    the mean over episodes of the share of questions answered right, as the env scores."""
    best, per_task = _rule_scores(tasks, codes)
    means = {k: float(np.mean(v)) for k, v in per_task.items()}
    return {"chance": 1.0 / len(tuple(codes)), "best_constant": means.pop("best_constant"),
            "best_constant_code": best, **means, "ceiling": 1.0}


def rule_units(tasks: Sequence[dict], codes: Sequence[str] = CODES) -> dict:
    """Each rule's accuracy per task, {rule: {task id: share right}} (the units a
    held-out score's interval resamples, `metrics.intervals`); chance for every task."""
    _, per_task = _rule_scores(tasks, codes)
    out = {rule: {t["id"]: v for t, v in zip(tasks, scores)} for rule, scores in per_task.items()}
    out["chance"] = {t["id"]: 1.0 / len(tuple(codes)) for t in tasks}
    return out


def _rule_scores(tasks: Sequence[dict], codes: Sequence[str]) -> tuple[str, dict]:
    """(the best constant code, {rule: [share right per task]}) for the rules but chance."""
    codes = tuple(codes)
    if len(codes) < 2:
        raise ValueError(f"data.codes={list(codes)}: recall baselines need at least 2 codes (with one, every "
                         "answer is right by construction)")
    if not tasks:
        raise ValueError("recall baselines need at least one task (eval.n_tasks >= 1)")
    n = max(len(t.get("names", ())) for t in tasks)
    if n < 1 or any(not t.get("order") for t in tasks):
        raise ValueError("data.n_facts=0: recall baselines need at least one fact and one question per task")
    chance = 1.0 / len(codes)
    asked = [[t["answers"][j] for j in t["order"]] for t in tasks]
    counts = {c: sum(a.count(c) / len(a) for a in asked) for c in codes}
    best = max(codes, key=lambda c: (counts[c], -codes.index(c)))

    def share(per_task):
        return [float(np.mean(x)) for x in per_task]

    out = {"best_constant": share([[float(g == best) for g in a] for a in asked]),
           "last_fact": share([[float(g == t["answers"][-1]) for g in a] for t, a in zip(tasks, asked)])}
    for k in range(1, n + 1):  # remembers facts len - k .. len - 1; guesses (chance) otherwise
        out[f"memory_{k}"] = share([[1.0 if j >= len(t["names"]) - k else chance for j in t["order"]]
                                    for t in tasks])
    return best, out


NO_TRAINING = ("chance", "best_constant", "last_fact")  # the rules a learned policy must beat


def first_word(text: str) -> str:
    m = re.search(r"[A-Za-z]+", text or "")
    return m.group(0).lower() if m else ""


class RecallEnv:
    def __init__(self, split: str = "train", codes: Sequence[str] = CODES, max_turns: Optional[int] = None,
                 calibration: int = 64):
        self.split, self.codes, self.max_turns, self.calibration = split, tuple(codes), max_turns, calibration
        self.tasks: list[dict] = []
        self.turn: list[int] = []
        self.correct: list[list[bool]] = []
        self.in_set: list[list[bool]] = []
        self.done: list[bool] = []

    @property
    def chance(self) -> float:
        """The chance rate of a policy that answers in the code set."""
        return 1.0 / len(self.codes)

    def baselines(self, tasks: Sequence[dict]) -> dict:
        return recall_baselines(tasks, self.codes)

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            n = len(t.get("names", ()))
            order = list(t.get("order", ()))
            if not n or len(t.get("answers", ())) != n or not order or not all(0 <= j < n for j in order):
                raise ValueError(f"task {t.get('id')!r}: needs 'names' and 'answers' of one length and an "
                                 "'order' of fact indices (the questions)")
            turns = n + len(order)
            if self.max_turns is not None and turns > self.max_turns:
                raise ValueError(f"task {t.get('id')!r} has {n} facts and {len(order)} questions and needs "
                                 f"{turns} turns; data.max_turns is {self.max_turns}: lower data.n_facts / "
                                 "data.n_questions or raise data.max_turns")
        self.tasks = list(tasks)
        self.turn = [0] * len(tasks)
        self.correct = [[] for _ in tasks]
        self.in_set = [[] for _ in tasks]
        self.done = [False] * len(tasks)
        return [self.observation(i) for i in range(len(tasks))]

    def observation(self, i: int) -> str:
        t, k = self.tasks[i], self.turn[i]
        n = len(t["names"])
        if k < n:
            return FACT.format(name=t["names"][k], code=t["answers"][k])
        j = t["order"][k - n]
        return QUESTION.format(name=t["names"][j])

    def expert(self, i: int, turn: int) -> str:
        """The right response at `turn` of episode i (SFT)."""
        t = self.tasks[i]
        n = len(t["names"])
        return "OK" if turn < n else t["answers"][t["order"][min(turn - n, len(t["order"]) - 1)]]

    def reads_response(self, i: int) -> bool:
        """Whether `step` reads episode i's response to its current observation: a
        question's answer; a fact turn's response is discarded (the rollout then generates
        none, `activemem.rollout`)."""
        return not self.done[i] and self.turn[i] >= len(self.tasks[i]["names"])

    def step(self, actions: Sequence[str]):
        obs, rewards, dones, infos = [], [], [], []
        for i, text in enumerate(actions):
            t = self.tasks[i]
            n = len(t["names"])
            reward, scored = 0.0, False
            if not self.done[i]:
                k = self.turn[i]
                scored = k >= n
                if k >= n:
                    word = first_word(text)
                    right = word == t["answers"][t["order"][k - n]]
                    self.correct[i].append(right)
                    self.in_set[i].append(word in self.codes)
                    reward = float(right)
                self.turn[i] = k + 1
                self.done[i] = self.turn[i] >= n + len(t["order"])
            score = sum(self.correct[i]) / len(t["order"])
            obs.append("" if self.done[i] else self.observation(i))
            rewards.append(reward)
            dones.append(self.done[i])
            infos.append({"reward": score, "done": self.done[i], "per_question_em": list(map(float, self.correct[i])),
                          "per_question_in_set": list(map(float, self.in_set[i])),
                          "answer": text, "scored": scored})
        return obs, rewards, dones, infos

    def abort(self, i: int) -> None:
        self.done[i] = True

    def sample_observations(self) -> list[str]:
        """Facts and questions of this split (fixed seed) to calibrate the query space."""
        tasks = make_recall_tasks(self.split, self.calibration, 1, seed=12345, codes=self.codes)
        return ([FACT.format(name=t["names"][0], code=t["answers"][0]) for t in tasks]
                + [QUESTION.format(name=t["names"][0]) for t in tasks])


__all__ = ["CODES", "FACT", "NO_TRAINING", "QUESTION", "RecallEnv", "first_word", "make_recall_tasks", "name_pool",
           "recall_baselines", "rule_units"]
