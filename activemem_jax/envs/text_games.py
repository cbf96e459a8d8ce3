"""Text games played through the textworld engine, as one ActiveMem environment: TextWorld's
generated games (.z8, envs/textworld_games.py) and ALFWorld's game files (.tw-pddl,
envs/alfworld.py) are both a `textworld.Environment` whose step returns (state, score, done).

    env = TextGameEnv(max_turns=20)
    obs = env.reset(tasks)                  # task dicts with "game" (a file) and "kind"
    obs, rewards, dones, infos = env.step(texts)

A turn's reply is one command: its first non-empty line, lowercased, printable ASCII only,
at most MAX_COMMAND characters (a NUL byte reaching the Z-machine interpreter kills the
process: measured, jericho through textworld 1.7.0). The interpreter's own commands (quit,
restart, save, restore, undo, script) are refused with an observation saying so; the
turn is used. The observation holds the goal, the game's answer, the admissible commands
and the turns left. The reward is the game's score normalised to [0, 1] (score / max score;
ALFWorld's games score 1 when won): a step's reward is the change, the episode's the
normalised score at its end. An episode ends when the game is won or lost, or at max_turns.

`expert(i, turn)` is the first command of the game's own plan from the current state
(textworld's `policy_commands`: TextWorld's quest solver, ALFWorld's planner), the
walkthrough's command at `turn` where no plan is given (SFT). `text_game_baselines` scores
the rules that need no learning on the same episodes: a uniformly random admissible command
each turn, and the expert's sequence (the ceiling).
"""

from __future__ import annotations

import re
import collections
import json
import os
import warnings
from typing import Sequence

import numpy as np

MAX_COMMAND = 190  # the Z-machine interpreter takes at most 198 bytes a command
# the interpreter's own commands: they restart, end or save the game instead of acting in it
META = frozenset({"quit", "q", "restart", "save", "restore", "undo", "script", "unscript", "transcript",
                  "noscript"})
NO_TEXTWORLD = ("text games need the textworld package: pip install textworld==1.7.0 "
                "(bash launch/install.sh installs it)")


NO_PLANNER = ("ALFWorld's games run on textworld's PDDL engine, which needs the fast-downward planner: "
              "bash launch/install.sh alfworld (it compiles fast-downward-textworld, about 1.5 min)")
GAME_PARTS = ("pddl_domain", "pddl_problem", "grammar")  # an ALFWorld game file's (.tw-pddl) parts


def check_textworld() -> None:
    try:
        import textworld
    except ImportError:
        raise RuntimeError(NO_TEXTWORLD) from None
    del textworld


def check_planner() -> None:
    check_textworld()
    try:
        import fast_downward
    except ImportError:
        raise RuntimeError(NO_PLANNER) from None
    del fast_downward


def clean_command(text) -> str:
    """A reply as one game command: its first non-empty line, lowercased, printable ASCII,
    at most MAX_COMMAND characters."""
    text = text if isinstance(text, str) else str(text)
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    return " ".join(re.sub(r"[^\x20-\x7e]", "", line).lower().split())[:MAX_COMMAND]


def _banner(line: str) -> bool:
    """A line of ASCII art (TextWorld's title banner): mostly symbols, no words."""
    chars = line.replace(" ", "")
    return len(chars) >= 8 and sum(c.isalnum() for c in chars) < 0.3 * len(chars)


def request_infos():
    import textworld

    return textworld.EnvInfos(admissible_commands=True, policy_commands=True, objective=True, max_score=True,
                              won=True, lost=True, extras=["walkthrough"])


def read_game(path: str) -> dict:
    """An ALFWorld game file's JSON, checked: it names the file when it is unreadable or incomplete."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a readable ALFWorld game file ({type(e).__name__}: {e})") from None
    missing = [k for k in GAME_PARTS if not isinstance(data, dict) or not isinstance(data.get(k), str)]
    if missing:
        raise ValueError(f"{path}: an ALFWorld game file needs {', '.join(GAME_PARTS)} (text); missing {missing}")
    return data


def demangled_names(ids: Sequence[str]) -> dict:
    """ALFWorld's object ids as "<type> <k>" (k counts each type from 1 in id order);
    ids without ALFWorld's "_bar_" coordinates keep their name."""
    counts: collections.Counter = collections.Counter()
    out = {}
    for i in sorted(ids):
        if "_bar_" not in i:
            out[i] = i
            continue
        kind = i.split("_bar_")[0].lower()
        counts[kind] += 1
        out[i] = f"{kind} {counts[kind]}"
    return out


def _open_z8(path: str):
    """A TextWorld game (.z8 with its .json beside it)."""
    import textworld

    if not os.path.exists(path):
        raise FileNotFoundError(f"TextWorld game {path} is gone: delete the cache entry's folder to regenerate it")
    with warnings.catch_warnings():  # jericho: "not fully supported" (textworld keeps the score itself)
        warnings.simplefilter("ignore")
        return textworld.start(path, request_infos())


def _open_pddl(path: str):
    """An ALFWorld game file, its object ids shown as a type and a number."""
    check_planner()
    from textworld.envs import PddlEnv

    env = PddlEnv(request_infos())
    env.load(read_game(path))
    names = demangled_names(list(env._entity_infos))
    for key, info in env._entity_infos.items():
        info.name = names[key]
    return env


OPENERS = {"z8": _open_z8, "tw-pddl": _open_pddl}  # a task's "kind" -> a loaded textworld.Environment


