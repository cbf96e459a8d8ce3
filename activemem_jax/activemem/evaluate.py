"""Evaluation on N-objective QA: ActiveMem against the frozen model's baselines.

Variants (the ActiveMem paper's Table 7 rows on our stack):
- `activemem`: the policy config as given (latents, tree), untrained or restored.
- `plain`: the frozen model with MEM1's prompt and the full history (K = 0, no tree).
- `truncate`: the same prompt and rollout pipeline with MEM1's constant context
  (only the previous turn kept), K = 0, no tree.
- `vanilla`: the paper's Table 1 "Vanilla" row, the frozen model prompted with the full
  history and no memory: exactly `plain`, so an alias of it (rows keep the name asked for).
- `cot`: `vanilla` with the chain-of-thought instruction `COT_INSTRUCTION` in the system
  message (after the config's own system prompt, if it sets one).
- `memorybank`, `expel`: Table 1's retrieval memory, `vanilla` plus a text experience store
  kept across the variant's tasks in order (`activemem/text_memory.py`: every episode, or
  the successful ones, retrieved by BM25 into the first user turn); rows carry its
  telemetry (memory_entries, memory_retrieved, memory_chars, memory_stored, ...).

    rows = evaluate(model, engine, retriever, base_config, variants, n_objectives, tasks_for_n)
    table = summarize(rows)     # {variant: {N: {em, f1, peak_tokens, ...}}}
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import numpy as np

from activemem_jax import metrics
from activemem_jax.activemem import text_memory as tm
from activemem_jax.activemem.rollout import ActiveMem, PolicyConfig, Trajectory
from activemem_jax.envs import MultiObjectiveQAEnv

VARIANTS = {
    "activemem": {},
    "plain": dict(num_latents=0, use_tree=False, layout="full"),
    "truncate": dict(num_latents=0, use_tree=False, layout="constant"),
}
VARIANTS["vanilla"] = VARIANTS["plain"]  # Table 1's Vanilla: the frozen model, full history, no memory
for _name in tm.POLICIES:  # Table 1's retrieval memory: vanilla + a text store (rollout_with_memory)
    VARIANTS[_name] = VARIANTS["plain"]
COT_INSTRUCTION = "Think step by step before you answer."
METRICS = ("em", "f1", "peak_tokens", "task_tokens", "peak_beyond_task", "dependency_length", "time_s",
           "compile_s", "turns")


def variant_config(base: PolicyConfig, variant: str) -> PolicyConfig:
    """The policy an evaluation variant runs: activemem (the config's), plain (= vanilla),
    truncate, cot (the no-memory baselines), memorybank and expel (vanilla's policy; their
    text store is evaluate's), or an ablation of `activemem.ablations.ABLATIONS`
    that changes the policy ("w/o HLMT", "flat tree", ...: the same table bench_memory trains)."""
    from activemem_jax.activemem.ablations import evaluation_ablations, evaluation_overrides

    if variant == "cot":  # the system message replaces the template's default, so "default" -> the instruction
        own = "" if base.system_prompt == "default" else base.system_prompt.rstrip() + "\n\n"
        return dataclasses.replace(base, **VARIANTS["vanilla"], system_prompt=own + COT_INSTRUCTION)
    if variant in VARIANTS:
        return dataclasses.replace(base, **VARIANTS[variant])
    if variant in evaluation_ablations():
        return dataclasses.replace(base, **evaluation_overrides(variant))
    raise ValueError(f"variant {variant!r}: choose from {sorted([*VARIANTS, 'cot']) + evaluation_ablations()}")


def trajectory_row(variant: str, traj: Trajectory, task_tokens: int = 0) -> dict:
    """task_tokens: the length of the task statement (the N questions), which every layout
    that keeps the task in view carries on each turn; peak_beyond_task = peak_tokens minus
    it is the working context (history, summary, observation, latent slots)."""
    golds = traj.task["answers"]
    answers = metrics.split_answers(traj.info.get("answer") or "")
    n = len(golds)
    f1 = (sum(metrics.f1(a, g) for a, g in zip(answers, golds)) / n) if len(answers) == n else 0.0
    return {"variant": variant, "n_objectives": n, "task": traj.task.get("id"), "uid": traj.uid,
            "answer": traj.info.get("answer"), "reward": traj.reward, "em": traj.reward / n, "f1": f1,
            "peak_tokens": traj.peak_tokens, "task_tokens": task_tokens,
            "peak_beyond_task": traj.peak_tokens - task_tokens, "dependency_length": traj.dependency_length,
            "time_s": round(traj.time_s, 3), "compile_s": round(traj.compile_s, 3),
            "turns": len(traj.steps), "format_failure": format_failure(traj),
            # tool-call telemetry where the environment keeps it (QA: searches; the search agent:
            # opens, tool_calls and capped, envs/search_agent.py)
            **{k: traj.info[k] for k in ("searches", "opens", "tool_calls", "capped") if k in traj.info},
            "tree_actions": [s.tree_action for s in traj.steps],
            "context_overflow": bool(traj.info.get("context_overflow", False)),
            "responses": [s.text for s in traj.steps],
            # memorybank / expel: what the text store held, put in the prompt and kept (text_memory.py)
            **{k: traj.info[k] for k in (*tm.TELEMETRY, "memory_sources") if k in traj.info},
            # FEVER: label right and a gold evidence set among the retrieved pages (envs/fever.py;
            # None where the claim has no evidence ids)
            **({"fever_score": traj.info["fever_score"]} if "fever_score" in traj.info else {})}


def format_failure(traj: Trajectory) -> Optional[float]:
    """The share of a trajectory's replies that were not a well-formed action by its
    environment's own parser: the QA environments count invalid turns (neither one search
    nor one answer: `info["invalid"]`), a one-turn environment (choice, math) whose reply
    gave no parsable answer fails its one turn; None where the environment says neither."""
    info = traj.info
    if "invalid" in info:
        return info["invalid"] / max(len(traj.steps), 1)
    key = next((k for k in ("answer", "prediction") if k in info), None)
    if key is not None and len(traj.steps) == 1:
        return float(info[key] is None)
    return None


def evaluate(model, engine, retriever, base: PolicyConfig, variants: Sequence[str],
             tasks_by_n: dict, max_turns: Callable[[int], int], *, seed: int = 0,
             temperature: float = 0.01, restore: Optional[Callable[[ActiveMem], None]] = None,
             on_batch: Optional[Callable[[str, int, list], None]] = None,
             together: bool = True, make_env: Optional[Callable] = None,
             text_memory: Optional[tm.TextMemoryConfig] = None) -> list[dict]:
    """Rollouts of every variant on every N; `restore(policy)` loads trained controller
    params / tree into the `activemem` variant. Tree actions are greedy.

    together=True runs all N of a variant in one rollout batch (each task with its own
    turn budget), so a variant costs one pass of turns, not one per N; a trajectory's
    time is then its wall time inside that shared batch. together=False: one batch per
    (variant, N). make_env(max_turns): the environment of a registered task
    (`activemem_jax.tasks`); None: multi-objective QA over `retriever`.

    memorybank / expel: one text store per variant, kept across its batches; its tasks
    run `text_memory.batch` at a time in order (`text_memory.rollout_with_memory`;
    text_memory None: `TextMemoryConfig()`'s defaults)."""
    if make_env is None:
        make_env = lambda max_turns: MultiObjectiveQAEnv(retriever, max_turns=max_turns)  # noqa: E731
    rows = []
    for variant in variants:
        policy = ActiveMem(model, engine, variant_config(base, variant), seed=seed)
        if restore is not None and variant == "activemem":
            restore(policy)
        batches = ([[t for _, ts in sorted(tasks_by_n.items()) for t in ts]] if together
                   else [tasks for _, tasks in sorted(tasks_by_n.items())])
        memory = tm.TextMemory(variant, text_memory or tm.TextMemoryConfig()) if variant in tm.POLICIES else None
        for tasks in batches:
            tasks = [{**t, "max_turns": max_turns(len(t["answers"]))} for t in tasks]
            longest = max(t["max_turns"] for t in tasks)
            if memory is None:
                trajectories = policy.rollout(make_env(longest), tasks, seed=seed, greedy=True,
                                              temperature=temperature, commit=False).trajectories
            else:
                trajectories = tm.rollout_with_memory(memory, policy, lambda: make_env(longest), tasks, seed=seed,
                                                      greedy=True, temperature=temperature, commit=False)
            by_n: dict = {}
            for t in trajectories:
                by_n.setdefault(len(t.task["answers"]), []).append(
                    trajectory_row(variant, t, task_tokens(model.tokenizer, t.task, make_env)))
            for n, batch in sorted(by_n.items()):
                rows += batch
                if on_batch is not None:
                    on_batch(variant, n, batch)
    return rows


def task_tokens(tokenizer, task: dict, make_env: Optional[Callable] = None) -> int:
    """Tokens of the task statement as the environment shows it."""
    prompt = make_env(1).reset([task])[0] if make_env is not None else MultiObjectiveQAEnv.initial_prompt(task)
    return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])


