"""Score a dossier training run's checkpoint on held-out streams, once per variant: the
trained controller as it is ("full"), and with the policy switches of an evaluation
ablation (`activemem/ablations.py`: "w/o merge/delete", "flat tree", "w/o HLMT", ...).
Every variant restores the same checkpoint and replays the same streams, each stream's
episodes in order from an empty tree (`activemem.evaluate.evaluate_streams`).

    python -m launch.score_streams --config configs/experiments/dossier_long.py \
        [--run runs/dossier_long] [--step 600] [--variants "full,w/o merge/delete"] \
        [--streams 8] [--split train] [--config.policy.utility_start=zero] [--out scores.json] \
        [--forced-writes question]   # a diagnosis: questions write nothing, the rest by the head

`--run` is the training run's out_dir (default the config's); `--config.a.b=v` (or `--set
a.b=v`) changes the config for every variant, as it would for the run. Prints the stream
table (accuracy, questions after a correction, paths found, commits, pruned / merged,
final nodes by depth, action mix) with the rules that need no training on the same
streams, and accuracy and nodes per stream tree by episode; writes the rows as JSON.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # configs/

import argparse
import json

from activemem_jax.config_files import config_errors, load_config, parse_args  # noqa: E402


def main(argv=None) -> dict:
    from activemem_jax.activemem.ablations import evaluation_ablations, evaluation_overrides

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="configs/experiments/dossier_base.py", help="the run's config file")
    p.add_argument("--run", default=None, help="the run's out_dir (default: the config's out_dir)")
    p.add_argument("--step", type=int, default=None, help="checkpoint step (default: the newest)")
    p.add_argument("--variants", default="full",
                   help=f"comma-separated: full, {', '.join(evaluation_ablations())}")
    p.add_argument("--streams", type=int, default=8, help="held-out streams (the tables' 8)")
    p.add_argument("--split", choices=("test", "train"), default="test",
                   help="test: held-out names (the tables); train: streams of the training names, drawn with "
                        "--stream-seed (one training never drew), to tell new names from new streams")
    p.add_argument("--stream-seed", type=int, default=None,
                   help="the streams' data seed over the config's (default: 1 for test, 98 for train)")
    p.add_argument("--forced-writes", default="",
                   help="diagnosis: comma-separated observation kinds (question, decoy, fact, correction, "
                        "reminder) whose tree action is the write a perfect memory makes (none for a question "
                        "or a decoy), the rest by the trained head: what the head's choices on them cost")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--out", default=None, help="JSON of the rows (default: <run>/scores.json)")
    args = parse_args(p, argv)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    forced = tuple(k.strip() for k in args.forced_writes.split(",") if k.strip())
    with config_errors():
        cfg = load_config(args.config, args.set)
        from activemem_jax import schema

        schema.load(cfg)
        if cfg.data.name != "dossier":
            raise ValueError(f"data.name={cfg.data.name!r}: score_streams scores dossier streams")
        from activemem_jax.activemem.evaluate import check_forced_writes

        check_forced_writes(forced)  # one line, before loading
        for n in names:
            if n != "full":
                evaluation_overrides(n)  # an unknown or training-only ablation: one line, before loading
        run = args.run or cfg.out_dir
        directory = os.path.join(run, "checkpoints")
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"{directory}: no checkpoints there (--run is the training run's out_dir)")

    from activemem_jax import build
    from activemem_jax.activemem import evaluate as ev
    from launch import eval_report as report
    from launch.ablation.table import score_variants

    model = build.model(cfg)
    with build.engine(cfg, model) as engine:
        rows = score_variants(cfg, directory, names, model, engine, streams=args.streams, step=args.step,
                              split=args.split, seed=args.stream_seed, forced_writes=forced)
    print(report.format_stream_table(rows))
    print(report.format_episode_table(rows))
    out = args.out or os.path.join(run, "scores.json")
    with open(out, "w") as f:
        json.dump(rows, f, indent=1, default=float)
    print(f"wrote {out}")
    return rows


if __name__ == "__main__":
    main()
