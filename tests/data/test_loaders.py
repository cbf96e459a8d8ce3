"""Loaders read fixtures written in each dataset's official format."""

import json
import subprocess
import sys

import pytest

from activemem_jax.data import loaders


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_flashrag(tmp_path):
    p = _jsonl(tmp_path / "dev.jsonl", [
        {"id": "test_0", "question": "who wrote hamlet?", "golden_answers": ["Shakespeare", "W. Shakespeare"],
         "metadata": {}},
        {"id": "test_1", "question": "capital of peru?", "golden_answers": "Lima"}])
    rows = loaders.load_flashrag(p)
    assert rows[0] == {"id": "test_0", "question": "who wrote hamlet?",
                       "answers": ["Shakespeare", "W. Shakespeare"]}
    assert rows[1]["answers"] == ["Lima"]
    bad = _jsonl(tmp_path / "bad.jsonl", [{"id": 1, "question": "q"}])
    with pytest.raises(KeyError, match="golden_answers"):
        loaders.load_flashrag(bad)


def test_gsm8k_and_math(tmp_path):
    g = _jsonl(tmp_path / "test.jsonl", [{"question": "Tom has 3 apples...",
                                          "answer": "3 + 2 = <<3+2=5>>5\n#### 1,205"}])
    assert loaders.load_gsm8k(g)[0]["answer"] == "1205"
    d = tmp_path / "MATH" / "test" / "algebra"
    d.mkdir(parents=True)
    (d / "1.json").write_text(json.dumps({"problem": "Solve x+1=2.", "level": "Level 1",
                                          "type": "Algebra", "solution": "So $x=\\boxed{1}$."}))
    rows = loaders.load_math(str(tmp_path / "MATH"))
    assert rows[0]["answer"] == "1" and rows[0]["id"] == "test/algebra/1.json"
    assert rows[0]["level"] == "Level 1"


def test_gaia_jsonl_and_parquet(tmp_path):
    rows = [{"task_id": "t1", "Question": "How many?", "Level": 1, "Final answer": "42",
             "file_name": "t1.xlsx", "Annotator Metadata": {}},
            {"task_id": "t2", "Question": "Who?", "Level": 2, "Final answer": "Ada", "file_name": ""}]
    _jsonl(tmp_path / "metadata.jsonl", rows)
    (tmp_path / "t1.xlsx").write_bytes(b"fake")
    got = loaders.load_gaia(str(tmp_path))
    assert got[0]["file_path"] == str(tmp_path / "t1.xlsx") and got[1]["file_path"] is None
    assert got[0]["answer"] == "42" and got[1]["level"] == 2
    import pyarrow as pa
    import pyarrow.parquet as pq

    pdir = tmp_path / "pq"
    pdir.mkdir()
    flat = [{k: v for k, v in r.items() if k != "Annotator Metadata"} for r in rows]
    pq.write_table(pa.Table.from_pylist(flat), pdir / "metadata.parquet")
    assert [r["id"] for r in loaders.load_gaia(str(pdir))] == ["t1", "t2"]
    with pytest.raises(FileNotFoundError, match="metadata.jsonl or metadata.parquet"):
        loaders.load_gaia(str(tmp_path / "missing"))


def test_browsecomp_plus_decrypt_round_trip(tmp_path):
    canary = "BROWSECOMP_PLUS canary GUID test-1234"
    secret_q = "Which film released in 1987 was directed by a former chemist?"
    token = loaders.encrypt_browsecomp(secret_q, canary)
    assert token != secret_q and loaders.decrypt_browsecomp(token, canary) == secret_q
    with pytest.raises(ValueError, match="wrong canary"):
        loaders.decrypt_browsecomp(token, "wrong canary")
    q = _jsonl(tmp_path / "queries.jsonl", [{
        "query_id": "770", "query": token, "answer": loaders.encrypt_browsecomp("The Last Tide", canary),
        "gold_docs": [{"docid": "d1"}], "evidence_docs": [{"docid": "d2"}]}])
    c = _jsonl(tmp_path / "corpus.jsonl", [{"docid": "d1", "text": "The Last Tide (1987) ..."}])
    (tmp_path / "qrels.txt").write_text("770 0 d1 1\n770 0 d2 0\n")
    data = loaders.load_browsecomp_plus(q, c, str(tmp_path / "qrels.txt"), canary=canary)
    assert data["queries"][0]["question"] == secret_q
    assert data["queries"][0]["answers"] == ["The Last Tide"]
    assert data["corpus"][0]["docid"] == "d1" and data["qrels"] == {"770": {"d1": 1, "d2": 0}}


def test_missing_files_say_where_to_put_them(tmp_path):
    with pytest.raises(FileNotFoundError, match="Put the file there"):
        loaders.load_gsm8k(str(tmp_path / "gsm8k" / "test.jsonl"))
    with pytest.raises(FileNotFoundError, match="no prepared TFDS dataset"):
        loaders.load_tfds("gsm8k", "test", str(tmp_path))


def test_grain_shards_are_disjoint_and_deterministic():
    records = [{"id": i} for i in range(23)]
    shards = [[r["id"] for batch in loaders.grain_dataset(records, 4, seed=7, process_index=p,
                                                          process_count=3) for r in batch]
              for p in range(3)]
    flat = sum(shards, [])
    assert sorted(flat) == list(range(23)) and len(set(flat)) == 23
    again = [r["id"] for b in loaders.grain_dataset(records, 4, seed=7, process_index=0, process_count=3)
             for r in b]
    assert again == shards[0] and shards[0] != sorted(shards[0])
    it = loaders.grain_iterator(records, 5, seed=1)
    next(it)
    state = it.get_state()
    second = next(it)
    it.set_state(state)
    assert next(it) == second


def test_data_envs_metrics_hymem_import_no_jax():
    code = ("import sys; import activemem_jax.data.synthetic_world, activemem_jax.data.retrieval, "
            "activemem_jax.data.loaders, activemem_jax.data.oracle, activemem_jax.data.retrieval_server, "
            "activemem_jax.envs, activemem_jax.metrics, hymem; "
            "bad = [m for m in sys.modules if m == 'jax' or m.startswith('jax.')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
