"""Small practice files in the published formats of AQuA, GPQA, GSM8K and KodCode, made
from templates with a seed, so that the protocol launches (launch.continual,
launch.generalize, the Table 1 configs) run end to end on a machine without the datasets:

    python -m launch.write_practice_data --out data [--n_train 64] [--n_test 16] [--seed 0]

writes the paths configs/activemem_continual_cpu.py and configs/activemem_generalize_cpu.py
read: data/aqua/{train,test}.json, data/gpqa/{train,test}.csv, data/gsm8k/{train,test}.jsonl,
data/kodcode/{train,test}.jsonl. An existing file is kept unless --overwrite (the user's
real data is never replaced by accident).

The items are elementary on purpose (two-number arithmetic, the chemical symbol of an
element, a one-line Python function), each dataset's field names and label spellings as
the dataset ships them; train and test items are disjoint (a test item's numbers never
appear in train). A score on them is a pipeline check, not a paper figure.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys

ELEMENTS = (("Hydrogen", "H"), ("Helium", "He"), ("Lithium", "Li"), ("Carbon", "C"), ("Nitrogen", "N"),
            ("Oxygen", "O"), ("Fluorine", "F"), ("Neon", "Ne"), ("Sodium", "Na"), ("Magnesium", "Mg"),
            ("Aluminium", "Al"), ("Silicon", "Si"), ("Phosphorus", "P"), ("Sulfur", "S"), ("Chlorine", "Cl"),
            ("Argon", "Ar"), ("Potassium", "K"), ("Calcium", "Ca"), ("Iron", "Fe"), ("Copper", "Cu"),
            ("Zinc", "Zn"), ("Silver", "Ag"), ("Tin", "Sn"), ("Gold", "Au"), ("Mercury", "Hg"), ("Lead", "Pb"),
            ("Uranium", "U"), ("Nickel", "Ni"), ("Cobalt", "Co"), ("Manganese", "Mn"), ("Chromium", "Cr"),
            ("Titanium", "Ti"))
OPS = (("+", "plus", lambda a, b: a + b), ("-", "minus", lambda a, b: a - b), ("*", "times", lambda a, b: a * b))
GSM8K_TEMPLATES = (
    ("+", "{name} has {a} apples and buys {b} more. How many apples does {name} have now?"),
    ("-", "{name} had {a} marbles and gave {b} of them away. How many marbles does {name} have left?"),
    ("*", "{name} buys {a} boxes with {b} pencils in each box. How many pencils does {name} buy?"),
)
NAMES = ("Tom", "Ana", "Li", "Sara", "Omar", "Kim", "Ravi", "Eva")
CODE_TEMPLATES = (  # (function name, task, body, reference of x)
    ("add_{k}", "Write a Python function `add_{k}(x)` that returns x plus {k}.", "return x + {k}", lambda x, k: x + k),
    ("times_{k}", "Write a Python function `times_{k}(x)` that returns x multiplied by {k}.", "return x * {k}",
     lambda x, k: x * k),
    ("minus_{k}", "Write a Python function `minus_{k}(x)` that returns x minus {k}.", "return x - {k}",
     lambda x, k: x - k),
)
SPLITS = ("train", "test")


def pairs(rng: random.Random, n: int, used: set) -> list:
    """n distinct (a, b) pairs of 2..40, none in `used` (which they join)."""
    out = []
    while len(out) < n:
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        if (a, b) not in used:
            used.add((a, b))
            out.append((a, b))
    return out


def gsm8k(rng, ab) -> list:
    rows = []
    for k, (a, b) in enumerate(ab):
        op, text = GSM8K_TEMPLATES[k % len(GSM8K_TEMPLATES)]
        a, b = (max(a, b), min(a, b)) if op == "-" else (a, b)
        value = next(f for o, _, f in OPS if o == op)(a, b)
        rows.append({"question": text.format(name=rng.choice(NAMES), a=a, b=b),
                     "answer": f"{a} {op} {b} = {value}\n#### {value}"})
    return rows


def aqua(rng, ab) -> list:
    rows = []
    for k, (a, b) in enumerate(ab):
        op, word, f = OPS[k % len(OPS)]
        value = f(a, b)
        wrong = rng.sample([value + d for d in (-3, -2, -1, 1, 2, 3, 10)], 4)
        options = wrong[:]
        gold = rng.randrange(5)
        options.insert(gold, value)
        letters = "ABCDE"
        rows.append({"question": f"What is {a} {word} {b}?",
                     "options": [f"{letter}){v}" for letter, v in zip(letters, options)],
                     "rationale": f"{a} {op} {b} = {value}\nANSWER: {letters[gold]}", "correct": letters[gold]})
    return rows


def gpqa(rng, items) -> list:
    """GPQA's CSV columns; the correct answer first, as GPQA ships it (the loader shuffles)."""
    rows = []
    for k, (name, symbol) in enumerate(items):
        others = rng.sample([s for n, s in ELEMENTS if s != symbol], 3)
        rows.append({"Question": f"What is the chemical symbol of {name.lower()}?", "Correct Answer": symbol,
                     "Incorrect Answer 1": others[0], "Incorrect Answer 2": others[1],
                     "Incorrect Answer 3": others[2], "Explanation": f"The symbol of {name.lower()} is {symbol}.",
                     "Record ID": f"practice{rng.randrange(16 ** 8):08x}", "Subdomain": "Chemistry (general)",
                     "High-level domain": "Chemistry"})
    return rows


