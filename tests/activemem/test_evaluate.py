"""The evaluation's bookkeeping: rows, summary, table, plot, variants (no model)."""

import dataclasses
import time

import numpy as np
import pytest

from launch import eval_report as report

from activemem_jax.metrics import compile_clock
from activemem_jax.activemem import PolicyConfig, Step, Trajectory
from activemem_jax.activemem import evaluate as ev
from activemem_jax.envs import MultiObjectiveQAEnv
from tests.activemem.shapes import SMALL


def traj(answer, golds, peak, uid=0):
    step = Step([1, 2], [], [3], [-0.1], "<answer>x</answer>", "", np.zeros(2), np.zeros(2), 0, 0.0,
                np.asarray([1, 0, 0], bool), np.full(2, -1))
    n = len(golds)
    reward = sum(a == g[0] for a, g in zip(answer.split("; "), golds)) if len(answer.split("; ")) == n else 0
    return Trajectory(task={"id": f"t{uid}", "answers": golds}, uid=uid, steps=[step] * 2, reward=float(reward),
                      info={"answer": answer}, peak_tokens=peak, dependency_length=10.0, time_s=1.5)


def test_rows_summary_table_and_plot(tmp_path):
    rows = [ev.trajectory_row("activemem", traj("Paris; Rome", [["Paris"], ["Rome"]], 400), task_tokens=60),
            ev.trajectory_row("activemem", traj("Paris; Oslo", [["Paris"], ["Rome"]], 500, 1), task_tokens=80),
            ev.trajectory_row("plain", traj("Paris", [["Paris"], ["Rome"]], 900))]
    assert rows[0]["em"] == 1.0 and rows[1]["em"] == 0.5 and rows[2]["em"] == 0.0
    assert rows[0]["f1"] == 1.0 and 0 < rows[1]["f1"] < 1 and rows[2]["f1"] == 0.0  # wrong answer count
    s = ev.summarize(rows)
    assert s["activemem"][2]["em"] == 0.75 and s["activemem"][2]["peak_tokens"] == 450
    assert s["activemem"][2]["peak_tokens_max"] == 500 and s["plain"][2]["tasks"] == 1
    assert rows[1]["peak_beyond_task"] == 420 and s["activemem"][2]["peak_beyond_task"] == (340 + 420) / 2
    table = report.format_table(s)
    assert "| activemem | 2 | 2 | 0.750 |" in table and "| 450 | 70 | 380 |" in table and "| plain | 2 | 1 | 0.000 |" in table
    report.plot_peak_tokens(s, str(tmp_path / "peak.png"))
    assert (tmp_path / "peak.png").read_bytes()[:4] == b"\x89PNG"


def test_fever_score_reaches_the_rows_and_averages_over_the_claims_that_have_evidence():
    rows = []
    for uid, score in enumerate((1.0, 0.0, None)):  # None: a claim without evidence ids
        t = traj("SUPPORTS", [["SUPPORTS"]], 100, uid)
        t.info["fever_score"] = score
        rows.append(ev.trajectory_row("activemem", t))
    rows.append(ev.trajectory_row("plain", traj("REFUTES", [["SUPPORTS"]], 100)))
    assert [r.get("fever_score") for r in rows] == [1.0, 0.0, None, None] and "fever_score" not in rows[3]
    s = ev.summarize(rows)
    assert s["activemem"][1]["fever_score"] == 0.5 and s["activemem"][1]["fever_scored"] == 2
    assert "fever_score" not in s["plain"][1]


def test_format_failure_is_the_share_of_replies_the_environment_could_not_parse():
    qa = traj("Paris; Rome", [["Paris"], ["Rome"]], 100)
    qa.info["invalid"] = 1  # one of its two turns was neither one search nor one answer
    one = traj("x", [["x"]], 100, 1)
    one.steps, one.info = one.steps[:1], {"answer": None}  # a one-turn reply with no parsable answer
    math = traj("4", [["4"]], 100, 2)
    math.steps, math.info = math.steps[:1], {"prediction": "4"}
    rows = [ev.trajectory_row("activemem", t) for t in (qa, one, math)]
    rows.append(ev.trajectory_row("activemem", traj("Paris", [["Paris"]], 100, 3)))  # says neither: None
    assert [r["format_failure"] for r in rows] == [0.5, 1.0, 0.0, None]
    s = ev.summarize(rows)
    assert s["activemem"][2]["format_failure"] == 0.5 and s["activemem"][1]["format_failure"] == 0.5
    assert "| 0.50 |" in report.format_table(s)
    assert "format_failure" not in ev.summarize(rows[3:])["activemem"][1]
    assert report.format_table(ev.summarize(rows[3:])).endswith("| - |")


def test_variants():
    base = PolicyConfig(num_latents=4)
    assert ev.variant_config(base, "activemem") == base
    plain, trunc = ev.variant_config(base, "plain"), ev.variant_config(base, "truncate")
    assert (plain.num_latents, plain.use_tree, plain.layout) == (0, False, "full")
    assert (trunc.num_latents, trunc.use_tree, trunc.layout) == (0, False, "constant")
    with pytest.raises(ValueError, match="variant"):
        ev.variant_config(base, "amem")
    # the ablation table's policy ablations evaluate a trained controller too (one table)
    assert ev.variant_config(base, "flat tree").max_depth == 1
    assert ev.variant_config(base, "w/o HLMT").use_tree is False
    assert ev.variant_config(base, "w/o tree action head").tree_actions is False
    with pytest.raises(ValueError, match="variant 'SFT only'"):  # a training-only ablation evaluates as full
        ev.variant_config(base, "SFT only")


