"""ScienceWorld (the `scienceworld` package's simulator, on the JVM) as an ActiveMem environment.

    tasks = make_sciworld_tasks(("boil", "find-living-thing"), "train", n_tasks=16)
    env = SciWorldEnv(max_turns=30)
    obs = env.reset(tasks)                      # task, room, action templates, objects
    obs, rewards, dones, infos = env.step(texts)

A task is a (task name, variation) pair of one of ScienceWorld's splits (its own train,
dev and test variations: `data.split`). A turn's reply is one action (its first line,
at most 200 printable characters; anything else is what the simulator answers "No known
action matches that input" to, and the turn is used). The observation holds the task,
the simulator's answer, the action templates and the objects in view (the compact form
of the valid actions: the full list runs to hundreds) and the turns left. The reward is
the simulator's score normalised to [0, 1] (score / 100; a negative score, a failed task,
counts 0): a step's reward is the change, the episode's the score at its end (some tasks
start above 0: find-living-thing at 0.08). An episode
ends when the simulator says the task is complete or failed, or at max_turns.

`expert(i, turn)` replays the simulator's gold action sequence (SFT). `sciworld_baselines`
scores the rules that need no learning on the same episodes: a uniformly random valid
action each turn, and the gold sequence (the ceiling).

Simulators are pooled per process (`Simulators`): a batch of episodes takes one started
JVM each (about 1 s to start, 0.7 s to load a task) and leaves it for the next batch; the
pool closes them at exit and when the process ends on an error. A simulator that dies
mid-episode (the JVM crashed or was killed) is restarted, and that episode ends with
reward 0 and info["simulator"] saying why; the run goes on. Without Java the first use
says what to install.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import itertools
import re
import shutil
import threading
from typing import Optional, Sequence

import numpy as np

SPLITS = ("train", "dev", "test")
NO_JAVA = ("ScienceWorld's simulator runs on Java 8+, and no `java` is on PATH: install a JRE "
           "(Debian / Ubuntu: apt-get install default-jre-headless) and `pip install scienceworld==1.2.3` "
           "(or `bash launch/install.sh envs`)")
MAX_ACTION = 200


def clean_action(text) -> str:
    """A reply as one simulator action: its first non-empty line, printable, at most
    MAX_ACTION characters."""
    text = text if isinstance(text, str) else str(text)
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    return re.sub(r"[^\x20-\x7e]", "", line).strip()[:MAX_ACTION]


class Simulators:
    """Started ScienceWorld simulators (one JVM each), reused across batches."""

    def __init__(self, step_limit: int = 10_000):
        self.step_limit = step_limit
        self.sims: list = []
        self.lock = threading.Lock()
        atexit.register(self.close)

    @staticmethod
    def check_java() -> None:
        if shutil.which("java") is None:
            raise RuntimeError(NO_JAVA)
        try:
            import scienceworld  # noqa: F401
        except ImportError:
            raise RuntimeError(NO_JAVA) from None

    def _start(self):
        from scienceworld import ScienceWorldEnv

        return ScienceWorldEnv("", envStepLimit=self.step_limit)

    def take(self, n: int) -> list:
        """n started simulators (started here when the pool has fewer)."""
        with self.lock:
            if len(self.sims) < n:
                self.check_java()
                self.sims += [self._start() for _ in range(n - len(self.sims))]
            return self.sims[:n]

    def restart(self, k: int):
        """Simulator k replaced by a fresh one (the old one closed, whatever its state)."""
        with self.lock:
            _stop(self.sims[k])
            self.sims[k] = self._start()
            return self.sims[k]

    def close(self) -> None:
        with self.lock:
            for sim in self.sims:
                _stop(sim)
            self.sims = []


def _stop(sim) -> None:
    """Close a simulator and reap its JVM (killed after 5 s), dead or alive: no zombie stays."""
    try:
        sim.close()
    except Exception:  # a dead JVM: nothing to close
        pass
    proc = getattr(getattr(sim, "_gateway", None), "java_process", None)
    if proc is not None:
        try:
            proc.wait(timeout=5)
        except Exception:
            proc.kill()
            proc.wait()


POOL = Simulators()


def task_names() -> list[str]:
    return list(POOL.take(1)[0].get_task_names())


def make_sciworld_tasks(names: Sequence[str], split: str, n_tasks: int, simplification: str = "easy") -> list[dict]:
    """Up to n_tasks (task name, variation) pairs of `split` (ScienceWorld's own variation
    splits), the tasks taken in turn (all 30 when `names` is empty), each task's variations
    in order."""
    if split not in SPLITS:
        raise ValueError(f"data.split={split!r}: ScienceWorld's splits are {SPLITS}")
    sim = POOL.take(1)[0]
    known = list(sim.get_task_names())
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"data.scienceworld.tasks: no ScienceWorld task {bad[0]!r}; the tasks are: {', '.join(known)}")
    by_task = []
    for name in names or known:
        sim.load(name, 0, simplification)
        getter = {"train": sim.get_variations_train, "dev": sim.get_variations_dev, "test": sim.get_variations_test}
        by_task.append([(name, int(v)) for v in getter[split]()])
    pairs = [p for row in itertools.zip_longest(*by_task) for p in row if p is not None]
    return [{"id": f"sciworld-{name}-{var}", "task_name": name, "variation": var, "split": split,
             "simplification": simplification, "answers": [["complete"]]} for name, var in pairs[:n_tasks]]


class SciWorldEnv:
    def __init__(self, max_turns: int = 30, pool: Optional[Simulators] = None):
        self.max_turns, self.pool = max_turns, pool or POOL
        self.tasks: list[dict] = []

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            if "task_name" not in t or "variation" not in t:
                raise ValueError(f"task {t.get('id')!r}: needs task_name and variation "
                                 "(activemem_jax/envs/scienceworld.make_sciworld_tasks)")
        self.tasks = list(tasks)
        self.sims = self.pool.take(len(tasks))
        n = len(tasks)
        self.turn, self.done, self.score = [0] * n, [False] * n, [0.0] * n
        self.gold: list[list[str]] = [[] for _ in range(n)]
        self.desc, self.last, self.dead = [""] * n, [""] * n, [""] * n
        with concurrent.futures.ThreadPoolExecutor(max(1, n)) as pool:
            list(pool.map(self._load, range(n)))
        return [self.observation(i) for i in range(n)]

    def _load(self, i: int) -> None:
        t = self.tasks[i]
        for attempt in (0, 1):  # a simulator left dead by an earlier batch is restarted once
            try:
                sim = self.sims[i]
                sim.load(t["task_name"], int(t["variation"]), t.get("simplification", "easy"), generateGoldPath=True)
                obs, info = sim.reset()
                self.score[i] = max(float(info["score"]), 0.0) / 100.0  # some tasks start above 0
                self.gold[i] = list(sim.get_gold_action_sequence())
                self.desc[i], self.last[i] = sim.get_task_description(), obs
                return
            except Exception as e:  # py4j: the JVM is gone
                if attempt:
                    raise RuntimeError(f"ScienceWorld could not load {t['id']!r}: {e}") from e
                self.sims[i] = self.pool.restart(i)

    def turns(self, i: int) -> int:
        return int(self.tasks[i].get("max_turns", self.max_turns))

    def observation(self, i: int) -> str:
        sim = self.sims[i]
        try:
            templates = ", ".join(sim.get_possible_actions())
            objects = ", ".join(sim.get_possible_objects())
        except Exception:
            templates = objects = "(the simulator is not answering)"
        return (f"Task: {self.desc[i]}\n\n{self.last[i].strip()}\n\nActions (OBJ: an object): {templates}\n"
                f"Objects: {objects}\nTurns left: {self.turns(i) - self.turn[i]}. Reply with one action.")

    def expert(self, i: int, turn: int) -> str:
        """The simulator's gold action at `turn` (SFT)."""
        gold = self.gold[i]
        return gold[turn] if turn < len(gold) else "look around"

    def _act(self, i: int, action: str):
        try:
            obs, _, completed, info = self.sims[i].step(action)
            return obs, bool(completed), max(float(info["score"]), 0.0) / 100.0, ""
        except Exception as e:  # the JVM died: restart it for later batches, end this episode
            self.sims[i] = self.pool.restart(i)
            return "", True, 0.0, f"simulator died ({type(e).__name__}); restarted, episode ended with reward 0"

    def step(self, actions: Sequence[str]):
        live = [i for i in range(len(actions)) if not self.done[i]]
        with concurrent.futures.ThreadPoolExecutor(max(1, len(live))) as pool:
            outs = dict(zip(live, pool.map(lambda i: self._act(i, clean_action(actions[i])), live)))
        obs, rewards, dones, infos = [], [], [], []
        for i in range(len(actions)):
            reward = 0.0
            if i in outs:
                text, completed, score, dead = outs[i]
                self.turn[i] += 1
                if dead:
                    self.dead[i], self.score[i] = dead, 0.0
                else:
                    reward, self.score[i], self.last[i] = score - self.score[i], score, text
                self.done[i] = completed or bool(dead) or self.turn[i] >= self.turns(i)
            obs.append("" if self.done[i] else self.observation(i))
            rewards.append(reward)
            dones.append(self.done[i])
            info = {"reward": self.score[i], "done": self.done[i], "scored": True, "answer": "",
                    "per_question_em": [float(self.score[i] >= 1.0)]}
            if self.dead[i]:
                info["simulator"] = self.dead[i]
            infos.append(info)
        return obs, rewards, dones, infos

    def abort(self, i: int) -> None:
        self.done[i] = True