def kodcode(rng, ks, split: str) -> list:
    rows = []
    for k, step in enumerate(ks):
        name, task, body, ref = CODE_TEMPLATES[k % len(CODE_TEMPLATES)]
        fn = name.format(k=step)
        xs = rng.sample(range(-20, 50), 3)
        tests = "\n\n".join(f"def test_{fn}_{i}():\n    assert {fn}({x}) == {ref(x, step)}" for i, x in enumerate(xs))
        rows.append({"question_id": f"practice_{split}_{k}", "question": task.format(k=step),
                     "solution": f"def {fn}(x):\n    {body.format(k=step)}\n",
                     "test": f"from solution import {fn}\n\n\n{tests}\n"})
    return rows


def write(path: str, rows: list, overwrite: bool) -> bool:
    if os.path.exists(path) and not overwrite:
        return False
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        if path.endswith(".csv"):
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        else:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    os.replace(tmp, path)
    return True


def make(n_train: int, n_test: int, seed: int) -> dict:
    """{relative path: rows} of every practice file (module doc)."""
    if n_test > len(ELEMENTS) // 2 or n_train > 400:
        raise ValueError(f"n_test={n_test}, n_train={n_train}: at most {len(ELEMENTS) // 2} test and 400 train items "
                         "(the templates' distinct items, the splits kept disjoint)")
    rng = random.Random(seed)
    files = {}
    used: set = set()
    test_ab = pairs(rng, 2 * n_test, used)  # the test numbers first: train never draws them
    train_ab = pairs(rng, 2 * n_train, used)
    elements = list(ELEMENTS)
    rng.shuffle(elements)
    test_el, train_el = elements[:n_test], [elements[n_test + k % (len(elements) - n_test)] for k in range(n_train)]
    test_k = list(range(2, 2 + n_test))
    train_k = [2 + n_test + k for k in range(n_train)]
    for split, ab, el, ks in (("test", test_ab, test_el, test_k), ("train", train_ab, train_el, train_k)):
        half = len(ab) // 2
        files[f"gsm8k/{split}.jsonl"] = gsm8k(rng, ab[:half])
        files[f"aqua/{split}.json"] = aqua(rng, ab[half:])
        files[f"gpqa/{split}.csv"] = gpqa(rng, el)
        files[f"kodcode/{split}.jsonl"] = kodcode(rng, ks, split)
    return files


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m launch.write_practice_data", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="data")
    p.add_argument("--n_train", type=int, default=64)
    p.add_argument("--n_test", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args(argv)
    if args.n_train < 1 or args.n_test < 1:
        print("write_practice_data: --n_train and --n_test must be >= 1", file=sys.stderr)
        return 2
    try:
        files = make(args.n_train, args.n_test, args.seed)
    except ValueError as e:
        print(f"write_practice_data: {e}", file=sys.stderr)
        return 2
    for rel, rows in files.items():
        path = os.path.join(args.out, rel)
        print(f"{'wrote' if write(path, rows, args.overwrite) else 'kept (exists; --overwrite replaces)'} "
              f"{path} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
