"""launch/write_practice_data.py: the files load through the datasets' own loaders, the
splits are disjoint, the references are right, and an existing file is kept."""

import json

from activemem_jax.data.choice_loaders import load_aqua, load_gpqa
from activemem_jax.data.code_tasks import load_kodcode
from activemem_jax.envs.choice import ChoiceEnv, choice_score
from activemem_jax.envs.code import code_baselines
from launch import write_practice_data as practice


def test_the_files_load_disjoint_and_answerable(tmp_path):
    assert practice.main(["--out", str(tmp_path), "--n_train", "12", "--n_test", "6", "--seed", "3"]) == 0
    aqua = {s: load_aqua(str(tmp_path / "aqua" / f"{s}.json")) for s in ("train", "test")}
    gpqa = {s: load_gpqa(str(tmp_path / "gpqa" / f"{s}.csv"), seed=0) for s in ("train", "test")}
    code = {s: load_kodcode(str(tmp_path / "kodcode" / f"{s}.jsonl")) for s in ("train", "test")}
    gsm8k = {s: [json.loads(line) for line in open(tmp_path / "gsm8k" / f"{s}.jsonl")] for s in ("train", "test")}
    assert [len(aqua["train"]), len(aqua["test"]), len(gpqa["test"]), len(code["train"]), len(gsm8k["test"])] == \
        [12, 6, 6, 12, 6]
    for split in ("train", "test"):  # the gold letter holds the value the rationale computes
        for t in aqua[split]:
            value = t["rationale"].split("= ")[1].split("\n")[0]
            assert t["options"]["ABCDE".index(t["gold"])] == value
            assert choice_score(t, f"Answer: {t['gold']}") == 1.0
        for row in gsm8k[split]:
            expr, value = row["answer"].split("\n#### ")[0].split(" = ")
            assert eval(expr) == int(value)  # noqa: S307 (two numbers and an operator, written above)
    for t in gpqa["test"]:
        assert t["options"][ord(t["gold"]) - 65] in t["explanation"]
    assert {t["question"] for t in aqua["train"]}.isdisjoint(t["question"] for t in aqua["test"])
    assert {t["question"] for t in gpqa["train"]}.isdisjoint(t["question"] for t in gpqa["test"])
    assert {t["prompt"] for t in code["train"]}.isdisjoint(t["prompt"] for t in code["test"])
    assert {r["question"] for r in gsm8k["train"]}.isdisjoint(r["question"] for r in gsm8k["test"])
    rules = code_baselines(code["test"][:3])  # the reference passes its tests, a body that does nothing fails them
    assert (rules["empty"], rules["canonical"]) == (0.0, 1.0)
    assert len(ChoiceEnv().reset(gpqa["test"][:2])) == 2
    # a second call keeps what exists; --overwrite replaces it
    before = (tmp_path / "aqua" / "test.json").read_text()
    assert practice.main(["--out", str(tmp_path), "--n_test", "6", "--seed", "4"]) == 0
    assert (tmp_path / "aqua" / "test.json").read_text() == before
    assert practice.main(["--out", str(tmp_path), "--n_test", "6", "--seed", "4", "--overwrite"]) == 0
    assert (tmp_path / "aqua" / "test.json").read_text() != before
    assert practice.main(["--out", str(tmp_path), "--n_test", "40"]) == 2