def sciworld_baselines(tasks: Sequence[dict], max_turns: int, seed: int = 0, pool: Optional[Simulators] = None) -> dict:
    """Scores (mean normalised score) of the rules that need no learning on `tasks`:
    "random" (a uniformly random valid action each turn, for max_turns turns) and "gold"
    (the simulator's gold sequence: the ceiling), with "units" {rule: {task id: score}}."""
    rng = np.random.default_rng(seed)
    units: dict = {"random": {}, "gold": {}}
    env = SciWorldEnv(max_turns, pool)
    for rule in ("random", "gold"):
        env.reset(tasks)
        for turn in range(max_turns):
            if all(env.done):
                break
            replies = []
            for i, sim in enumerate(env.sims):
                if rule == "gold":
                    replies.append(env.expert(i, turn))
                else:
                    valid = [] if env.done[i] else list(sim.get_valid_action_object_combinations())
                    replies.append(valid[rng.integers(len(valid))] if valid else "look around")
            env.step(replies)
        units[rule] = {t["id"]: s for t, s in zip(tasks, env.score)}
    n = max(len(tasks), 1)
    return {"random": sum(units["random"].values()) / n, "gold": sum(units["gold"].values()) / n, "units": units}


__all__ = ["NO_JAVA", "POOL", "SPLITS", "SciWorldEnv", "Simulators", "clean_action", "make_sciworld_tasks",
           "sciworld_baselines", "task_names"]
