"""Code with executed tests (activemem_jax/data/code_tasks.py, envs/code.py, tasks/code.py):
the loaders read HumanEval as shipped and KodCode / BigCodeBench rows in their published
layouts, the harness counts each test on its own, the canonical solutions pass, hostile
programs end with a reason and a zero, and the environment runs episodes of attempts."""

import json

import pytest

from activemem_jax.data.code_tasks import load_bigcodebench, load_code_tasks, load_humaneval, load_kodcode
from activemem_jax.envs.code import CodeEnv, code_baselines, count_tests, extract_code, run_tests
from activemem_jax.envs.sandbox import Limits

FAST = Limits(cpu_s=2.0, wall_s=4.0, memory_mb=256, output_bytes=16384)

# KodCode-V1's layout (a subset of its fields, as the released JSONL holds them)
KODCODE = [
    {"version": "v1.0", "style": "instruct", "subset": "Leetcode", "question_id": "Leetcode_1_I",
     "question": "Write a function `add_pairs(nums)` that returns the sums of adjacent pairs of a list; raise "
                 "ValueError on an empty list.",
     "solution": "def add_pairs(nums):\n    if not nums:\n        raise ValueError('empty')\n"
                 "    return [a + b for a, b in zip(nums, nums[1:])]\n",
     "test": "from solution import add_pairs\nimport pytest\n\ndef test_basic():\n    assert add_pairs([1, 2, 3]) == [3, 5]\n\n"
             "def test_one():\n    assert add_pairs([4]) == []\n\ndef test_empty():\n    with pytest.raises(ValueError):\n"
             "        add_pairs([])\n\ndef test_float():\n    assert add_pairs([0.1, 0.2]) == [pytest.approx(0.3)]\n",
     "test_info": [{"function_name": "add_pairs", "parameter_list": "(nums)", "function_declaration": "def add_pairs(nums):",
                    "docstring": None}],
     "gpt_pass_sequence": [1, 1, 1], "gpt_pass_trial_num": 3, "gpt_difficulty": "easy", "gpt_pass_percentage": 1.0},
    {"version": "v1.0", "style": "instruct", "subset": "Apps", "question_id": "Apps_2_I",
     "question": "Write `is_even(n)`.", "solution": "def is_even(n):\n    return n % 2 == 0\n",
     "test": "from solution import is_even\n\ndef test_even():\n    assert is_even(2)\n\ndef test_odd():\n"
             "    assert not is_even(3)\n\ndef test_fixture(tmp_path):\n    assert tmp_path\n",
     "test_info": [], "gpt_pass_sequence": [1], "gpt_pass_trial_num": 1, "gpt_difficulty": "easy",
     "gpt_pass_percentage": 1.0},
]
# BigCodeBench's layout (stdlib-only tasks, as its rows hold them)
BIGCODEBENCH = [
    {"task_id": "BigCodeBench/900", "complete_prompt": "import collections\n\ndef task_func(words):\n    \"\"\"Count.\"\"\"\n",
     "instruct_prompt": "Count the words of a list and return a collections.Counter.\nYou should write self-contained "
                        "code starting with:\n```\nimport collections\ndef task_func(words):\n```",
     "canonical_solution": "    return collections.Counter(words)\n",
     "code_prompt": "import collections\ndef task_func(words):\n",
     "test": "import unittest\n\nclass TestCases(unittest.TestCase):\n    def test_count(self):\n"
             "        self.assertEqual(task_func(['a', 'b', 'a'])['a'], 2)\n    def test_empty(self):\n"
             "        self.assertEqual(len(task_func([])), 0)\n    def test_type(self):\n"
             "        self.assertIsInstance(task_func(['x']), collections.Counter)\n",
     "entry_point": "task_func", "doc_struct": "{}", "libs": "['collections']"},
]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def humaneval():
    return load_humaneval(split="all")


def test_humaneval_as_shipped_with_a_held_out_split(humaneval):
    assert len(humaneval) == 164 and humaneval[0]["id"] == "HumanEval/0"
    train, test = load_humaneval(split="train"), load_humaneval(split="test")
    assert (len(train), len(test)) == (131, 33)
    assert not {t["id"] for t in train} & {t["id"] for t in test}
    assert count_tests(humaneval[0]) == 7  # check's seven asserts
    with pytest.raises(ValueError, match="data.split='dev': HumanEval's splits are"):
        load_humaneval(split="dev")


def test_the_canonical_solutions_pass_and_an_empty_body_does_not(humaneval):
    tasks = load_humaneval(split="test")[:12]
    rules = code_baselines(tasks, FAST)
    assert rules["canonical"] == 1.0, {k: v for k, v in rules["units"]["canonical"].items() if v < 1}
    assert rules["empty"] < 0.2 and set(rules["units"]["empty"]) == {t["id"] for t in tasks}


def test_each_test_counts_on_its_own(humaneval):
    task = humaneval[0]  # has_close_elements: 4 of its 7 asserts expect True
    always_true = "def has_close_elements(numbers, threshold):\n    return True\n"
    out = run_tests(task, always_true, FAST)
    assert (out.passed, out.total, out.status) == (4, 7, "ok") and "assert candidate" in out.why
    body_only = "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"
    assert run_tests(task, body_only, FAST).passed == 7  # a body after the prompt's header runs too


