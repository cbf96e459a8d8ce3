"""The bad-rows policy of the loaders (data/bad_rows.py): strict stops at the first bad
row; skip drops bad rows with one summary line per reason and merges exact duplicates;
a conflicting duplicate stops both. The fixture is the shape of the motivating file: a
multi-hop dev set converted to FlashRAG JSONL whose sub-questions are shared by two
questions (the same id and text twice) and one of whose gold answers is empty."""

import json
import logging
import subprocess
import sys

import ml_collections
import pytest

from activemem_jax.data import loaders
from activemem_jax.data.bad_rows import MERGED, RowSieve, check_policy
from activemem_jax.tasks import build_section, build_tasks

VELMOR = {"id": "2hop_1__sub1", "question": "Who founded Velmor?", "golden_answers": ["Ada Kest"]}
OSTRA = {"id": "2hop_1__sub2", "question": "Where was Ada Kest born?", "golden_answers": ["Ostra"],
         "metadata": {"parent": "2hop_1"}}
LENN = {"id": "2hop_2__sub2", "question": "What river crosses Ostra?", "golden_answers": "Lenn"}


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def multihop(tmp_path):
    """Line by line: 1 Velmor, 2 Ostra, 3 Velmor again (shared by a second question),
    4 an empty gold answer, 5 Ostra again under another parent (the same record once
    loaded), 6 blank, 7 a torn line, 8 Lenn, 9 and 10 Velmor again, 11 a row with no
    question field."""
    return write(tmp_path / "dev.jsonl", [
        VELMOR, OSTRA, VELMOR,
        {"id": "2hop_3__sub1", "question": "Who wrote the Velmor charter?", "golden_answers": [""]},
        {**OSTRA, "metadata": {"parent": "2hop_2"}}, "", '{"id": "2hop_4__sub1", "quest', LENN, VELMOR, VELMOR,
        {"id": "2hop_5__sub1", "golden_answers": ["x"]}])


def test_strict_stops_at_the_first_bad_row_and_says_what_to_do(multihop):
    with pytest.raises(ValueError, match=r"dev.jsonl: row 3 repeats id '2hop_1__sub1' of row 1; ids must be "
                                         r"unique\. The two rows are identical: set bad_rows='skip'"):
        loaders.load_flashrag(multihop)


def test_skip_keeps_the_good_rows_merges_exact_duplicates_and_summarizes_each_reason(multihop, caplog):
    with caplog.at_level(logging.WARNING, logger="activemem_jax.data.bad_rows"):
        rows = loaders.load_flashrag(multihop, bad_rows="skip")
    assert rows == [{"id": "2hop_1__sub1", "question": "Who founded Velmor?", "answers": ["Ada Kest"]},
                    {"id": "2hop_1__sub2", "question": "Where was Ada Kest born?", "answers": ["Ostra"]},
                    {"id": "2hop_2__sub2", "question": "What river crosses Ostra?", "answers": ["Lenn"]}]
    assert [r.getMessage() for r in caplog.records] == [
        f"{multihop}: merged 4 rows ({MERGED}): rows 3, 5, 9 and 1 more",
        f"{multihop}: skipped 1 row (no non-empty golden answer): row 4",
        f"{multihop}: skipped 1 row (not JSON): row 7",
        f"{multihop}: skipped 1 row (no 'question' field): row 11"]


def test_a_conflicting_duplicate_stops_both_policies_naming_the_rows_and_the_id(tmp_path):
    path = write(tmp_path / "conflict.jsonl", [
        VELMOR, OSTRA, VELMOR, {"id": "x", "question": "q", "golden_answers": [""]},
        {**VELMOR, "golden_answers": ["Ada Kest", "Kest"]}])
    for policy in ("strict", "skip"):
        with pytest.raises(ValueError) as e:
            loaders.load_flashrag(path, bad_rows=policy)
        want = 3 if policy == "strict" else 5  # strict already stops at the exact duplicate
        assert f"conflict.jsonl: row {want} repeats id '2hop_1__sub1' of row 1" in str(e.value)
    assert "with different content" in str(e.value) and "'Kest'" in str(e.value)
    assert "bad_rows='skip' merges only identical rows" in str(e.value)
    same_text = write(tmp_path / "same_text.jsonl", [VELMOR, {**VELMOR, "question": "Who founded Velmor ?"}])
    with pytest.raises(ValueError, match="row 2 repeats id '2hop_1__sub1' of row 1 with different content"):
        loaders.load_flashrag(same_text, bad_rows="skip")


