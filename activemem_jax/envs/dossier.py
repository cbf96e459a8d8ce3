"""Dossiers: a recall stream in which every tree mechanism has work to do.

    tasks = make_dossier_tasks("train", streams=16, seed=0)      # episodes, stream by stream
    env = DossierEnv()
    obs = env.reset(tasks[:4])
    obs, rewards, dones, infos = env.step(texts)
    dossier_baselines(tasks)                                     # the rules that need no training

A stream is a sequence of episodes that share one memory (run it with
`policy.tree_scope="persistent"`, episodes in order). Each episode introduces new
entities, each with several attributes (the group: "Kalo's door code is red.", "Kalo's
safe code is blue."), then shows, in a shuffled order:
- corrections ("Correction: Kalo's door code is now green."): the value changes; a
  memory must replace the old one, not keep both;
- reminders ("Reminder: Kalo's safe code is blue."): the value is repeated word for word
  after a prefix, a near-duplicate of what is stored (merging has work);
- decoys ("Unconfirmed rumour: Kalo's door code might be black."): a wrong value about a
  real entity and attribute; a memory must not store it;
then asks questions ("What is Kalo's door code? Answer with one word."): a share `carry`
about entities of the `horizon - 1` episodes before it (only a memory that persists
across episodes can answer), the rest about this episode's; an entity older than that is
never asked again (stale: pruning has work). Questions prefer the attributes a decoy or a
correction touched, so the threshold rule (store what comes, update the nearest) is
wrong where it matters. A question scores 1 when the response's first word is the
current value. Codes come from a closed set of 8 words; non-question turns are not
scored (info "scored" False).

Each turn's observation carries its kind and the write a perfect memory makes
(`turns[k]["write"]`: insert for a fact, update for a correction or a reminder, none for
a decoy or a question), so a run can report its action mix per kind.

`dossier_baselines(tasks)` replays every stream in order and scores, on the same
questions: chance (1/8, for a policy answering in the code set), the best constant code,
the last code shown (any kind), `store_all` (a perfect index that stores every
observation and answers with the newest mention: what the threshold rule would reach
with perfect retrieval), `no_corrections` (keeps the first value of each attribute),
`episode_only` (a perfect memory emptied at every episode start: what a tree scoped to
the episode can reach), `memory_k` (a perfect memory holding only the k most recently
written attributes, for each k in `memory_sizes`) and the ceiling 1.0.

Names come from `envs.recall.name_pool` (disjoint train and test halves; `name_syllables`
2: 190 names a split, 3: 3,420). Everything is a pure function of (split, seed and the
sizes).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from activemem_jax.envs.recall import CODES, SPLITS, first_word, name_pool

ATTRIBUTES = ("door", "safe", "locker", "radio")
FACT = "{name}'s {attr} code is {code}."
CORRECTION = "Correction: {name}'s {attr} code is now {code}."
REMINDER = "Reminder: {name}'s {attr} code is {code}."
DECOY = "Unconfirmed rumour: {name}'s {attr} code might be {code}."
QUESTION = "What is {name}'s {attr} code? Answer with one word."
TEMPLATES = {"fact": FACT, "correction": CORRECTION, "reminder": REMINDER, "decoy": DECOY, "question": QUESTION}
WRITES = {"fact": "insert", "correction": "update", "reminder": "update", "decoy": "none", "question": "none"}

DEFAULTS = dict(streams=16, episodes=4, entities=2, attributes=2, corrections=1, reminders=1, decoys=2,
                questions=4, horizon=2, carry=0.5, memory_sizes=(4, 8), name_syllables=2)


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def check_sizes(sizes: dict, codes: Sequence[str] = CODES, pool: int = 0) -> dict:
    """The sizes with defaults filled in, or a ValueError naming the field
    (`data.dossier.<field>`) that cannot be satisfied."""
    s = {**DEFAULTS, **{k: v for k, v in sizes.items() if v is not None}}
    unknown = sorted(set(sizes) - set(DEFAULTS))
    _need(not unknown, f"data.dossier has unknown field(s) {unknown}: use {sorted(DEFAULTS)}")
    f = "data.dossier."
    _need(s["streams"] >= 1, f"{f}streams={s['streams']}: need >= 1")
    _need(s["episodes"] >= 1, f"{f}episodes={s['episodes']}: a stream needs at least one episode")
    _need(s["entities"] >= 1, f"{f}entities={s['entities']}: each episode introduces >= 1 entity")
    _need(1 <= s["attributes"] <= len(ATTRIBUTES),
          f"{f}attributes={s['attributes']}: between 1 and {len(ATTRIBUTES)} ({', '.join(ATTRIBUTES)})")
    _need(s["questions"] >= 1, f"{f}questions={s['questions']}: each episode asks >= 1 question")
    _need(s["horizon"] >= 1, f"{f}horizon={s['horizon']}: questions reach back >= 1 episode (this one)")
    _need(0.0 <= s["carry"] <= 1.0, f"{f}carry={s['carry']}: a share of the questions, in [0, 1]")
    _need(s["carry"] == 0.0 or s["horizon"] >= 2,
          f"{f}carry={s['carry']} asks about earlier episodes, but horizon={s['horizon']} never reaches "
          "them: give horizon >= 2 or set carry=0")
    for k in ("corrections", "reminders", "decoys"):
        _need(s[k] >= 0, f"{f}{k}={s[k]}: need >= 0")
    facts = s["entities"] * s["attributes"]
    _need(s["questions"] <= s["horizon"] * facts,
          f"{f}questions={s['questions']}: an episode can ask about at most horizon x entities x attributes "
          f"= {s['horizon'] * facts} distinct attributes")
    _need(s["decoys"] <= facts,
          f"{f}decoys={s['decoys']}: at most one decoy per attribute of the episode's entities ({facts})")
    _need(len(codes) >= 2 and len(set(codes)) == len(codes),
          f"data.codes={list(codes)}: need at least 2 distinct codes (a correction and a decoy need another value)")
    _need(all(first_word(c) == c for c in codes),
          f"data.codes={list(codes)}: codes must be lowercase words (answers are scored by their first word)")
    _need(all(k >= 1 for k in s["memory_sizes"]), f"{f}memory_sizes={list(s['memory_sizes'])}: each >= 1")
    _need(s["name_syllables"] in (2, 3),
          f"{f}name_syllables={s['name_syllables']}: 2 (190 names a split) or 3 (3,420 names a split)")
    if pool:
        need = s["episodes"] * s["entities"]
        _need(need <= pool, f"{f}episodes x entities = {need} names per stream; the split has {pool}")
    s["memory_sizes"] = tuple(int(k) for k in s["memory_sizes"])
    return s


def check_tree_room(live: int, config) -> None:
    """A flat tree (policy.max_depth=1) keeps every attribute as a child of the root: its
    fan-out and capacity must hold the `live` attributes still asked about (horizon x
    entities x attributes at most), or a ValueError names the fields."""
    if config.use_tree and config.max_depth == 1 and live > min(config.max_children, config.capacity - 1):
        raise ValueError(f"policy.max_depth=1 holds at most min(policy.max_children={config.max_children}, "
                         f"policy.capacity - 1={config.capacity - 1}) nodes, but these episodes keep {live} "
                         "attributes in play (data.dossier horizon x entities x attributes): raise "
                         "policy.max_children / policy.capacity or shrink data.dossier")


def turns_per_episode(sizes: dict) -> int:
    s = check_sizes(sizes)
    return s["entities"] * s["attributes"] + s["corrections"] + s["reminders"] + s["decoys"] + s["questions"]


def _turn(kind: str, name: str, attr: str, code: str, answer: str = "") -> dict:
    return {"kind": kind, "name": name, "attr": attr, "code": code, "answer": answer,
            "text": TEMPLATES[kind].format(name=name, attr=attr, code=code), "write": WRITES[kind]}


def make_dossier_tasks(split: str, seed: int = 0, codes: Sequence[str] = CODES, **sizes) -> list[dict]:
    """streams x episodes episodes, each a dict with its turns; stream by stream, episodes
    in order (task["stream"], task["episode"])."""
    if split not in SPLITS:
        raise ValueError(f"dossier split={split!r}: use one of {SPLITS}")
    pool = name_pool(split, check_sizes(sizes, codes)["name_syllables"])
    s = check_sizes(sizes, codes, len(pool))
    codes = tuple(codes)
    rng = np.random.default_rng([seed, SPLITS.index(split), 7])
    tasks = []
    for stream in range(s["streams"]):
        names = [pool[j] for j in rng.choice(len(pool), s["episodes"] * s["entities"], replace=False)]
        value: dict = {}   # (name, attr) -> current code
        born: dict = {}    # name -> episode that introduced it
        ever: set = set()  # attributes a correction or a decoy touched so far
        for ep in range(s["episodes"]):
            new = names[ep * s["entities"]:(ep + 1) * s["entities"]]
            facts = []
            for name in new:  # a group: one entity's attributes, shown together
                born[name] = ep
                for attr in sorted(rng.choice(ATTRIBUTES, s["attributes"], replace=False).tolist(),
                                   key=ATTRIBUTES.index):
                    value[(name, attr)] = codes[int(rng.integers(len(codes)))]
                    facts.append(_turn("fact", name, attr, value[(name, attr)]))
            live = [k for k in value if ep - born[k[0]] < s["horizon"]]  # askable attributes
            mine = [k for k in value if born[k[0]] == ep]
            events = ([("correction", k) for k in _pick(rng, live, s["corrections"])]
                      + [("reminder", k) for k in _pick(rng, live, s["reminders"])]
                      + [("decoy", k) for k in _pick(rng, mine, s["decoys"])])
            events = [events[j] for j in rng.permutation(len(events))]
            shown = []  # in the order shown; a correction changes the value from there on
            for kind, k in events:
                if kind == "correction":
                    value[k] = _other(rng, codes, (value[k],))
                shown.append((kind, k, value[k]))
            final = dict(value)
            rest = [_turn(kind, k[0], k[1], code if kind != "decoy" else _other(rng, codes, (code, final[k])))
                    for kind, k, code in shown]  # a decoy is wrong then and at question time
            touched = [k for kind, k in events if kind in ("correction", "decoy")]
            ever.update(touched)
            # questions: round(carry x questions) about earlier episodes' entities (the
            # attributes a decoy or correction touched first), the rest about this episode's
            # (touched first); each attribute once
            earlier = [k for k in live if born[k[0]] < ep]
            n_prev = min(len(earlier), int(round(s["carry"] * s["questions"])))
            asked = _prefer(rng, earlier, ever, n_prev)
            asked += _prefer(rng, mine, set(touched), s["questions"] - len(asked))
            asked += _prefer(rng, [k for k in earlier if k not in asked], ever, s["questions"] - len(asked))
            asked = [asked[j] for j in rng.permutation(len(asked))]
            questions = [_turn("question", k[0], k[1], "", answer=final[k]) for k in asked]
            turns = facts + rest + questions
            tasks.append({"id": f"dossier-{split}-{seed}-{stream}-{ep}", "stream": stream, "episode": ep,
                          "turns": turns, "prompt": turns[0]["text"],
                          "live": min(s["horizon"], ep + 1) * len(facts)})
    return tasks


def _prefer(rng, keys: list, first: set, n: int) -> list:
    """n of `keys`, those in `first` before the others, each group in a random order."""
    a = [k for k in keys if k in first]
    b = [k for k in keys if k not in first]
    return ([a[j] for j in rng.permutation(len(a))] + [b[j] for j in rng.permutation(len(b))])[:max(n, 0)]


def _pick(rng, keys: list, n: int) -> list:
    return [keys[j] for j in rng.choice(len(keys), min(n, len(keys)), replace=False)] if keys and n else []


def _other(rng, codes: tuple, avoid: tuple) -> str:
    """A code not in `avoid` (with 2 codes and 2 to avoid: not the last of them)."""
    choices = [c for c in codes if c not in avoid] or [c for c in codes if c != avoid[-1]]
    return choices[int(rng.integers(len(choices)))]


def _streams(tasks: Sequence[dict]) -> list[list[dict]]:
    by: dict = {}
    for t in tasks:
        by.setdefault(t.get("stream", t["id"]), []).append(t)
    return [sorted(v, key=lambda t: t.get("episode", 0)) for v in by.values()]


def dossier_baselines(tasks: Sequence[dict], codes: Sequence[str] = CODES,
                      memory_sizes: Sequence[int] = DEFAULTS["memory_sizes"]) -> dict:
    """Accuracies of the rules that need no training (see the module doc), each the mean
    over episodes of the share of questions answered right."""
    best, scores = _rule_scores(tasks, codes, memory_sizes)
    out = {"chance": 1.0 / len(tuple(codes)), "best_constant_code": best}
    out.update({r: float(np.mean([v for _, v in per])) for r, per in scores.items()})
    out["ceiling"] = 1.0
    return out


def rule_units(tasks: Sequence[dict], codes: Sequence[str] = CODES,
               memory_sizes: Sequence[int] = DEFAULTS["memory_sizes"]) -> dict:
    """Each rule's accuracy per stream (the mean of its episodes' shares), {rule: {stream:
    share}}: the units a held-out score's interval resamples (`metrics.intervals`), since
    a stream's episodes share one memory."""
    _, scores = _rule_scores(tasks, codes, memory_sizes)
    out = {}
    for rule, per in scores.items():
        by: dict = {}
        for unit, v in per:
            by.setdefault(unit, []).append(v)
        out[rule] = {unit: float(np.mean(v)) for unit, v in by.items()}
    out["chance"] = {unit: 1.0 / len(tuple(codes)) for unit in out["best_constant"]}
    return out