def summarize(rows: Sequence[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r["variant"], {}).setdefault(r["n_objectives"], []).append(r)
    return {v: {n: {"tasks": len(rs), **{m: sum(r[m] for r in rs) / len(rs) for m in METRICS},
                    "peak_tokens_max": max(r["peak_tokens"] for r in rs), **_format(rs), **_fever(rs),
                    **tm.summary(rs)}
                for n, rs in sorted(by_n.items())}
            for v, by_n in out.items()}


def _format(rows: Sequence[dict]) -> dict:
    """format_failure's mean over the rows whose environment says it (`format_failure`)."""
    shares = [r["format_failure"] for r in rows if r.get("format_failure") is not None]
    return {"format_failure": sum(shares) / len(shares)} if shares else {}


def _fever(rows: Sequence[dict]) -> dict:
    """FEVER score's mean over the rows that have one (claims with evidence ids), and their count."""
    scored = [r["fever_score"] for r in rows if r.get("fever_score") is not None]
    return {"fever_score": sum(scored) / len(scored), "fever_scored": len(scored)} if scored else {}


# ---------------------------------------------------------------- recall (envs/recall.py)
def evaluate_recall(policy: ActiveMem, tasks: Sequence[dict], *, split: str = "test", seed: int = 0,
                    temperature: float = 0.01, batch: int = 16, codes: Optional[Sequence[str]] = None) -> dict:
    """Held-out recall accuracy (greedy tree actions, near-greedy decoding) with the tree
    telemetry of the evaluation rollouts, the share of answers outside the code set
    (`format_failure`) and the rules that need no training on the same tasks
    (`baselines`, envs.recall.recall_baselines).

    Read-only: nothing is committed to the policy's tree or query space (the telemetry is
    `policy.preview`'s, on a copy), and a query space calibrated for the evaluation is
    put back as it was, so the policy's state is the same before and after."""
    from activemem_jax.activemem.commit import telemetry
    from activemem_jax.envs.recall import CODES, RecallEnv, rule_units

    env = RecallEnv(split, codes=codes or CODES)
    baselines = env.baselines(tasks)
    state = policy.memory_state
    trajs, counts, sizes, depth = [], {}, [], 0
    try:
        for i in range(0, len(tasks), batch):
            part = list(tasks[i:i + batch])
            result = policy.rollout(env, part, seed=seed, greedy=True, temperature=temperature,
                                    uids=range(i, i + len(part)), commit=False)
            trajs += result.trajectories
            stats = policy.preview(result)
            for k in ("inserts", "updates", "pruned", "merged", "turns_log_full"):
                counts[k] = counts.get(k, 0) + stats.get(k, 0)
            sizes.append(stats.get("tree_size", 0.0))  # the mean episode tree (episode scope) or the tree
            depth = max(depth, stats.get("tree_depth", 0))
    finally:
        policy.memory_state = state
    stats = {**telemetry(trajs, counts, policy.tree), "tree_size": sum(sizes) / max(len(sizes), 1),
             "tree_depth": depth}
    rewards = [t.reward for t in trajs]
    in_set = [x for t in trajs for x in t.info.get("per_question_in_set", ())]
    return {"accuracy": sum(rewards) / max(len(rewards), 1), "chance": env.chance, "tasks": len(trajs),
            "format_failure": 1.0 - sum(in_set) / len(in_set) if in_set else 1.0, "baselines": baselines,
            **stats, "units": unit_scores(trajs), "rule_units": rule_units(tasks, env.codes)}


def unit_scores(trajs) -> dict:
    """{unit: mean reward} over the trajectories of each unit (a task, or a dossier stream:
    `envs.dossier.stream_unit`), the scores `metrics.intervals` resamples."""
    from activemem_jax.envs.dossier import stream_unit

    by: dict = {}
    for t in trajs:
        by.setdefault(stream_unit(t.task), []).append(t.reward)
    return {u: float(np.mean(v)) for u, v in by.items()}


def evaluate_streams(policy: ActiveMem, tasks: Sequence[dict], *, split: str = "test", seed: int = 0,
                     temperature: float = 0.01, codes: Optional[Sequence[str]] = None,
                     forced_writes: Sequence[str] = ()) -> dict:
    """Held-out accuracy on dossier streams (envs/dossier.py): every stream's episodes in
    order, episode e of all streams as one batch, each batch committed (with its
    maintenance) before the next, so later episodes read what earlier ones stored. The
    commits go to the policy's tree and query space for the length of the evaluation and
    are then put back: the policy's state is the same before and after.

    Returns accuracy, format_failure, the baselines on the same tasks
    (`envs.dossier.dossier_baselines`), the summed commit telemetry (inserts, updates,
    pruned, merged), the final tree's size and depth histogram, `per_episode`: accuracy and
    mean nodes per tree after each episode's commit, `actions`: for each
    observation kind, the share of noop / insert / update the tree head chose, and
    `questions`: accuracy and the share that found a path ({"n", "accuracy", "path"}) for
    all questions and by what the stream showed before them (`question_kinds`), and
    `leaves`: {"n", "share", "accuracy"} by where each question's path ended
    (`leaf_origin`), which says whether answers are lost in search or in reading.

    forced_writes: observation kinds ("question", "decoy", ...) whose tree action is the
    write a perfect memory makes (the environment's `write`: none for a question or a
    decoy) instead of the head's, the other kinds' by the head: a diagnosis of what the
    head's choices on those kinds cost (the row then says "forced_writes").

    With tree_scope='stream' the streams are replayed in batches of at most
    `policy.stream_slots` (the trees the policy keeps, a shape its checkpoints fix), each
    batch from the policy's state as it was before the evaluation: more streams than slots
    score as the batches would alone."""
    from activemem_jax.activemem.controller import TREE_ACTIONS
    from activemem_jax.envs.dossier import CODES, DossierEnv, rule_units

    env = DossierEnv(split, codes=codes or CODES)
    check_forced_writes(forced_writes)
    baselines = env.baselines(tasks)
    streams = list(dict.fromkeys(t["stream"] for t in tasks))
    size = policy.config.stream_slots if policy.config.tree_scope == "stream" else max(len(streams), 1)
    state = policy.memory_state
    out = {"trajs": [], "counts": {}, "mix": {}, "episodes": {}, "depths": [], "seen": {}, "asked": {}, "leaves": {}}
    try:
        for i in range(0, len(streams), size):
            batch = set(streams[i:i + size])
            policy.memory_state = state
            _replay_streams(policy, env, [t for t in tasks if t["stream"] in batch], seed, temperature, out,
                            set(forced_writes))
    finally:
        policy.memory_state = state
    trajs, counts, mix, asked, leaves = out["trajs"], out["counts"], out["mix"], out["asked"], out["leaves"]
    depths = np.concatenate(out["depths"]) if out["depths"] else np.zeros((0,), np.int32)
    histogram = {int(d): int((depths == d).sum()) for d in sorted(set(depths.tolist())) if d > 0}
    per_episode = [{"episode": e, "accuracy": float(np.mean(acc)), "nodes": float(np.mean(nodes))}
                   for e, (acc, nodes) in sorted(out["episodes"].items())]
    rewards = [t.reward for t in trajs]
    in_set = [x for t in trajs for x in t.info.get("per_question_in_set", ())]
    actions = {kind: {a: n / max(sum(row), 1) for a, n in zip(TREE_ACTIONS, row)} for kind, row in mix.items()}
    return {"accuracy": sum(rewards) / max(len(rewards), 1), "chance": env.chance, "tasks": len(trajs),
            "format_failure": 1.0 - sum(in_set) / len(in_set) if in_set else 1.0, "baselines": baselines,
            **counts, "per_episode": per_episode, "tree_size": int(sum(histogram.values())),
            "depth_histogram": histogram, **({"forced_writes": sorted(forced_writes)} if forced_writes else {}),
            "actions": actions, "questions": {k: {"n": len(v), "accuracy": float(np.mean([em for em, _ in v])),
                                                  "path": float(np.mean([p for _, p in v]))}
                                              for k, v in sorted(asked.items())},
            "leaves": {k: {"n": len(leaves[k]), "share": len(leaves[k]) / max(sum(map(len, leaves.values())), 1),
                           "accuracy": float(np.mean(leaves[k]))} for k in LEAF_ORIGINS if k in leaves},
            "units": unit_scores(trajs), "rule_units": rule_units(tasks, env.codes)}


def check_forced_writes(kinds: Sequence[str]) -> None:
    """A ValueError unless every name in `kinds` is a dossier observation kind
    (`evaluate_streams(forced_writes=...)`)."""
    from activemem_jax.envs.dossier import TEMPLATES

    unknown = sorted(set(kinds) - set(TEMPLATES))
    if unknown:
        raise ValueError(f"forced_writes {unknown}: observation kinds are {sorted(TEMPLATES)}")


def _replay_streams(policy: ActiveMem, env, tasks: Sequence[dict], seed: int, temperature: float,
                    out: dict, forced: set = frozenset()) -> None:
    """evaluate_streams' replay of one batch of streams (every stream's episodes in order,
    episode e of all of them as one rollout, committed before the next), added into `out`;
    the turns of the `forced` kinds write what the environment says (`env.expert_write`)."""
    from activemem_jax.data.streams import StreamOrder

    def expert(i: int, turn: int):
        turns = env.tasks[i]["turns"]
        return env.expert_write(i, turn) if turns[min(turn, len(turns) - 1)]["kind"] in forced else None

    order = StreamOrder(tasks, lanes=len({t["stream"] for t in tasks}))
    used = set()
    for e in range(order.episodes):
        part = next(order)
        result = policy.rollout(env, part, seed=seed, greedy=True, temperature=temperature,
                                uids=[t["stream"] * order.episodes + e for t in part], commit=True,
                                tree_expert=expert if forced else None)
        out["trajs"] += result.trajectories
        used.update(result.slots or ())
        acc, nodes = out["episodes"].setdefault(e, ([], []))
        acc += [t.reward for t in result.trajectories]
        nodes += _nodes_per_tree(policy, result.slots)
        for k in ("inserts", "updates", "pruned", "merged", "turns_log_full"):
            out["counts"][k] = out["counts"].get(k, 0) + result.stats.get(k, 0)
        for tr in result.trajectories:
            for turn, step in zip(tr.task["turns"], tr.steps):
                out["mix"].setdefault(turn["kind"], [0, 0, 0])[step.tree_action] += 1
            _sort_questions(tr, tr.task.get("episode", e), out["seen"], out["asked"], out["leaves"])
    if not policy.config.use_tree:  # "w/o HLMT": no tree of its own (the one it holds is not read)
        return
    if used:  # tree_scope='stream': the held-out streams' own trees
        idx = sorted(used)
        out["depths"].append(np.asarray(policy.streams.trees.depth)[idx][np.asarray(policy.streams.trees.valid)[idx]])
    else:
        out["depths"].append(np.asarray(policy.tree.depth)[np.asarray(policy.tree.valid)])


def _nodes_per_tree(policy, slots) -> list:
    """Nodes (root excluded) of each tree `slots` name (tree_scope='stream'), else of the
    policy's one tree."""
    if slots:
        valid = np.asarray(policy.streams.trees.valid)[sorted(set(slots))]
        return [float(x) for x in valid[:, 1:].sum(axis=1)]
    return [float(np.asarray(policy.tree.valid)[1:].sum())]


def question_kinds(history, episode: int) -> list:
    """A dossier question's categories from what its stream showed about the same
    (entity, attribute) before it (history [(episode, kind)]): "all"; "earlier episode"
    (first shown in an earlier episode) or "same episode"; "after a correction",
    "after a decoy", "after a reminder" where one came before it."""
    out = ["all", "earlier episode" if history and history[0][0] < episode else "same episode"]
    kinds = {k for _, k in history}
    out += [f"after a {k}" for k in ("correction", "decoy", "reminder") if k in kinds]
    return out


LEAF_ORIGINS = ("the newest write of the asked fact", "a leaf from an earlier episode", "no path",
                "the same entity's other attribute", "another entity, or an older write")


def leaf_origin(turns: Sequence[dict], t: int, step) -> str:
    """Where the path of question turn `t` ended (`LEAF_ORIGINS`), from the leaf's writer
    turn (`Step.writer_turn`: the turn of this episode that last wrote it, -1 a node
    from an earlier episode's tree): the newest write (fact, correction or reminder) of
    the asked (entity, attribute) before t; a node from an earlier episode; no path; the
    entity's other attribute; anything else."""
    path = np.asarray(step.path) if step.path is not None else np.zeros((0,), int)
    n = int(np.sum(path >= 0))
    if n == 0:
        return LEAF_ORIGINS[2]
    writer = int(np.asarray(step.writer_turn)[n - 1])
    if writer < 0:
        return LEAF_ORIGINS[1]
    asked = (turns[t]["name"], turns[t]["attr"])
    newest = max((j for j in range(t) if turns[j]["kind"] in ("fact", "correction", "reminder")
                  and (turns[j].get("name"), turns[j].get("attr")) == asked), default=None)
    if writer == newest:
        return LEAF_ORIGINS[0]
    if turns[writer].get("name") == asked[0] and turns[writer].get("attr") != asked[1]:
        return LEAF_ORIGINS[3]
    return LEAF_ORIGINS[4]


def _sort_questions(trajectory, episode: int, seen: dict, asked: dict, leaves: dict) -> None:
    ems = list(trajectory.info.get("per_question_em", ()))
    turns = trajectory.task["turns"]
    for t, (turn, step) in enumerate(zip(turns, trajectory.steps)):
        key = (trajectory.task["stream"], turn["name"], turn["attr"])
        if turn["kind"] != "question":
            seen.setdefault(key, []).append((episode, turn["kind"]))
            continue
        em = float(ems.pop(0)) if ems else 0.0
        for k in question_kinds(seen.get(key, []), episode):
            asked.setdefault(k, []).append((em, step.path_len > 0))
        leaves.setdefault(leaf_origin(turns, t, step), []).append(em)


__all__ = ["COT_INSTRUCTION", "METRICS", "VARIANTS", "check_forced_writes", "evaluate", "evaluate_recall",
           "evaluate_streams", "format_failure", "question_kinds", "recall_verdict", "summarize", "task_tokens", "trajectory_row",
           "unit_scores", "variant_config"]


def recall_verdict(rows: dict, no_training) -> dict:
    """rows: {"before (seed s)": ..., "after (seed s)": ...} -> the summary (data; the line a
    person reads is `launch.eval_report.verdict_line`).

    LEARNED: against the untrained controller and every rule in no_training, the trained
    seeds' margin has a 95% interval above zero, an interval that covers both the seeds and
    the questions (`metrics.intervals.bootstrap_margin`: seeds and test units drawn with
    replacement, paired on the units). With one seed there is no seed spread and no claim.
    The line also names the largest k whose perfect memory of the last k facts (rule
    `memory_k`) the trained seeds beat by that interval."""
    from activemem_jax.metrics.intervals import bootstrap_margin

    before = [r for n, r in rows.items() if n.startswith("before")]
    after = [r for n, r in rows.items() if n.startswith("after")]
    b = [r["accuracy"] for r in before]
    a = [r["accuracy"] for r in after]
    baselines = next(iter(rows.values()))["baselines"]
    best_name = max(no_training, key=lambda k: baselines[k])
    best = max(baselines[best_name], sum(b) / len(b))
    summary = {"rows": rows, "before": sum(b) / len(b), "after": sum(a) / len(a), "seeds": len(a),
               "baselines": baselines, "best_untrained": best,
               "best_untrained_rule": best_name if baselines[best_name] >= sum(b) / len(b) else "before",
               "chance": baselines["chance"]}
    summary["margin"] = summary["after"] - best
    if len(a) < 2:
        summary.update(spread=None, learned=None, interval=None, beats_memory=None)
        return summary
    summary["spread"] = max(max(a) - min(a), max(b) - min(b))
    trained = [r["units"] for r in after]
    rules = after[0]["rule_units"]
    against = {"before": [r["units"] for r in before], **{k: rules[k] for k in no_training}}
    margins = {k: bootstrap_margin(trained, ref) for k, ref in against.items()}
    binding = min(margins, key=lambda k: margins[k]["lo"])
    m = margins[binding]
    memories = sorted((int(k.split("_")[1]) for k in rules if k.startswith("memory_")))
    beaten = [k for k in memories if bootstrap_margin(trained, rules[f"memory_{k}"])["lo"] > 0]
    summary.update(learned=m["lo"] > 0, interval={"against": binding, **m}, beats_memory=max(beaten, default=0),
                   memories=memories, margins={k: {"lo": v["lo"], "hi": v["hi"]} for k, v in margins.items()})
    return summary