def test_a_file_with_nothing_usable_is_an_error_and_a_wrong_policy_names_the_field(tmp_path):
    empty = write(tmp_path / "empty.jsonl", [{"id": "a", "question": "q", "golden_answers": []}, "[1, 2]"])
    with pytest.raises(ValueError, match=r"every row is bad, nothing to load: .*skipped 1 row \(no non-empty "
                                         r"golden answer\): row 1; .*skipped 1 row \(not a JSON object\): row 2"):
        loaders.load_flashrag(empty, bad_rows="skip")
    with pytest.raises(ValueError, match=r"bad_rows='lenient': use 'strict' .* or 'skip'"):
        loaders.load_flashrag(empty, bad_rows="lenient")
    with pytest.raises(ValueError, match=r"^data.bad_rows='Skip'"):
        check_policy("Skip", "data.bad_rows")


def test_the_other_loaders_take_the_policy(tmp_path, caplog):
    gsm = write(tmp_path / "gsm.jsonl", [{"question": "2 + 3?", "answer": "2 + 3 = 5\n#### 5"},
                                         {"question": "1 + 1?", "answer": "two"},
                                         {"question": "4 + 4?", "answer": "#### 8"}])
    with pytest.raises(ValueError, match=r"gsm.jsonl: row 2 answer has no '####' final answer"):
        loaders.load_gsm8k(gsm)
    with caplog.at_level(logging.WARNING, logger="activemem_jax.data.bad_rows"):
        rows = loaders.load_gsm8k(gsm, bad_rows="skip")
    assert [(r["id"], r["answer"]) for r in rows] == [("0", "5"), ("2", "8")]  # ids: the rows' positions
    math = write(tmp_path / "math.jsonl", [{"problem": "x+1=2?", "solution": "$\\boxed{1}$"},
                                           {"problem": "y?", "solution": "no box"}, {"solution": "\\boxed{3}"}])
    with pytest.raises(ValueError, match=r"math.jsonl: row 2 \(problem 1\) has no \\boxed\{\} answer"):
        loaders.load_math(math)
    assert [r["answer"] for r in loaders.load_math(math, bad_rows="skip")] == ["1"]
    queries = write(tmp_path / "queries.jsonl", [{"query_id": "1", "query": "q?", "answer": "a"},
                                                 {"query_id": "2", "query": "r?"}])
    with pytest.raises(KeyError, match=r"queries.jsonl: row 2 has no 'answer' field"):
        loaders.load_browsecomp_plus(queries)
    assert [q["id"] for q in loaders.load_browsecomp_plus(queries, bad_rows="skip")["queries"]] == ["1"]
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
        "skipped 1 row (no '####' final answer): row 2", "skipped 1 row (no \\boxed{} answer): row 2",
        "skipped 1 row (no 'problem' field): row 3", "skipped 1 row (no 'answer' field): row 2"]


def test_the_sieve_keeps_ids_unique_only_where_asked():
    sieve = RowSieve("f.jsonl", "skip")
    sieve.keep(1, {"id": "a", "x": 1}, unique_ids=False)
    sieve.keep(2, {"id": "a", "x": 2}, unique_ids=False)
    assert len(sieve.finish()) == 2 and sieve.summary() == []


# ----------------------------------------------------------------------------- configs and launchers
def qa_section(**kw):
    base = dict(name="single_qa", qa_files=(), index="", corpus="", retrieval_url="", seed=0, n_objectives=(1,),
                n_tasks=0, max_turns=4, retrieval_topk=2, format_reward=0.0)
    return ml_collections.ConfigDict({**base, **kw})