def test_kodcode_and_bigcodebench_rows_in_their_layouts(tmp_path):
    kod = load_kodcode(_jsonl(tmp_path / "kod.jsonl", KODCODE))
    assert [t["id"] for t in kod] == ["Leetcode_1_I", "Apps_2_I"] and kod[0]["style"] == "pytest"
    first = run_tests(kod[0], kod[0]["solution"], FAST)
    assert (first.passed, first.total) == (4, 4)  # pytest.raises and pytest.approx, with or without pytest
    second = run_tests(kod[1], kod[1]["solution"], FAST)
    assert (second.passed, second.total) == (2, 3) and "test_fixture" in second.why  # a fixture test fails
    wrong = run_tests(kod[0], "def add_pairs(nums):\n    return []\n", FAST)
    assert wrong.passed == 1 and wrong.total == 4  # only the one-element case
    bcb = load_bigcodebench(_jsonl(tmp_path / "bcb.jsonl", BIGCODEBENCH))
    assert bcb[0]["solution"].startswith("import collections") and count_tests(bcb[0]) == 3
    assert run_tests(bcb[0], bcb[0]["solution"], FAST).passed == 3
    half = "import collections\ndef task_func(words):\n    return {w: words.count(w) for w in words}\n"
    assert run_tests(bcb[0], half, FAST).passed == 2  # not a Counter


def test_bad_rows_and_names_are_named(tmp_path):
    broken = [dict(KODCODE[0]), {k: v for k, v in KODCODE[1].items() if k != "test"}]
    path = _jsonl(tmp_path / "kod.jsonl", broken)
    with pytest.raises(KeyError, match=r"kod.jsonl: row 2 has no 'test' field"):
        load_kodcode(path)
    assert [t["id"] for t in load_kodcode(path, bad_rows="skip")] == ["Leetcode_1_I"]
    with pytest.raises(ValueError, match="set data.path"):
        load_code_tasks("kodcode")
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        load_code_tasks("bigcodebench", str(tmp_path / "missing.jsonl"))


@pytest.mark.parametrize("program, status", [
    ("def has_close_elements(n, t):\n    while True:\n        pass\n", ("cpu_limit", "timeout")),
    ("import sys\nwhile True:\n    sys.__stdout__.write('x' * 100000)\n", ("output_limit", "timeout", "error")),
    ("def has_close_elements(n, t):\n    return [0] * (10 ** 10)\n", ("ok", "error", "memory_limit")),
    ("\x00\udcff garbage (((", ("ok", "error")),
])
def test_hostile_programs_end_with_zero_and_a_reason(humaneval, program, status):
    out = run_tests(humaneval[0], program, FAST)
    assert out.passed == 0 and out.status in status, out
    assert out.why  # a reason the next observation shows


def test_extract_code():
    assert extract_code("Here:\n```python\nx = 1\n```\nand\n```\ny = 2\n```") == "y = 2\n"
    assert extract_code("```python\ndef f():\n    return 1") == "def f():\n    return 1"  # cut off mid-block
    assert extract_code("def f(): pass") == "def f(): pass"


def test_an_episode_of_attempts(humaneval):
    task = {**humaneval[0], "max_turns": 2}
    env = CodeEnv(max_turns=2, limits=FAST)
    obs = env.reset([task, task])
    assert "```python" in obs[0] and "has_close_elements" in obs[0]
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    obs, rewards, dones, infos = env.step([wrong, env.expert(1, 0)])
    assert rewards == [4 / 7, 1.0] and dones == [False, True]
    assert "passed 4 of 7 tests" in obs[0] and infos[1]["per_question_em"] == [1.0]
    obs, rewards, dones, infos = env.step(["while True: pass", ""])  # a done episode is not run again
    assert dones == [True, True] and rewards[1] == 0.0 and infos[1]["reward"] == 1.0
    assert infos[0]["reward"] == 0.0 and infos[0]["status"] in ("ok", "error", "timeout", "cpu_limit")


def test_the_family_is_registered_with_its_sandbox_limits():
    from activemem_jax import schema
    from activemem_jax.tasks import build_section

    ts = build_section({"name": "humaneval", "split": "test", "n_tasks": 3, "max_turns": 2,
                        "sandbox": {"cpu_s": 1.0}})
    assert len(ts.tasks) == 3 and ts.make_env().limits.cpu_s == 1.0 and ts.make_env().max_turns == 2
    rules = ts.baselines(ts.tasks[:2])  # what launch.train prints beside the held-out scores
    assert (rules["empty"], rules["canonical"]) == (0.0, 1.0) and set(rules["units"]) == {"empty", "canonical"}
    with pytest.raises(schema.ConfigError, match=r"^data.sandbox.cpu: no such sandbox limit"):
        schema.section(schema.Data, {"name": "humaneval", "sandbox": {"cpu": 1}}, "data")
