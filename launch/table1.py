"""The paper's Table 1: one row file per run, then the table merged from the rows.

    python -m launch.table1 row --run runs/activemem_qwen3_8b/gsm8k_grpo --dataset gsm8k \\
        --backbone Qwen3-8B --method ActiveMem_GRPO [--k 4] [--out results/table1/rows]
    python -m launch.table1 merge [--rows results/table1/rows] [--out results/table1/table1.md]

`row` reads the summary.json of the run directory and of each seed_<k>/ under it: what
launch.train writes (the held-out score of the "after" row, summary["eval"]["after"]["1"]["em"],
its seed summary["runs"][0]["seed"]) or, for the evaluation-only datasets (popqa,
bigcodebench), what launch.eval_activemem writes (summary["activemem"]["1"]["em"], the
seed from the seed_<k> folder). The row: dataset, domain, metric, backbone, method, k, the
mean over seeds, the value of each seed, their count, the run path and the commit
launch.train recorded. `merge` writes a Markdown table: a line per (backbone, method, K),
the datasets as columns grouped by domain (configs/table1_datasets.py), each cell
"value (n seeds)" or "-" where no row holds it. Bad input ends in one line (exit 2).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

from configs.table1_datasets import BACKBONES, DOMAINS, RECIPES, TABLE1, check_dataset

ROWS = "results/table1/rows"


class Table1Error(ValueError):
    """Bad input to a Table 1 command: the message says what and where."""


def seed_score(path: str) -> tuple:
    """(seed or None, held-out score, commit or None, {rule: score} of the rules that need
    no learning on the same tasks, {} where the run has none) of one summary.json (module doc)."""
    try:
        with open(path) as f:
            summary = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise Table1Error(f"{path}: not a readable summary.json ({e})") from None
    folder = re.fullmatch(r"seed_(-?\d+)", os.path.basename(os.path.dirname(path)))
    seed = int(folder.group(1)) if folder else None
    if "eval" in summary or "runs" in summary:  # launch.train
        after = (summary.get("eval") or {}).get("after")
        if not after:
            raise Table1Error(f"{path}: no held-out 'after' row in summary['eval'] (train with "
                              "--config.eval.enabled=True; a Table 1 config parameter sets it)")
        runs = summary.get("runs") or [{}]
        seed = runs[0].get("seed", seed)  # launch.train evaluates its first seed
        commit = (summary.get("provenance") or {}).get("commit")
        rules = (summary.get("eval") or {}).get("baselines") or {}
    elif "activemem" in summary:  # launch.eval_activemem
        after, commit, rules = summary["activemem"], None, summary.get("baselines") or {}
    else:
        raise Table1Error(f"{path}: neither launch.train's summary (an 'eval' key) nor "
                          "launch.eval_activemem's (an 'activemem' key)")
    by_n = after.get("1") if "1" in after else (next(iter(after.values())) if len(after) == 1 else None)
    if not isinstance(by_n, dict) or "em" not in by_n:
        raise Table1Error(f"{path}: the after row has no N=1 score 'em' (found N = {sorted(after)})")
    return seed, float(by_n["em"]), commit, {k: float(v) for k, v in rules.items() if isinstance(v, (int, float))}


def build_row(run: str, dataset: str, backbone: str, method: str, k) -> dict:
    """The Table 1 row of run directory `run` (module doc)."""
    try:
        family, metric, domain = check_dataset(dataset)
    except ValueError as e:
        raise Table1Error(str(e)) from None
    if method not in RECIPES.values():
        raise Table1Error(f"method {method!r}: use one of {', '.join(RECIPES.values())}")
    if not os.path.isdir(run):
        raise Table1Error(f"run {run}: no such directory")
    paths = sorted(glob.glob(os.path.join(run, "summary.json")) + glob.glob(os.path.join(run, "seed_*", "summary.json")))
    if not paths:
        raise Table1Error(f"run {run}: no summary.json in it or in a seed_<k>/ folder under it "
                          "(launch.train writes it at the end of a run)")
    per_seed, commits, baselines = {}, set(), {}
    for p in paths:
        seed, value, commit, rules = seed_score(p)
        baselines = baselines or rules  # the tasks are the eval section's, the same for every seed
        key = str(seed) if seed is not None else "-"
        if key in per_seed:
            raise Table1Error(f"{p}: seed {key} is scored twice under {run}")
        per_seed[key] = value
        commits.add(commit)
    values = list(per_seed.values())
    commits.discard(None)
    return {"dataset": dataset, "domain": domain, "metric": metric, "family": family, "backbone": backbone,
            "method": method, "k": k, "value": sum(values) / len(values), "per_seed": per_seed,
            "seeds": len(values), "baselines": baselines, "run": run, "commit": sorted(commits)[0] if len(commits) == 1 else sorted(commits) or None}


def row_file(row: dict, out: str) -> str:
    name = f"{row['backbone']}_{row['method']}_k{row['k']}_{row['dataset']}.json".replace("/", "-")
    return os.path.join(out, name)


def read_rows(rows_dir: str) -> list:
    if not os.path.isdir(rows_dir):
        raise Table1Error(f"rows {rows_dir}: no such directory (write rows with `python -m launch.table1 row`)")
    rows = []
    for p in sorted(glob.glob(os.path.join(rows_dir, "*.json"))):
        try:
            with open(p) as f:
                row = json.load(f)
            check_dataset(row["dataset"])
            rows.append({**row, "_file": p})
        except (OSError, json.JSONDecodeError, KeyError, ValueError) as e:
            raise Table1Error(f"{p}: not a Table 1 row ({e})") from None
    return rows


def format_table(rows: list) -> str:
    """Markdown: a line per (backbone, method, K), a column per dataset grouped by domain."""
    columns = [d for domain in DOMAINS for d, (_, _, dom) in TABLE1.items() if dom == domain]
    cells, seen, rules = {}, {}, {}
    for r in rows:
        line, key = (r["backbone"], r["method"], r["k"]), (r["backbone"], r["method"], r["k"], r["dataset"])
        if key in seen:
            raise Table1Error(f"{r['_file']}: {r['dataset']} of {line} is also in {seen[key]}")
        seen[key] = r.get("_file", "?")
        cells.setdefault(line, {})[r["dataset"]] = f"{r['value']:.3f} ({r['seeds']})"
        for rule, value in (r.get("baselines") or {}).items():  # a rule's line: the first row's value a dataset
            rules.setdefault(rule, {}).setdefault(r["dataset"], f"{value:.3f}")
    order = {b: i for i, b in enumerate(BACKBONES)}
    method = {m: i for i, m in enumerate(RECIPES.values())}
    lines = sorted(cells, key=lambda t: (order.get(t[0], len(order)), t[0], method.get(t[1], 9), t[1], str(t[2])))
    groups = " | ".join(f"{dom}: " + ", ".join(d for d in columns if TABLE1[d][2] == dom) for dom in DOMAINS)
    metrics = ", ".join(f"{d} {TABLE1[d][1]}" for d in columns)
    out = [f"Domains: {groups}.", f"Metrics: {metrics}. A cell: value (seeds); -: no row. A rule's line: a rule "
           "that needs no learning, scored on a run's held-out tasks (the first row's run for that dataset).", "",
           "| backbone | method | K | " + " | ".join(columns) + " |",
           "|---|---|---|" + "---|" * len(columns)]
    for line in lines:
        out.append(f"| {line[0]} | {line[1]} | {line[2]} | "
                   + " | ".join(cells[line].get(d, "-") for d in columns) + " |")
    for rule, by_dataset in rules.items():
        out.append(f"| - | rule: {rule} | - | " + " | ".join(by_dataset.get(d, "-") for d in columns) + " |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m launch.table1", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("row", help="a run's Table 1 row")
    r.add_argument("--run", required=True)
    r.add_argument("--dataset", required=True, help=", ".join(TABLE1))
    r.add_argument("--backbone", required=True, help=", ".join(BACKBONES))
    r.add_argument("--method", required=True, help=", ".join(RECIPES.values()))
    r.add_argument("--k", type=int, default=None, help="num_latents (default: the paper configs' 4)")
    r.add_argument("--out", default=ROWS)
    m = sub.add_parser("merge", help="the table from the rows")
    m.add_argument("--rows", default=ROWS)
    m.add_argument("--out", default="results/table1/table1.md")
    args = p.parse_args(argv)
    try:
        if args.cmd == "row":
            from configs.table1_datasets import PAPER_K

            row = build_row(args.run, args.dataset, args.backbone, args.method,
                            PAPER_K if args.k is None else args.k)
            path = row_file(row, args.out)
            os.makedirs(args.out, exist_ok=True)
            with open(path, "w") as f:
                json.dump(row, f, indent=1)
            print(f"{row['dataset']} {row['backbone']} {row['method']} K={row['k']}: {row['metric']} "
                  f"{row['value']:.3f} over {row['seeds']} seed(s); wrote {path}")
        else:
            text = format_table(read_rows(args.rows))
            os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
            with open(args.out, "w") as f:
                f.write(text)
            print(text + f"wrote {args.out}")
    except Table1Error as e:
        print(f"table1: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
