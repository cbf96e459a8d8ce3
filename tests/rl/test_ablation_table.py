"""The dossier ablation bench's statistics and table (activemem_jax/rl/ablation_table.py)."""

import math

from activemem_jax.rl import ablation_table


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
