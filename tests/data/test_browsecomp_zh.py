"""BrowseComp-ZH's encrypted release (XLSX, or the same table as CSV), encrypted here the
way the release's script undoes it: base64 of the text XOR SHA-256(row's canary) repeated."""

import base64
import csv
import hashlib
import logging

import pytest

from activemem_jax.data.browsecomp_zh import load_browsecomp_zh

CANARY = "BrowseComp-ZH canary 0f3c-2a91"
ROWS = [("影视", "哪部电影于1994年在北京首映，导演出生于西安？", "活着"),
        ("历史", "哪所大学成立于1898年，最初名为京师大学堂？", "北京大学")]


def _encrypt(text: str, password: str) -> str:
    data = text.encode("utf-8")
    digest = hashlib.sha256(password.encode()).digest()
    key = digest * (len(data) // len(digest)) + digest[: len(data) % len(digest)]
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, key))).decode()


def _table(rows):
    """Header and encrypted rows; a row is (topic, question, answer[, canary used to encrypt])."""
    out = [["Topic", "Question", "Answer", "canary", "Source"]]
    for topic, question, answer, *used in rows:
        key = used[0] if used else CANARY
        out.append([_encrypt(t, key) if t else t for t in (topic, question, answer)] + [CANARY, "web"])
    return out


def _xlsx(path, table):
    import openpyxl

    book = openpyxl.Workbook()
    for row in table:
        book.active.append(row)
    book.save(path)
    return str(path)


def _csv(path, table):
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(table)
    return str(path)


def test_the_release_decrypts_from_xlsx_and_csv(tmp_path):
    table = _table(ROWS)
    expected = [{"id": "1", "question": ROWS[0][1], "answers": [ROWS[0][2]], "topic": ROWS[0][0]},
                {"id": "2", "question": ROWS[1][1], "answers": [ROWS[1][2]], "topic": ROWS[1][0]}]
    assert load_browsecomp_zh(_xlsx(tmp_path / "browsecomp-zh-encrypted.xlsx", table)) == expected
    assert load_browsecomp_zh(_csv(tmp_path / "browsecomp-zh-encrypted.csv", table)) == expected
    plain = [table[0]] + [[t, q, a, CANARY, "web"] for t, q, a in ROWS]
    assert load_browsecomp_zh(_csv(tmp_path / "decrypted.csv", plain), encrypted=False) == expected


def test_bad_rows_strict_names_the_row_and_skip_counts_them(tmp_path, caplog):
    other_key = ("历史", "这个问题用另一个口令加密，无法用本行的口令解开。" * 3, "答案", "another canary")
    rows = ROWS[:1] + [other_key, ("", "没有答案的问题？", ""), ROWS[1]]
    path = _xlsx(tmp_path / "bad.xlsx", _table(rows))
    with pytest.raises(ValueError, match=r"bad\.xlsx: row 2 cannot be decrypted with its canary"):
        load_browsecomp_zh(path)
    with caplog.at_level(logging.WARNING):
        kept = load_browsecomp_zh(path, bad_rows="skip")
    assert [r["id"] for r in kept] == ["1", "4"] and kept[1]["answers"] == ["北京大学"]
    assert "skipped 1 row (cannot be decrypted): row 2" in caplog.text
    assert "skipped 1 row (no Answer): row 3" in caplog.text


def test_a_header_without_the_canary_column_is_named(tmp_path):
    path = _csv(tmp_path / "t.csv", [["Topic", "Question", "Answer"], ["a", "b", "c"]])
    with pytest.raises(KeyError, match=r"t\.csv: the header has no column \['canary'\]"):
        load_browsecomp_zh(path)
    with pytest.raises(FileNotFoundError, match="browsecomp-zh-encrypted.xlsx"):
        load_browsecomp_zh(str(tmp_path / "absent.xlsx"))
