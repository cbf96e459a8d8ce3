"""WideSearch's Item-F1, Row-F1 and success rate on hand-worked tables."""

import pytest

from activemem_jax.metrics.widesearch import parse_markdown_table, score_table

EVALUATION = {
    "unique_columns": ["Name"],
    "required": ["Name", "Year", "Revenue", "Site"],
    "eval_pipeline": {
        "Year": {"preprocess": ["extract_number"], "metric": ["exact_match"]},
        "Revenue": {"preprocess": ["extract_number"], "metric": ["number_near"], "criterion": 0.1},
        "Site": {"metric": ["url_match"]},
    },
}
GOLD = [
    {"Name": "Alpha", "Year": "1999", "Revenue": "$1,000", "Site": "https://alpha.com/about"},
    {"Name": "Beta", "Year": "2005", "Revenue": "200", "Site": "https://beta.org"},
    {"Name": "Gamma", "Year": "2010", "Revenue": "50", "Site": "https://gamma.net"},
    {"Name": "Epsilon", "Year": "2020", "Revenue": "7", "Site": "https://epsilon.io"},
]


def test_item_and_row_f1_by_hand():
    response = """Here is the table.
```markdown
| name | YEAR | Revenue | Site |
|------|:----:|---------|------|
| **alpha** | 1999年 | 1050 | http://alpha.com/x |
| Beta | 2004 | 200 | https://beta.org |
| Delta | 2001 | 9 | https://delta.com |
| Alpha | 1800 | 1 | https://wrong.com |
```
Gamma and Epsilon were not found."""
    # rows after dropping the repeated Alpha: alpha (4 cells right: key, 1999, 1050 within
    # 10% of 1000, same host), Beta (3: the year is wrong), Delta (no gold row: 0).
    # 7 right cells; response 3 rows x 4 = 12 items, gold 4 rows x 4 = 16 items.
    s = score_table(response, GOLD, EVALUATION)
    assert (s.item_precision, s.item_recall) == (pytest.approx(7 / 12), pytest.approx(7 / 16))
    assert s.item_f1 == pytest.approx(0.5)  # 2 * (7/12) * (7/16) / (7/12 + 7/16)
    assert (s.row_precision, s.row_recall) == (pytest.approx(1 / 3), pytest.approx(1 / 4))
    assert s.row_f1 == pytest.approx(2 / 7)
    assert s.success == 0.0 and s.approximated == () and s.note == ""


def test_a_complete_table_succeeds_and_one_missing_row_does_not():
    rows = [{"NAME": "alpha", "year": "in 1999", "revenue": "1,000", "site": "https://alpha.com/"},
            {"NAME": "Beta", "year": "2005", "revenue": "210", "site": "https://beta.org/x"},
            {"NAME": "Gamma", "year": "2010.0", "revenue": "50", "site": "https://gamma.net"},
            {"NAME": "EPSILON", "year": "2020", "revenue": "7.5", "site": "https://epsilon.io"}]
    s = score_table(rows, GOLD, EVALUATION)
    assert (s.success, s.item_f1, s.row_f1) == (1.0, 1.0, 1.0)
    s = score_table(rows[:3], GOLD, EVALUATION)
    assert s.success == 0.0 and s.item_precision == 1.0 and s.item_recall == pytest.approx(12 / 16)


def test_default_columns_compare_normalised_strings_and_numbers():
    gold = [{"City": "New York", "Population": "3"}, {"City": "Paris", "Population": "two"}]
    evaluation = {"unique_columns": ["City"]}
    s = score_table("| City | Population |\n| --- | --- |\n| new york | 3.0 |\n| PARIS | *Two* |", gold, evaluation)
    assert s.success == 1.0
    s = score_table("City | Population\nnew york | 4\nParis | two", gold, evaluation)
    assert (s.item_f1, s.row_f1) == (pytest.approx(3 / 4), pytest.approx(1 / 2))


def test_responses_that_cannot_be_compared_score_zero_and_say_why():
    s = score_table("I could not find it.", GOLD, EVALUATION)
    assert (s.item_f1, s.note) == (0.0, "no markdown table in the response")
    s = score_table("| Name | Year |\n|---|---|\n| Alpha | 1999 |", GOLD, EVALUATION)
    assert s.item_f1 == 0.0 and "not the required" in s.note


def test_judged_columns_are_listed_and_bad_pipelines_refused():
    judged = {"metric": ["llm_judge"], "criterion": "same meaning"}
    evaluation = {"unique_columns": ["Name"], "eval_pipeline": {"Note": judged}}
    gold = [{"Name": "A", "Note": "Founded early"}]
    s = score_table([{"Name": "a", "Note": "founded early"}], gold, evaluation)
    assert s.approximated == ("note",) and s.success == 1.0
    with pytest.raises(ValueError, match="'year'.*unknown step.*'fuzzy'"):
        score_table([], GOLD, {"unique_columns": ["Name"], "eval_pipeline": {"Year": {"metric": ["fuzzy"]}}})
    with pytest.raises(ValueError, match="number_near needs a numeric criterion"):
        score_table([], GOLD, {"unique_columns": ["Name"], "eval_pipeline": {"Year": {"metric": ["number_near"]}}})


def test_markdown_table_parsing():
    columns, rows = parse_markdown_table("intro | not a table\n\n| A | B c |\n|:-|-:|\n| 1 | 2 |\n| 3 |\nafter")
    assert columns == ["a", "bc"] and rows == [{"a": "1", "bc": "2"}, {"a": "3", "bc": ""}]
    assert parse_markdown_table("no pipes here") is None
