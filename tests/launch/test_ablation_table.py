"""The dossier ablation bench's statistics and table (launch/ablation/table.py)."""

import math

from launch.ablation import table as ablation_table


def test_the_95_percent_interval_by_hand():
    mean, half = ablation_table.interval([0.7, 0.8, 0.9])
    assert math.isclose(mean, 0.8) and math.isclose(half, 4.303 * 0.1 / math.sqrt(3), rel_tol=1e-6)
    mean, half = ablation_table.interval([0.5])
    assert mean == 0.5 and math.isnan(half)


def test_the_table_reports_every_variant_with_its_seeds_and_the_rules():
    row = {"accuracy": 0.5, "depth_histogram": {1: 4, 2: 2}, "pruned": 3, "merged": 1,
           "actions": {"decoy": {"noop": 1.0, "insert": 0.0, "update": 0.0}}}
    summary = {"runs": {"full": [row, {**row, "accuracy": 0.7}], "flat tree": [row]},
               "baselines": {"chance": 0.125, "store_all": 0.375, "best_constant_code": "red"}}
    summary["table"] = {v: dict(zip(("mean", "ci95"), ablation_table.interval([r["accuracy"] for r in rs])),
                                seeds=len(rs)) for v, rs in summary["runs"].items()}
    text = ablation_table.format_table(summary)
    assert "| full | 0.600 | +/- " in text and "| flat tree | 0.500 | - | 1 |" in text
    assert "1.00 / 0.00 / 0.00" in text and "store_all 0.375" in text and "red" not in text


def test_quick_trains_full_once_and_scores_the_evaluation_ablations_on_its_checkpoint(tiny_model, tiny_engine):
    """--quick (launch/bench_memory.py): one run of "full", "SFT only" is that run's SFT
    checkpoint, and every evaluation ablation is scored on its last checkpoint and marked
    as not trained; maintenance acts only where the row keeps it."""
    import argparse

    from activemem_jax.activemem.ablations import evaluation_ablations
    from configs.experiments import dossier_base

    cfg = dossier_base.get_config()
    cfg.policy.update(hidden=32, prune_fraction=0.5, utility_start="first", credit_writes=True)
    cfg.data.dossier.update(streams=4, episodes=3, questions=2, decoys=1, corrections=1, reminders=0)
    cfg.train.update(prompts_per_step=2, group_size=2, mini_batch_rows=8)
    args = argparse.Namespace(sft_steps=2, grpo_steps=1, eval_streams=1, curve_every=2, set=[])
    summary = ablation_table.run_quick(args, cfg, model=tiny_model, engine=tiny_engine)
    runs = summary["runs"]
    assert set(runs) == {"untrained", "full", "SFT only", *evaluation_ablations()}
    assert [s["algo"] for s in runs["full"][0]["steps"]] == ["sft", "sft", "grpo"]
    assert len(runs["SFT only"][0]["steps"]) == 2 and "evaluated_on" not in runs["full"][0]
    # the curve is scored on the rows' streams: its points at the SFT and last steps are those rows
    curve = {c["step"]: (c["accuracy"], c["inserts"], c["updates"]) for c in runs["full"][0]["curve"]}
    for step, name in ((2, "SFT only"), (3, "full")):
        assert curve[step] == tuple(runs[name][0][k] for k in ("accuracy", "inserts", "updates")), name
    for name in evaluation_ablations():
        assert runs[name][0]["evaluated_on"] == "full seed 0, step 3", name
    assert runs["full"][0]["pruned"] > 0 and runs["w/o merge/delete"][0]["pruned"] == 0
    assert runs["w/o HLMT"][0]["inserts"] == 0 < runs["full"][0]["inserts"]
    assert runs["w/o HLMT"][0]["tree_size"] == 0 and runs["w/o HLMT"][0]["depth_histogram"] == {}
    assert max(int(d) for d in runs["flat tree"][0]["depth_histogram"]) == 1
    text = ablation_table.format_table(summary)
    assert "| w/o HLMT (on full seed 0, step 3, not trained) |" in text and "| full | " in text


