"""The two-level bootstrap's interval against the exact distribution, enumerated by hand."""

import itertools

import numpy as np
import pytest

from activemem_jax.metrics.intervals import bootstrap_margin


def _exact_margins(trained, reference):
    """Every equally likely replicate of the two-level bootstrap, enumerated: ordered draws
    of the seeds, and ordered draws of the units shared by every seed and the reference."""
    units = sorted(trained[0])
    s, u = len(trained), len(units)
    out = []
    for seeds in itertools.product(range(s), repeat=s):
        for draw in itertools.product(units, repeat=u):
            out.append(sum(sum(trained[k][x] - reference[x] for x in draw) / u for k in seeds) / s)
    return np.asarray(out)


def test_the_interval_matches_the_enumerated_bootstrap():
    trained = [{"a": 1.0, "b": 0.5, "c": 0.0}, {"a": 0.5, "b": 1.0, "c": 1.0}]
    rule = {"a": 0.5, "b": 0.5, "c": 0.25}
    exact = _exact_margins(trained, rule)  # 4 seed draws x 27 unit draws
    got = bootstrap_margin(trained, rule, replicates=200_000, seed=1)
    assert got["margin"] == pytest.approx(np.mean([[t[x] - rule[x] for x in "abc"] for t in trained]))
    assert (got["seeds"], got["units"]) == (2, 3)
    # the sampled quantiles sit where the exact distribution puts 2.5% and 97.5% of its mass
    for q, p in ((got["lo"], 0.025), (got["hi"], 0.975)):
        below, at_most = np.mean(exact < q - 1e-9), np.mean(exact <= q + 1e-9)
        assert below - 0.005 <= p <= at_most + 0.005, (q, p, below, at_most)


def test_seeds_that_disagree_widen_the_interval_and_a_per_seed_reference_pairs():
    units = {str(i): 0.5 for i in range(32)}
    agree = bootstrap_margin([{u: 0.8 for u in units}] * 2, units)
    split = bootstrap_margin([{u: 0.9 for u in units}, {u: 0.5 for u in units}], units)
    assert agree["lo"] == pytest.approx(0.3) and agree["hi"] == pytest.approx(0.3)  # no noise anywhere
    assert split["margin"] == pytest.approx(0.2) and split["lo"] == pytest.approx(0.0)  # the weaker seed alone
    # each seed against its own untrained controller: seed 1 gained nothing over its own
    own = bootstrap_margin([{u: 0.9 for u in units}, {u: 0.5 for u in units}],
                           [{u: 0.1 for u in units}, {u: 0.5 for u in units}])
    assert own["margin"] == pytest.approx(0.4) and own["lo"] == pytest.approx(0.0)


def test_scores_on_other_units_are_refused():
    with pytest.raises(ValueError, match="same units"):
        bootstrap_margin([{"a": 1.0}, {"b": 1.0}], {"a": 0.0, "b": 0.0})
    with pytest.raises(ValueError, match="same units"):
        bootstrap_margin([{"a": 1.0, "b": 1.0}], {"a": 0.0})
    with pytest.raises(ValueError, match="reference rows"):
        bootstrap_margin([{"a": 1.0}, {"a": 1.0}], [{"a": 0.0}])
