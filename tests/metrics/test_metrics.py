"""Scorers on hand-worked cases."""


import pytest

from activemem_jax import metrics as M


def test_squad_em_and_f1():
    assert M.exact_match("The Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert M.exact_match("an  apple", "Apple") == 1.0
    assert M.exact_match("Paris, France", ["Paris"]) == 0.0
    assert M.exact_match("x", ["y", "X."]) == 1.0
    # pred "new york city" vs gold "york city": common 2, P=2/3, R=1 -> 0.8
    assert M.f1("New York City", ["York City"]) == pytest.approx(0.8)
    assert M.f1("the", ["a"]) == 1.0  # both normalize to empty
    assert M.f1("cat", ["dog"]) == 0.0
    assert M.f1("x b c", ["b c d", "z"]) == pytest.approx(2 / 3)
    assert M.f1("a b c", ["b c d"]) == pytest.approx(0.8)  # article dropped: P 1, R 2/3


def test_mem1_multi_objective_score():
    golds = [["Paris"], ["1987"], ["Ada Lovelace", "Lovelace"]]
    assert M.multi_objective_score("Paris; 1987; Lovelace", golds) == 3.0
    assert M.multi_objective_score(" paris ;1987 ; Babbage", golds) == 2.0
    assert M.multi_objective_score("Paris; 1987", golds) == 0.0  # count mismatch
    assert M.multi_objective_score("Paris; 1987; Lovelace; extra", golds) == 0.0
    assert M.multi_objective_score("Paris; ; Lovelace", golds) == 2.0  # empty answer counts
    assert M.multi_objective_score("The Paris", [["Paris"]]) == 1.0


def test_gaia_scorer_rules():
    assert M.gaia_score("$1,000", "1000")
    assert M.gaia_score("17%", "17")
    assert M.gaia_score("17.0", "17")
    assert not M.gaia_score("seventeen", "17")
    assert not M.gaia_score("1,0001", "1000")
    assert M.gaia_score("Saint Petersburg", "saint-petersburg")  # punctuation + whitespace dropped
    assert M.gaia_score("  Hello World ", "helloworld")
    assert M.gaia_score("apple, 3, banana", "Apple; 3; banana")  # lists element-wise
    assert not M.gaia_score("apple, 3", "apple, 3, banana")  # length differs
    assert not M.gaia_score("apple., 3", "apple, 3")  # list items keep punctuation
    assert M.gaia_score("a b, 2.0", "ab,2")
    assert not M.gaia_score(None, "x")
    assert M.gaia_score(None, "None")


def test_trajectory_metrics():
    assert M.peak_tokens([120, 480, 300]) == 480 and M.peak_tokens([]) == 0
    # (100 + 10/2)*10 + (150 + 20/2)*20 = 1050 + 3200
    assert M.dependency_length([(100, 10), (150, 20)]) == 4250.0
    assert M.pass_at_k(3, 10, 1) == pytest.approx(0.3)
    assert M.pass_at_k(1, 4, 2) == pytest.approx(1 - (3 / 4) * (2 / 3))
    assert M.pass_at_k(0, 5, 3) == 0.0 and M.pass_at_k(4, 5, 2) == 1.0
    assert M.mean_pass_at_k([[True, False], [False, False], [True, True]]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        M.pass_at_k(6, 5)
    assert M.mean_pass_at_k([]) == 0.0