def test_a_variant_takes_the_restored_arrays_it_builds_and_refuses_a_wrong_shape():
    import numpy as np
    import pytest

    source = {"head": {"w": np.ones((2, 3))}, "latent": {"w": np.zeros((4,))}}
    got = ablation_table._take({"head": {"w": np.zeros((2, 3))}}, source, "w/o latent injection")
    assert set(got) == {"head"} and np.array_equal(got["head"]["w"], np.ones((2, 3)))
    with pytest.raises(ValueError, match="'flat tree'.*shape \\(3, 3\\)"):
        ablation_table._take({"head": {"w": np.zeros((3, 3))}}, source, "flat tree")


def test_a_runs_manifest_is_checked_and_a_run_reads_the_steps_of_the_run_it_continued(tmp_path):
    """bench_memory --runs: a manifest naming an unknown variant, a missing checkpoint or a
    training-only ablation to evaluate stops with the cause named; a GRPO run's step lines
    follow those of the SFT run it continued, up to the scored step."""
    import json

    import pytest

    sft, grpo = tmp_path / "sft", tmp_path / "grpo"
    for run, steps, sign in ((sft, range(1, 5), 1), (grpo, range(3, 7), -1)):  # grpo resumed from step 2
        (run / "checkpoints" / str(steps[-1])).mkdir(parents=True)
        (run / "metrics.jsonl").write_text("".join(json.dumps({"step": k, "reward_mean": sign * k / 10,
                                                               "time_step": 2.0}) + "\n" for k in steps))

    def manifest(body):
        path = tmp_path / "runs.json"
        path.write_text(json.dumps(body) if not isinstance(body, str) else body)
        return str(path)

    good = {"full": [{"run": str(grpo), "step": 6, "sft_run": str(sft)}], "SFT only": [{"run": str(sft), "step": 4}]}
    assert ablation_table.read_manifest(manifest(good)) == good
    for body, cause in (("{not json", "cannot read it as JSON"),
                        ({"fulll": [{"run": str(sft), "step": 4}]}, "unknown variant 'fulll'"),
                        ({"full": [{"run": str(sft), "step": 3}]}, "no checkpoint .*checkpoints/3"),
                        ({"full": [{"run": str(sft)}]}, "each run is"),
                        ({"w/o hierarchical advantage": [{"run": str(sft), "step": 4, "evaluate": True}]},
                         "changes only training")):
        with pytest.raises(SystemExit, match=cause):
            ablation_table.read_manifest(manifest(body))
    history = ablation_table._history(good["full"][0])
    assert [s["step"] for s in history] == [1, 2, 3, 4, 5, 6]
    assert [s["reward_mean"] for s in history] == [0.1, 0.2, -0.3, -0.4, -0.5, -0.6]  # the GRPO run's own from 3
    assert [s["step"] for s in ablation_table._history({"run": str(grpo), "step": 4})] == [3, 4]


def test_streams_of_the_training_names_are_drawn_apart_from_the_held_out_ones():
    """score_streams --split train: unseen streams whose entities come from the training
    names only; the default (held-out) streams use the test names only."""
    from activemem_jax.envs.recall import name_pool
    from configs.experiments import dossier_mix

    cfg = dossier_mix.get_config()

    def names(tasks):
        return {turn["name"] for task in tasks for turn in task["turns"] if turn.get("name")}

    train, test = (names(ablation_table.eval_tasks(cfg, 2, seed=98, split=split)) for split in ("train", "test"))
    assert train and train <= set(name_pool("train")) and not train & set(name_pool("test"))
    assert test and test <= set(name_pool("test"))
    assert names(ablation_table.eval_tasks(cfg, 2, seed=98, split="train")) == train  # deterministic


