"""A.1 as the paper runs it: >= 3 trials with mean and spread, 1:1:1 balanced tasks."""

import json

import pytest

from hymem import ScriptedClient
from tests.hymem.test_resilience import _eval_cfg


def test_trials_are_seeded_resumable_and_summarized(tmp_path):
    import hymem.evaluate as ev

    cfg = _eval_cfg(tmp_path)
    cfg.agents = ("base",)
    cfg.trials = 3
    seeds = []

    def script(tag, messages):
        return "<answer>wrong</answer>"

    class Seeds(ScriptedClient):
        def complete(self, messages, tag=None, **sampling):
            seeds.append(sampling.get("seed"))
            return super().complete(messages, tag, **sampling)

    summary = ev.evaluate(cfg, client=Seeds(script))
    rows = [json.loads(line) for line in open(tmp_path / "out" / "results.jsonl")]
    n_tasks = len({r["task"] for r in rows})
    assert sorted({r["trial"] for r in rows}) == [0, 1, 2] and len(rows) == 3 * n_tasks
    assert sorted(set(seeds), key=str) == sorted({None, 1, 2}, key=str)  # trial k: seed + k
    s = summary["base"]
    assert s["trials"] == 3 and s["tasks"] == n_tasks and len(s["pass@1_per_trial"]) == 3
    assert s["pass@1_std"] == 0.0 and s["pass@1"] == 0.0 and s["pass@1_by_group"] == {"1": 0.0}  # by N
    for trial in (1, 2):
        assert (tmp_path / "out" / "traces" / "base" / f"{rows[0]['task']}.trial{trial}.jsonl").exists()
    calls = len(seeds)
    ev.evaluate(cfg, client=Seeds(script))  # everything done: nothing runs again
    assert len(seeds) == calls


def test_balanced_selection_takes_equal_shares_of_each_level():
    from activemem_jax.tasks import select_balanced

    rows = [{"id": str(i), "difficulty": ("easy", "medium", "hard")[i % 3] if i < 300 else "hard",
             "evidence_docs": list(range(i % 7))} for i in range(360)]
    picked = select_balanced(rows, "difficulty", 150, seed=0)
    assert len(picked) == 150 and len({r["id"] for r in picked}) == 150
    assert {lvl: sum(r["difficulty"] == lvl for r in picked) for lvl in ("easy", "medium", "hard")} == \
        {"easy": 50, "medium": 50, "hard": 50}
    assert select_balanced(rows, "difficulty", 150, seed=0) == picked  # reproducible
    assert select_balanced(rows, "", 10) == rows[:10]
    assert len(select_balanced(rows, "evidence_terciles", 90)) == 90
    with pytest.raises(ValueError, match="no 'level' field"):
        select_balanced(rows, "level", 150)


def test_browsecomp_plus_as_a1_runs_it_balanced_levels_and_three_trials(tmp_path):
    import hymem.evaluate as ev

    with open(tmp_path / "q.jsonl", "w") as f:
        for i in range(12):
            level = ("easy", "medium", "hard")[i % 3]
            f.write(json.dumps({"query_id": str(i), "query": f"When was Velmor founded? ({level} {i})",
                                "answer": "1821", "difficulty": level, "evidence_docs": [{"docid": "d1"}]}) + "\n")
    with open(tmp_path / "corpus.jsonl", "w") as f:
        f.write(json.dumps({"docid": "d1", "title": "Velmor", "text": "Velmor was founded in 1821."}) + "\n")
    cfg = _eval_cfg(tmp_path)
    cfg.agents = ("react",)
    cfg.trials = 3
    cfg.data.update(dict(name="browsecomp_plus", queries=str(tmp_path / "q.jsonl"),
                              corpus=str(tmp_path / "corpus.jsonl"), n_tasks=6, balance="difficulty"))
    summary = ev.evaluate(cfg, client=ScriptedClient({"react": ["<answer>1821</answer><confidence>1</confidence>"]}))
    rows = [json.loads(line) for line in open(tmp_path / "out" / "results.jsonl")]
    tasks = {r["task"] for r in rows}
    assert len(tasks) == 6 and len(rows) == 18
    assert sorted(int(t) % 3 for t in tasks) == [0, 0, 1, 1, 2, 2]  # two of each level
    assert summary["react"]["trials"] == 3 and summary["react"]["pass@1"] == 1.0
    assert summary["react"]["pass@1_by_group"] == {"easy": 1.0, "hard": 1.0, "medium": 1.0}  # the family's grouping
    assert (tmp_path / "out" / "context_growth.png").exists()
