"""The streaming BM25 index against the in-memory BM25Retriever on the same documents,
served with Search-R1's API, and the data errors it must name."""

import json

import numpy as np
import pytest

from activemem_jax.data import index as idx
from activemem_jax.data.retrieval import BM25Retriever, RemoteRetriever, load_corpus


def write(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, world):
    d = tmp_path_factory.mktemp("corpus")
    rows = [{"docid": x["docid"], "title": x["title"], "text": x["text"]} for x in world.documents[:1500]]
    rows[7] = {"id": "sr1-7", "contents": '"Search R1 Title"\nA Search-R1 style passage about Velmor.'}
    rows[8] = {"docid": "untitled-8", "text": "A passage with no title at all."}
    rows[9] = {"docid": "stopwords-9", "title": "", "text": "the of and"}  # nothing left after stopwords
    return write(d / "corpus.jsonl", rows)


@pytest.fixture(scope="module")
def built(corpus, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("index") / "ix")
    return idx.build(corpus, out, chunk=256, progress=False), out


def test_streamed_index_ranks_exactly_as_the_in_memory_one(built, corpus, world):
    stats, out = built
    assert stats["documents"] == 1500 and stats["untitled"] == 2
    ours, ref = idx.IndexRetriever(out), BM25Retriever(load_corpus(corpus))
    queries = [q["question"] for q in world.questions[:60]] + ["Search R1 Title Velmor", "zzzqqq unknownword"]
    got, want = ours.batch_search(queries, 5), ref.batch_search(queries, 5)
    for g, w in zip(got, want):
        assert [d["docid"] for d in g] == [d["docid"] for d in w]
        np.testing.assert_allclose([d["score"] for d in g], [d["score"] for d in w], rtol=1e-5)
        assert [d["text"] for d in g] == [d["text"] for d in w]
    assert ours.search("Search R1 Title Velmor", 1)[0]["title"] == "Search R1 Title"


def test_the_index_is_served_with_search_r1_api(built):
    from activemem_jax.data.retrieval_server import make_app
    from tests.serving import running

    _, out = built
    local = idx.IndexRetriever(out)
    with running(make_app(local)) as url:
        remote = RemoteRetriever(url + "/retrieve")
        hits = remote.batch_search(["Search R1 Title Velmor", "a passage with no title"], 3)
    assert [d["docid"] for d in hits[0]] == [d["docid"] for d in local.search("Search R1 Title Velmor", 3)]
    assert hits[1][0]["docid"] == "untitled-8"


def test_data_problems_name_the_file_and_line(tmp_path):
    bad = write(tmp_path / "bad.jsonl", [{"docid": "a", "title": "A", "text": "alpha"}, "{not json"])
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not JSON"):
        idx.build(bad, str(tmp_path / "o1"), progress=False)
    dup = write(tmp_path / "dup.jsonl", [{"docid": "a", "text": "alpha"}, {"docid": "b", "text": "beta"},
                                         {"docid": "a", "text": "again"}])
    with pytest.raises(ValueError, match=r"dup.jsonl:3: docid 'a' was already used at line 1"):
        idx.build(dup, str(tmp_path / "o2"), progress=False)
    notext = write(tmp_path / "notext.jsonl", [{"docid": "a", "title": "only a title"}])
    with pytest.raises(ValueError, match=r"notext.jsonl:1: a document needs 'text'"):
        idx.build(notext, str(tmp_path / "o3"), progress=False)
    with pytest.raises(FileNotFoundError, match="no index.json"):
        idx.IndexRetriever(str(tmp_path))


def test_an_index_refuses_another_stemming_setting_or_tokenizer(built, tmp_path):
    import shutil

    _, out = built
    with pytest.raises(ValueError, match="built with stem=True"):
        idx.IndexRetriever(out, stem=False)
    assert idx.IndexRetriever(out, stem=True).stem is True
    other = str(tmp_path / "other")
    shutil.copytree(out, other)
    meta = json.load(open(f"{other}/index.json"))
    json.dump({**meta, "bm25s": "0.1.0"}, open(f"{other}/index.json", "w"))
    with pytest.raises(ValueError, match="built with bm25s 0.1.0"):
        idx.IndexRetriever(other)


def test_dense_index_built_by_streaming_ranks_as_the_in_memory_dense_retriever(tmp_path):
    from activemem_jax.data.retrieval import DenseRetriever
    from tests.data.test_retrieval import DOCS, _minilm_dir

    corpus = write(tmp_path / "c.jsonl", DOCS)
    stats = idx.build(corpus, str(tmp_path / "ix"), chunk=2, progress=False, dense=_minilm_dir())
    assert stats["dense"]["dim"] == 384
    ours, ref = idx.IndexRetriever(str(tmp_path / "ix"), mode="dense"), DenseRetriever(DOCS, _minilm_dir())
    for q in ("machines that automate storage facilities", "watching stars in the sky", "fruit trees"):
        got, want = ours.search(q, 3), ref.search(q, 3)
        assert [d["docid"] for d in got] == [d["docid"] for d in want]
        np.testing.assert_allclose([d["score"] for d in got], [d["score"] for d in want], rtol=1e-4)
    with pytest.raises(ValueError, match="built without a dense index"):
        idx.IndexRetriever(_bm25_only(tmp_path), mode="dense")


def _bm25_only(tmp_path):
    corpus = write(tmp_path / "b.jsonl", [{"docid": "a", "text": "alpha"}])
    idx.build(corpus, str(tmp_path / "bm"), progress=False)
    return str(tmp_path / "bm")