def test_the_table_writes_json_and_a_figure_for_trained_and_scored_runs(tmp_path):
    """write(): the summary as JSON beside a PNG, for rows with a held-out curve (trained in
    the bench) and rows with only their step lines (scored from checkpoints by --runs)."""
    import json

    steps = [{"step": k, "algo": "sft" if k <= 3 else "grpo", "reward_mean": 1.0 if k <= 3 else k / 10}
             for k in range(1, 10)]
    rows = {"full": [{"accuracy": 0.6, "steps": steps}, {"accuracy": 0.7, "steps": steps}],
            "SFT only": [{"accuracy": 0.4, "curve": [{"step": 2, "accuracy": 0.3}, {"step": 3, "accuracy": 0.4}]}]}
    summary = {"runs": rows, "baselines": {"store_all": 0.375, "memory_8": 0.966, "ceiling": 1.0, "best": "red"}}
    summary["table"] = {v: dict(zip(("mean", "ci95"), ablation_table.interval([r["accuracy"] for r in rs])),
                                seeds=len(rs)) for v, rs in rows.items()}
    out = tmp_path / "t" / "memory_table.json"
    ablation_table.write(summary, str(out))
    assert json.loads(out.read_text())["table"]["full"]["seeds"] == 2
    png = (tmp_path / "t" / "memory_table.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_the_validation_choice_takes_the_highest_step_and_the_later_of_a_tie():
    assert ablation_table.pick_step({620: 0.852, 640: 0.742}) == 620  # the span recipe's seed 0 on validation
    assert ablation_table.pick_step({620: 0.633, 640: 0.844}) == 640
    assert ablation_table.pick_step({640: 0.5, 600: 0.5, 620: 0.25}) == 640


def test_a_run_s_checkpoint_is_chosen_on_validation_streams_of_the_training_names(tiny_model, tiny_engine,
                                                                                   tmp_path):
    """bench_memory --runs with "select": each candidate checkpoint is scored on streams of
    the training names (as score_variants scores them with split="train"), the highest
    (a tie: the later step) is scored on the held-out streams, and an evaluated entry of the
    same run takes the same step; a malformed "select" stops with the cause."""
    import argparse
    import json

    import pytest

    from activemem_jax.rl.trainer import Trainer
    from configs.experiments import dossier_base

    cfg = dossier_base.get_config()
    cfg.policy.update(hidden=32)
    cfg.data.dossier.update(streams=4, episodes=2, questions=2, decoys=1, corrections=1, reminders=0)
    cfg.train.update(prompts_per_step=2, group_size=2, mini_batch_rows=8)
    args = argparse.Namespace(sft_steps=2, grpo_steps=0, eval_streams=1, val_streams=2, val_seed=99, set=[])
    run = str(tmp_path / "run")
    cfg = ablation_table.run_config(cfg, "full", 0, args, run)
    trainer = Trainer(cfg, model=tiny_model, engine=tiny_engine)
    try:
        for _ in range(2):
            trainer.train_step()
            trainer.save()
        trainer.ckpt.wait()
    finally:
        trainer.close()
    directory = str(tmp_path / "run" / "checkpoints")
    val = {step: ablation_table.score_variants(cfg, directory, ["full"], tiny_model, tiny_engine, 2, step=step,
                                               split="train", seed=99, log=None)["full"]["accuracy"]
           for step in (1, 2)}
    want = 2 if val[2] >= val[1] else 1
    test = ablation_table.score_variants(cfg, directory, ["full", "w/o HLMT"], tiny_model, tiny_engine, 1,
                                         step=want, log=None)
    manifest = {"full": [{"run": run, "select": [1, 2]}], "w/o HLMT": [{"run": run, "select": [1, 2],
                                                                       "evaluate": True}]}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(manifest))
    summary = ablation_table.score_runs(ablation_table.read_manifest(str(path)), cfg, args, model=tiny_model,
                                        engine=tiny_engine)
    full = summary["runs"]["full"][0]
    assert full["step"] == want and full["selected"]["accuracy"] == {"1": val[1], "2": val[2]}
    assert full["selected"]["streams"] == 2 and full["selected"]["stream_seed"] == 99
    assert full["accuracy"] == test["full"]["accuracy"]
    hlmt = summary["runs"]["w/o HLMT"][0]
    assert hlmt["step"] == want and hlmt["accuracy"] == test["w/o HLMT"]["accuracy"]
    text = ablation_table.format_table(summary)
    assert f"| full (steps {want} chosen on validation) |" in text
    assert f"| w/o HLMT (on run, step {want}, not trained; steps {want} chosen on validation) |" in text
    for body, cause in (({"full": [{"run": run, "select": [2, 3]}]}, "no checkpoint .*checkpoints/3"),
                        ({"full": [{"run": run, "select": []}]}, "list of checkpoint steps"),
                        ({"full": [{"run": run, "step": 2, "select": [2]}]}, "one of the two")):
        path.write_text(json.dumps(body))
        with pytest.raises(SystemExit, match=cause):
            ablation_table.read_manifest(str(path))