def open_game(task: dict):
    kind = task.get("kind", "")
    if kind not in OPENERS:
        raise ValueError(f"task {task.get('id')!r}: kind {kind!r} is not a text game ({sorted(OPENERS)})")
    return OPENERS[kind](task["game"])


class TextGameEnv:
    def __init__(self, max_turns: int = 20):
        self.max_turns = max_turns
        self.tasks: list[dict] = []

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            if "game" not in t:
                raise ValueError(f"task {t.get('id')!r}: needs a game file (envs/textworld_games.py, envs/alfworld.py)")
        self.close()  # the last batch's games (each holds an interpreter or a planner)
        self.tasks = list(tasks)
        n = len(tasks)
        self.games = [open_game(t) for t in tasks]
        self.states = [g.reset() for g in self.games]
        self.turn, self.done, self.score = [0] * n, [False] * n, [0.0] * n
        self.last = [s.feedback for s in self.states]
        self.walkthrough = [list(s.get("extra.walkthrough") or []) for s in self.states]
        self.max_score = [float(s.get("max_score") or 1) or 1.0 for s in self.states]
        # the goal: TextWorld's objective; ALFWorld says it in its first answer ("Your task is to: ...")
        said = [re.search(r"Your task is to:?\s*(.+)", s.feedback or "") for s in self.states]
        self.goals = [(s.get("objective") or (m.group(1) if m else "") or t.get("question") or "").strip()
                      for s, m, t in zip(self.states, said, tasks)]
        return [self.observation(i) for i in range(n)]

    def turns(self, i: int) -> int:
        return int(self.tasks[i].get("max_turns", self.max_turns))

    def goal(self, i: int) -> str:
        return self.goals[i]

    def observation(self, i: int) -> str:
        commands = ", ".join(self.states[i].get("admissible_commands") or [])
        # the game's answer without its title banner, its prompt line (">  ... -= Room =-0/1") or the goal again
        last = "\n".join(ln for ln in self.last[i].replace(self.goal(i) or "\0", "").splitlines()
                         if not _banner(ln) and not ln.lstrip().startswith(">") and ln.strip() != "Your task is to:")
        last = re.sub(r"\n{3,}", "\n\n", last).strip()
        return (f"Goal: {self.goal(i)}\n\n{last}\n\nAdmissible commands: {commands}\n"
                f"Turns left: {self.turns(i) - self.turn[i]}. Reply with one command.")

    def expert(self, i: int, turn: int) -> str:
        """The game's plan's next command from the current state, else the walkthrough's
        command at `turn` (SFT)."""
        plan = self.states[i].get("policy_commands") or []
        if plan:
            return plan[0]
        walk = self.walkthrough[i]
        return walk[turn] if turn < len(walk) else "look"

    def _act(self, i: int, command: str):
        """(feedback, normalised score, done) of one command."""
        words = command.split()
        if not words or words[0] in META:
            what = "an empty command" if not words else f"{words[0]!r} is the interpreter's own command"
            return f"Nothing happens: {what}; reply with one of the admissible commands.", self.score[i], False
        state, score, done = self.games[i].step(command)
        self.states[i] = state
        return state.feedback, max(float(score or 0), 0.0) / self.max_score[i], bool(done)

    def step(self, actions: Sequence[str]):
        obs, rewards, dones, infos = [], [], [], []
        for i in range(len(actions)):
            reward = 0.0
            if not self.done[i]:
                text, score, ended = self._act(i, clean_command(actions[i]))
                self.turn[i] += 1
                reward, self.score[i], self.last[i] = score - self.score[i], score, text
                self.done[i] = ended or self.turn[i] >= self.turns(i)
            obs.append("" if self.done[i] else self.observation(i))
            rewards.append(reward)
            dones.append(self.done[i])
            won = bool(self.states[i].get("won"))
            infos.append({"reward": self.score[i], "done": self.done[i], "scored": True, "answer": "",
                          "won": won, "per_question_em": [float(won)]})
        return obs, rewards, dones, infos

    def abort(self, i: int) -> None:
        self.done[i] = True

    def close(self) -> None:
        for g in getattr(self, "games", []):
            try:
                g.close()
            except Exception:  # an interpreter already gone
                pass
        self.games = []


def text_game_baselines(tasks: Sequence[dict], max_turns: int, seed: int = 0) -> dict:
    """Scores (mean normalised score) of the rules that need no learning on `tasks`:
    "random" (a uniformly random admissible command each turn, for max_turns turns) and
    "expert" (the game's plan, replayed: the ceiling), with "units" {rule: {task id: score}}."""
    rng = np.random.default_rng(seed)
    units: dict = {}
    env = TextGameEnv(max_turns)
    for rule in ("random", "expert"):
        env.reset(tasks)
        for turn in range(max_turns):
            if all(env.done):
                break
            replies = []
            for i, state in enumerate(env.states):
                if rule == "expert":
                    replies.append(env.expert(i, turn))
                else:
                    valid = list(state.get("admissible_commands") or ["look"])
                    replies.append(valid[rng.integers(len(valid))])
            env.step(replies)
        units[rule] = {t["id"]: s for t, s in zip(tasks, env.score)}
        env.close()
    n = max(len(tasks), 1)
    return {"random": sum(units["random"].values()) / n, "expert": sum(units["expert"].values()) / n,
            "units": units}


__all__ = ["GAME_PARTS", "META", "MAX_COMMAND", "NO_PLANNER", "NO_TEXTWORLD", "OPENERS", "TextGameEnv",
           "check_planner", "check_textworld", "clean_command", "demangled_names", "open_game", "read_game",
           "request_infos", "text_game_baselines"]