def test_vanilla_and_cot_baselines():
    base = PolicyConfig(num_latents=4)
    plain = ev.variant_config(base, "plain")
    assert ev.variant_config(base, "vanilla") == plain  # Table 1's Vanilla is the plain baseline
    cot = ev.variant_config(base, "cot")
    assert cot.system_prompt == "Think step by step before you answer." == ev.COT_INSTRUCTION
    assert cot == dataclasses.replace(plain, system_prompt=ev.COT_INSTRUCTION)  # nothing else changes
    assert (cot.num_latents, cot.use_tree, cot.layout) == (0, False, "full")
    assert ev.variant_config(PolicyConfig(system_prompt="Be brief."), "cot").system_prompt == (
        "Be brief.\n\nThink step by step before you answer.")  # after the config's own prompt
    for name in ("activemem", "plain", "truncate"):  # the other variants keep the config's prompt
        assert ev.variant_config(base, name).system_prompt == "default"


def test_the_eval_schema_takes_the_baselines_on_request():
    from activemem_jax import schema
    from activemem_jax.config_files import load_config

    cfg = load_config("configs/activemem_eval_synthetic.py", ["variants=('vanilla', 'cot')"])
    assert schema.load_eval(cfg).variants == ("vanilla", "cot")
    assert "cot" not in schema.EvalRun.__dataclass_fields__["variants"].default  # not run by default


@pytest.mark.slow
def test_evaluate_runs_every_n_in_one_batch_with_its_own_turn_budget(embedded_model, engine, world, bm25):
    """All N of a variant share one rollout batch; each task keeps its own turn budget;
    time per trajectory excludes compilation (counted apart)."""
    from activemem_jax.data import synthetic_world

    tasks = {n: synthetic_world.make_tasks(world, "test", n, 1, seed=0) for n in (1, 3)}
    base = PolicyConfig(num_latents=2, max_tokens=12, **SMALL)
    seen = []
    t0, c0 = time.perf_counter(), compile_clock.seconds()
    rows = ev.evaluate(embedded_model, engine, bm25, base, ["activemem", "plain"], tasks, lambda n: n + 1,
                       on_batch=lambda v, n, b: seen.append((v, n, len(b))))
    wall, compiled = time.perf_counter() - t0, compile_clock.seconds() - c0
    assert seen == [("activemem", 1, 1), ("activemem", 3, 1), ("plain", 1, 1), ("plain", 3, 1)]
    assert all(r["turns"] <= r["n_objectives"] + 1 for r in rows)  # each task's own budget
    # a trajectory's time_s + compile_s is its wall time since its variant's rollout began, and
    # compile_s counts only this rollout's compilation (not the process's): summed over the
    # two rollouts, neither passes what the call took (3 ms per row: the rows' rounding)
    last = {v: max((r for r in rows if r["variant"] == v), key=lambda r: r["time_s"] + r["compile_s"])
            for v in ("activemem", "plain")}
    assert all(r["time_s"] > 0 for r in rows)
    assert sum(r["time_s"] + r["compile_s"] for r in last.values()) <= wall + 0.003 * len(rows)
    assert sum(r["compile_s"] for r in last.values()) <= compiled + 0.003 * len(rows)
    s = ev.summarize(rows)
    assert set(s) == {"activemem", "plain"} and set(s["plain"]) == {1, 3}
    tok = embedded_model.tokenizer
    for r in rows:  # the task statement, tokenized apart, and what the peak holds beyond it
        task = tasks[r["n_objectives"]][0]
        assert r["task_tokens"] == len(tok.encode(MultiObjectiveQAEnv.initial_prompt(task), add_special_tokens=False))
        assert 0 < r["peak_beyond_task"] == r["peak_tokens"] - r["task_tokens"]


@pytest.mark.slow
def test_registered_qa_task_closed_book_and_with_retrieval(embedded_model, engine, tmp_path):
    """A real-data task from activemem_jax/tasks/ (a fixture FlashRAG file and corpus) evaluated end
    to end on the embedded model, closed-book and with retrieval (whose backends find
    nothing and the corpus's document)."""
    import json

    import ml_collections

    from activemem_jax.tasks import build_section

    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps({"id": str(i), "question": q, "golden_answers": [a]}) + "\n" for i, (q, a) in
                          enumerate([("When was Velmor founded?", "1821"), ("Who founded Velmor?", "Ada Kest"),
                                     ("Where was Ada Kest born?", "Ostra")])))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"docid": "d1", "title": "Velmor", "text": "Velmor was founded in 1821 by Ada Kest."})
                      + "\n")
    base = PolicyConfig(num_latents=0, use_tree=False, max_tokens=12, **SMALL)
    seen = {}
    for mode, extra in (("closed_book", {}), ("retrieval", {"corpus": str(corpus)})):
        d = ml_collections.ConfigDict({**dict(name="multi_objective_qa", qa_files=(str(qa),), index="", corpus="",
                                              retrieval_url="", seed=0, n_objectives=(1, 2), n_tasks=1,
                                              max_turns=3), **extra})
        flat, make_env, search = build_section(d, embedded_model)
        tasks = {}
        for t in flat:
            tasks.setdefault(len(t["answers"]), []).append(t)
        rows = ev.evaluate(embedded_model, engine, search, base, ["plain"], tasks, lambda n: n + 1,
                           make_env=lambda turns: make_env(turns))
        assert sorted(r["n_objectives"] for r in rows) == [1, 2]
        assert all(0 <= r["em"] <= 1 and r["turns"] >= 1 for r in rows)
        seen[mode] = search.search("Velmor founded", 3)
    assert seen["closed_book"] == [] and seen["retrieval"][0]["docid"] == "d1"