def test_summaries_of_the_same_streams_merge_into_one_table_and_others_are_refused(tmp_path):
    """bench_memory --merge: the rows of summaries scored on the same held-out streams (runs
    scored in different sessions) become one table, each variant's interval over all its
    seeds; summaries of other streams, or one run twice, stop with the cause named."""
    import json
    import os
    import subprocess
    import sys

    import pytest

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = {"config": "configs/experiments/dossier_span.py", "eval_streams": 32, "set": []}
    rules = {"store_all": 0.396, "memory_8": 0.962, "best_constant_code": "red"}
    untrained = [{"accuracy": 0.125}]

    def summary(rows):
        return {"runs": {"untrained": untrained, **rows}, "baselines": dict(rules), "args": dict(args),
                "total_time_s": 10.0}

    a = summary({"full": [{"accuracy": 0.811, "run": "r/s0", "step": 620},
                          {"accuracy": 0.824, "run": "r/s1", "step": 620}],
                 "flat tree": [{"accuracy": 0.523, "run": "r/flat1", "step": 640}]})
    b = summary({"full": [{"accuracy": 0.842, "run": "r/s2", "step": 640}],
                 "w/o tree action head": [{"accuracy": 0.3, "run": "r/static1", "step": 620}]})
    merged = ablation_table.merge_summaries([a, b], ["a.json", "b.json"])
    assert list(merged["runs"]) == ["untrained", "full", "flat tree", "w/o tree action head"]
    assert [r["run"] for r in merged["runs"]["full"]] == ["r/s0", "r/s1", "r/s2"]
    mean, half = merged["table"]["full"]["mean"], merged["table"]["full"]["ci95"]
    sd = math.sqrt(sum((x - 0.8256667) ** 2 for x in (0.811, 0.824, 0.842)) / 2)
    assert math.isclose(mean, (0.811 + 0.824 + 0.842) / 3) and math.isclose(half, 4.303 * sd / math.sqrt(3),
                                                                              rel_tol=1e-4)
    assert merged["table"]["full"]["seeds"] == 3 and merged["table"]["untrained"]["seeds"] == 1
    assert merged["runs"]["w/o tree action head"][0]["summary"] == "b.json" and merged["total_time_s"] == 20.0

    other = summary({})
    other["args"]["eval_streams"] = 8
    with pytest.raises(SystemExit, match="b.json: eval_streams is 8"):
        ablation_table.merge_summaries([a, other], ["a.json", "b.json"])
    other = summary({})
    other["baselines"]["memory_8"] = 0.9
    with pytest.raises(SystemExit, match="rule memory_8 scores 0.9"):
        ablation_table.merge_summaries([a, other], ["a.json", "b.json"])
    other = summary({})
    other["runs"]["untrained"] = [{"accuracy": 0.25}]
    with pytest.raises(SystemExit, match="untrained controller scores 0.25 where a.json has 0.125"):
        ablation_table.merge_summaries([a, other], ["a.json", "b.json"])
    with pytest.raises(SystemExit, match="r/s0 step 620 again"):
        ablation_table.merge_summaries([a, summary({"full": [a["runs"]["full"][0]]})], ["a.json", "c.json"])
    rule_on_full = summary({"w/o tree action head": [{"accuracy": 0.25, "run": "r/s0", "step": 620,
                                                      "evaluated_on": "full, step 620"}]})
    with pytest.raises(SystemExit, match=r"'w/o tree action head' rows evaluated on another variant's checkpoints "
                                         r"join rows trained as this variant \(from b.json\)"):
        ablation_table.merge_summaries([b, rule_on_full], ["b.json", "c.json"])

    # the command line: the merged table printed, written as JSON and a figure
    paths = []
    for name, s in (("a.json", a), ("b.json", b)):
        paths.append(str(tmp_path / name))
        (tmp_path / name).write_text(json.dumps(s))
    out = tmp_path / "merged.json"
    done = subprocess.run([sys.executable, "-m", "launch.bench_memory", "--task", "dossier", "--config",
                           "configs/experiments/dossier_span.py", "--merge", *paths, "--out", str(out)],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| full | 0.826 | +/- " in done.stdout and "| w/o tree action head | 0.300 | - | 1 |" in done.stdout
    assert json.loads(out.read_text())["table"]["full"]["seeds"] == 3 and (tmp_path / "merged.png").is_file()
    (tmp_path / "bad.json").write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "launch.bench_memory", "--task", "dossier", "--merge",
                           paths[0], str(tmp_path / "bad.json")], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "bad.json: cannot read it as JSON" in done.stderr