def _rule_scores(tasks: Sequence[dict], codes: Sequence[str], memory_sizes: Sequence[int]) -> tuple[str, dict]:
    """(the best constant code, {rule: [(stream, share right) per episode]}) for the rules but chance."""
    codes = tuple(codes)
    _need(len(codes) >= 2, f"data.codes={list(codes)}: baselines need at least 2 codes")
    _need(bool(tasks), "dossier baselines need at least one task")
    _need(all(any(t["kind"] == "question" for t in task["turns"]) for task in tasks),
          "data.dossier.questions=0: every episode needs a question to score")
    chance = 1.0 / len(codes)
    answers = [t["answer"] for task in tasks for t in task["turns"] if t["kind"] == "question"]
    best = max(codes, key=lambda c: (answers.count(c), -codes.index(c)))
    rules = ["best_constant", "last_code", "store_all", "no_corrections", "episode_only"] + \
        [f"memory_{k}" for k in memory_sizes]
    scores: dict = {r: [] for r in rules}
    for stream in _streams(tasks):
        unit = stream_unit(stream[0])
        every: dict = {}      # newest mention of any kind (store_all)
        first: dict = {}      # first fact (no_corrections)
        recent: dict = {}     # attribute -> (value, time of its last write) (memory_k)
        clock = 0
        for task in stream:
            episode: dict = {}
            last = None
            right = {r: [] for r in rules}
            for t in task["turns"]:
                key = (t["name"], t["attr"])
                if t["kind"] != "question":
                    last = t["code"]
                    every[key] = t["code"]
                    if t["kind"] == "fact":
                        first.setdefault(key, t["code"])
                    if t["write"] != "none":
                        episode[key] = t["code"]
                        clock += 1
                        recent[key] = (t["code"], clock)
                    continue
                gold = t["answer"]
                right["best_constant"].append(float(best == gold))
                right["last_code"].append(float(last == gold) if last else chance)
                for rule, memory in (("store_all", every), ("no_corrections", first), ("episode_only", episode)):
                    right[rule].append(float(memory[key] == gold) if key in memory else chance)
                order = sorted(recent, key=lambda k: -recent[k][1])
                for k in memory_sizes:
                    kept = set(order[:k])
                    right[f"memory_{k}"].append(float(recent[key][0] == gold) if key in kept else chance)
            for r in rules:
                scores[r].append((unit, float(np.mean(right[r]))))
    return best, scores