def test_the_data_section_carries_the_policy_to_the_tasks(multihop):
    with pytest.raises(ValueError, match="row 3 repeats id"):
        build_section(qa_section(qa_files=(multihop,)), None)  # a config without the field: strict
    skip = dict(name="multi_objective_qa", qa_files=(multihop,), bad_rows="skip", n_tasks=1)
    tasks, _, _ = build_section(qa_section(**skip, n_objectives=(3,)), None)  # three distinct questions
    assert sorted(tasks[0]["sources"]) == ["0:2hop_1__sub1", "0:2hop_1__sub2", "0:2hop_2__sub2"]
    with pytest.raises(ValueError, match="3 questions in the QA files; a 4-objective task needs 4"):
        build_section(qa_section(**skip, n_objectives=(4,)), None)  # and no more
    cfg = ml_collections.ConfigDict({"data": qa_section(qa_files=(multihop,), bad_rows="lenient")})
    with pytest.raises(ValueError, match=r"^data.bad_rows='lenient'"):
        build_tasks(cfg, None)
    from configs.activemem_base import base_config
    from configs.activemem_eval_qa import get_config as eval_qa
    from configs.agents_synthetic import get_config as agents

    assert base_config().data.bad_rows == eval_qa().data.bad_rows == agents().data.bad_rows == "strict"


def test_eval_agents_reads_gaia_under_the_policy_and_its_flag_reaches_the_loader(tmp_path):
    from configs.agents_synthetic import get_config

    gaia = tmp_path / "gaia"
    gaia.mkdir()
    write(gaia / "metadata.jsonl", [{"task_id": "t1", "Question": "How many?", "Final answer": "4"},
                                    {"task_id": "t2", "Final answer": "5"}])
    cfg = get_config()
    cfg.data.update(name="gaia", path=str(gaia), n_tasks=10)
    with pytest.raises(KeyError, match="row 2 has no 'Question' field"):
        build_section(cfg.data)
    cfg.data.bad_rows = "skip"
    assert [t["id"] for t in build_section(cfg.data).tasks] == ["t1"]
    run = subprocess.run([sys.executable, "-m", "launch.eval_agents", "--config", "configs/agents_synthetic.py",
                          "--config.data.name=gaia", f"--config.data.path={gaia}",
                          "--config.data.bad_rows=lenient", f"--config.out_dir={tmp_path / 'out'}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0 and "data.bad_rows='lenient'" in run.stderr
    assert not (tmp_path / "out").exists()  # stopped before anything ran


def test_a_corpus_with_bad_lines_is_refused_or_read_around_them(tmp_path, caplog):
    """Corpora (BM25 in memory, the index builder, the retrieval server, the hymem CLI)
    take the same policy: strict names the first bad line; skip drops them, one line per
    reason; a corpus with nothing readable is an error either way."""
    from activemem_jax.data import index
    from activemem_jax.data.retrieval import BM25Retriever, load_corpus

    corpus = write(tmp_path / "c.jsonl", [{"docid": "d1", "title": "Velmor", "text": "Velmor was founded in 1821."},
                                          "{not json", '["a", "list"]', {"docid": "d9", "title": "no text"},
                                          "{also not json", {"id": "d2", "contents": '"Ostra"\nOstra lies on the Lenn.'}])
    with pytest.raises(ValueError, match=r"c.jsonl:2: not JSON .*bad_rows='skip'"):
        load_corpus(corpus)
    with caplog.at_level(logging.WARNING):
        docs = load_corpus(corpus, "skip")
    assert [d["docid"] for d in docs] == ["d1", "d2"] and docs[1]["title"] == "Ostra"
    lines = [r.getMessage() for r in caplog.records if "c.jsonl" in r.getMessage()]
    assert sorted(lines) == sorted([f"{corpus}: skipped 2 rows (not JSON): rows 2, 5",
                                    f"{corpus}: skipped 1 row (not a JSON object): row 3",
                                    f"{corpus}: skipped 1 row (no text): row 4"])
    assert BM25Retriever(docs).search("Velmor founded", 1)[0]["docid"] == "d1"
    stats = index.build(corpus, str(tmp_path / "ix"), progress=False, bad_rows="skip")
    assert stats["documents"] == 2
    with pytest.raises(ValueError, match="every row is bad"):
        load_corpus(write(tmp_path / "bad.jsonl", ["{", "[]"]), "skip")