def stream_unit(task: dict) -> str:
    """The unit a task's score is resampled with: its stream (its id without one)."""
    return str(task.get("stream", task["id"]))


NO_TRAINING = ("chance", "best_constant", "last_code", "store_all", "no_corrections", "episode_only")


class DossierEnv:
    """Episodes of dossier streams, in lockstep (the trainer's and the evaluation's
    interface: reset / step / expert / abort / sample_observations)."""

    def __init__(self, split: str = "train", codes: Sequence[str] = CODES, max_turns=None, calibration: int = 32,
                 name_syllables: int = 2):
        self.split, self.codes, self.max_turns, self.calibration = split, tuple(codes), max_turns, calibration
        self.name_syllables = name_syllables  # the calibration's names come from the tasks' pool
        self.tasks: list = []

    @property
    def chance(self) -> float:
        return 1.0 / len(self.codes)

    def baselines(self, tasks: Sequence[dict]) -> dict:
        return dossier_baselines(tasks, self.codes)

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            turns = t.get("turns") or []
            if not turns or not all(isinstance(x, dict) and x.get("kind") in TEMPLATES for x in turns):
                raise ValueError(f"task {t.get('id')!r}: needs 'turns', each with a 'kind' of {sorted(TEMPLATES)}")
            if self.max_turns is not None and len(turns) > self.max_turns:
                raise ValueError(f"task {t.get('id')!r} has {len(turns)} turns; data.max_turns is "
                                 f"{self.max_turns}: raise data.max_turns or shrink data.dossier")
        self.tasks = list(tasks)
        self.turn = [0] * len(tasks)
        self.correct: list = [[] for _ in tasks]
        self.in_set: list = [[] for _ in tasks]
        self.done = [False] * len(tasks)
        return [t["turns"][0]["text"] for t in self.tasks]

    def check_policy(self, config, tasks: Sequence[dict]) -> None:
        """Refuse a tree that cannot hold what these episodes ask about: with a depth cap of
        1 every attribute is a child of the root, so the root's fan-out and the capacity
        must hold every attribute still asked about (task["live"])."""
        check_tree_room(max((int(t.get("live", 0)) for t in tasks), default=0), config)

    def expert(self, i: int, turn: int) -> str:
        """The right response at `turn` of episode i (SFT): the value for a question, "OK"
        otherwise."""
        turns = self.tasks[i]["turns"]
        t = turns[min(turn, len(turns) - 1)]
        return t["answer"] if t["kind"] == "question" else "OK"

    def expert_write(self, i: int, turn: int) -> str:
        """The write a perfect memory makes at `turn` of episode i: "insert" (a fact),
        "update" (a correction or a reminder), "none" (a decoy or a question)."""
        turns = self.tasks[i]["turns"]
        return turns[min(turn, len(turns) - 1)]["write"]

    def observation_key(self, i: int, turn: int) -> str:
        """What the observation at `turn` of episode i is about: its stream, entity and
        attribute (a question and the fact it asks about share it)."""
        task = self.tasks[i]
        t = task["turns"][min(turn, len(task["turns"]) - 1)]
        return f"{task.get('stream', task['id'])}/{t['name']}/{t['attr']}"

    def reads_response(self, i: int) -> bool:
        """Whether `step` reads episode i's response to its current observation: only a
        question's answer is scored; the response to a fact, correction, reminder or decoy
        is discarded (the rollout then generates none, `activemem.rollout`)."""
        return not self.done[i] and self.tasks[i]["turns"][self.turn[i]]["kind"] == "question"

    def step(self, actions: Sequence[str]):
        obs, rewards, dones, infos = [], [], [], []
        for i, text in enumerate(actions):
            turns = self.tasks[i]["turns"]
            n_q = sum(t["kind"] == "question" for t in turns)
            reward, scored, kind = 0.0, False, ""
            if not self.done[i]:
                t = turns[self.turn[i]]
                kind = t["kind"]
                scored = kind == "question"
                if scored:
                    word = first_word(text)
                    self.correct[i].append(word == t["answer"])
                    self.in_set[i].append(word in self.codes)
                    reward = float(word == t["answer"])
                self.turn[i] += 1
                self.done[i] = self.turn[i] >= len(turns)
            obs.append("" if self.done[i] else turns[self.turn[i]]["text"])
            rewards.append(reward)
            dones.append(self.done[i])
            infos.append({"reward": sum(self.correct[i]) / max(n_q, 1), "done": self.done[i],
                          "per_question_em": list(map(float, self.correct[i])),
                          "per_question_in_set": list(map(float, self.in_set[i])),
                          "answer": text, "scored": scored, "kind": kind})
        return obs, rewards, dones, infos

    def abort(self, i: int) -> None:
        self.done[i] = True

    def sample_observations(self) -> list[str]:
        """Observations of every kind from this split (a fixed seed): the query space's
        first calibration."""
        tasks = make_dossier_tasks(self.split, seed=12345, codes=self.codes, streams=max(1, self.calibration // 8),
                                   episodes=1, name_syllables=self.name_syllables)
        return [t["text"] for task in tasks for t in task["turns"]]


__all__ = ["ATTRIBUTES", "DEFAULTS", "DossierEnv", "NO_TRAINING", "TEMPLATES", "check_sizes", "dossier_baselines",
           "make_dossier_tasks", "rule_units", "stream_unit", "turns_per_episode"]
