"""ActiveMem's search agent (envs/search_agent.py): the search / open / answer parser, a
scripted episode over a tiny corpus, the tool-call cap, the family's scorer, the expert, and
the registry building it for browsecomp_plus and gaia."""

import json
import random
import re
import string

import ml_collections
import pytest

from activemem_jax.data.retrieval import BM25Retriever
from activemem_jax.envs import MultiObjectiveQAEnv, SearchAgentEnv, parse_action
from activemem_jax.envs.search_agent import TOOLS
from activemem_jax.tasks import answer_score, build_section, build_tasks
from activemem_jax.tasks.agents import gaia_score

FILLER = " ".join(f"word{k}" for k in range(200))
DOCS = [{"docid": "d1", "title": "Velmor", "text": f"Velmor is a harbour town on the Ostra coast. {FILLER}"},
        {"docid": "d2", "title": "Ada Kest", "text": "Ada Kest built the Velmor lighthouse, founded in 1821."},
        {"docid": "d3", "title": "Ostra", "text": "The Ostra is a river that meets the sea at Velmor."},
        {"docid": "d4", "title": "Brell", "text": "Brell is an inland village known for its mills."}]
QUESTION = "In which year was the lighthouse of the harbour town on the Ostra coast founded?"
TASK = {"id": "q1", "question": QUESTION, "answers": [["1821"]], "gold_docs": ["d2"], "evidence_docs": ["d1", "d2"]}


@pytest.fixture(scope="module")
def retriever():
    return BM25Retriever(DOCS)


class Counting:
    """A retriever that records the queries it was sent."""

    def __init__(self, inner):
        self.inner, self.queries = inner, []

    def batch_search(self, queries, k=3):
        self.queries += list(queries)
        return self.inner.batch_search(queries, k)


def env_of(retriever, **kw):
    return SearchAgentEnv(retriever, answer_score, DOCS, **kw)


def test_the_parser_reads_search_open_and_answer_and_refuses_the_rest():
    assert (parse_action("<think>s</think><search> Velmor </search>", TOOLS).kind,
            parse_action("<think>s</think><search> Velmor </search>", TOOLS).content) == ("search", "Velmor")
    opened = parse_action("<think>read it</think>\n<open> d2 </open>", TOOLS)
    assert (opened.kind, opened.content, opened.think) == ("open", "d2", "read it")
    assert parse_action("<answer>1821</answer>", TOOLS).kind == "answer"
    for bad in ["<search>a</search><open>d1</open>", "<open>d1</open><open>d2</open>", "<open> </open>",
                "<think>x<open>d1</open>", "<open>d1</open><information>x</information>", "open d1", ""]:
        assert parse_action(bad, TOOLS).kind == "invalid", bad
    assert parse_action("<open>d1</open>").kind == "invalid"  # the QA environment has no open
    pattern = SearchAgentEnv.action_pattern(120)
    for text in ["<think>a</think>\n<open>d1</open>", "<search>Velmor</search>", "<answer>1821</answer>"]:
        assert re.fullmatch(pattern, text) and parse_action(text, TOOLS).kind != "invalid", text
    assert not re.fullmatch(MultiObjectiveQAEnv.action_pattern(120), "<open>d1</open>")


def test_random_strings_never_raise(retriever):
    rng = random.Random(0)
    pieces = ["<think>", "</think>", "<search>", "</search>", "<open>", "</open>", "<answer>", "</answer>", "d1"]
    env = env_of(retriever, max_tool_calls=5, max_turns=40)
    env.reset([TASK] * 4)
    for _ in range(40):
        obs, rew, done, info = env.step(["".join(rng.choice(pieces) if rng.random() < 0.4 else
                                                 rng.choice(string.printable) for _ in range(rng.randrange(40)))
                                         for _ in range(4)])
        assert all(isinstance(o, str) for o in obs) and all(r in (0.0, 1.0) for r in rew)
        assert all(i["tool_calls"] <= 5 for i in info)


def test_a_scripted_episode_searches_opens_and_answers(retriever):
    env = env_of(retriever, max_turns=8, topk=2, open_chars=100, snippet_chars=40)
    (prompt,) = env.reset([TASK])
    assert QUESTION in prompt and "<open> docid </open>" in prompt and "at most 100 searches and opens" in prompt
    obs, rew, done, info = env.step(["<think>start</think><search>Velmor harbour town</search>"])
    assert obs[0].startswith("<information>Doc 1 [docid: d1] (Title: Velmor) Velmor is a harbour town")
    assert obs[0].count("[docid: ") == 2 and "word150" not in obs[0]  # snippets cut at 40 characters
    assert obs[0].endswith("You have 7 turns left. You have 99 tool calls left.") and done == [False]
    obs, _, _, _ = env.step(["<think>read</think><open>d1</open>"])
    assert "word5 " in obs[0] and "word20" not in obs[0] and "[cut at 100 of " in obs[0]
    obs, _, _, _ = env.step(["<open>d2</open>"])  # in the corpus, though no search returned it
    assert "founded in 1821" in obs[0]
    obs, _, _, _ = env.step(["<open>d9</open>"])
    assert "No document with docid 'd9'" in obs[0]
    obs, _, _, _ = env.step(["I know it"])
    assert obs[0].startswith(env.format_hint) and "<open> docid </open>" in obs[0]
    obs, rew, done, info = env.step(["<think>found</think><answer>1821</answer>"])
    assert rew == [1.0] and done == [True]
    assert {k: info[0][k] for k in ("searches", "opens", "unknown_opens", "tool_calls", "invalid", "capped",
                                    "turns", "per_question_em")} == {
        "searches": 1, "opens": 3, "unknown_opens": 1, "tool_calls": 4, "invalid": 1, "capped": False, "turns": 6,
        "per_question_em": [1.0]}


def test_open_without_a_corpus_reads_the_episodes_own_hits(retriever):
    env = SearchAgentEnv(retriever, answer_score, max_turns=5, topk=1)
    env.reset([TASK])
    env.step(["<search>Brell mills</search>"])
    obs, _, _, info = env.step(["<open>d4</open>"])
    assert "known for its mills" in obs[0] and info[0]["unknown_opens"] == 0
    obs, _, _, info = env.step(["<open>d2</open>"])  # in no hit of this episode
    assert "No document" in obs[0] and info[0]["unknown_opens"] == 1


def test_a_small_cap_ends_the_episode_unanswered_without_serving_the_call(retriever):
    counting = Counting(retriever)
    env = SearchAgentEnv(counting, answer_score, DOCS, max_turns=10, max_tool_calls=2)
    env.reset([TASK, TASK])
    env.step(["<search>Velmor</search>", "<search>Velmor</search>"])
    obs, _, done, _ = env.step(["<open>d1</open>", "<open>d2</open>"])
    assert done == [False, False] and all(o.endswith("No tool calls left: give your final answer inside "
                                                     "<answer> </answer>.") for o in obs)
    obs, rew, done, info = env.step(["<search>lighthouse</search>", "<answer>1821</answer>"])
    assert done == [True, True] and rew == [0.0, 1.0]
    assert info[0]["capped"] and info[0]["tool_calls"] == 2 and info[0]["answer"] is None
    assert not info[1]["capped"] and "lighthouse" not in counting.queries  # the call past the cap ran nothing


def test_the_paper_cap_of_100_tool_calls(retriever):
    env = env_of(retriever, max_turns=200)  # a long turn budget: the cap alone binds
    assert env_of(retriever).max_turns == 101  # by default, the cap plus a turn to answer
    env.reset([TASK, TASK])
    for turn in range(100):
        call = "<search>Velmor</search>" if turn % 2 else "<open>d3</open>"
        obs, _, done, info = env.step([call, call])
        assert done == [False, False], turn
    assert [i["tool_calls"] for i in info] == [100, 100] and "No tool calls left" in obs[0]
    obs, rew, done, info = env.step(["<open>d2</open>", "<answer>1821</answer>"])
    assert done == [True, True] and rew == [0.0, 1.0]
    assert [i["capped"] for i in info] == [True, False] and info[0]["opens"] == 50 and info[0]["turns"] == 101


def test_the_answer_is_scored_by_the_familys_scorer(retriever):
    gaia_task = {"id": "g1", "question": "How many?", "answers": [["17"]], "gold": "17"}
    for score, want in ((gaia_score, 1.0), (answer_score, 0.0)):  # GAIA reads 17.0 as the number 17
        env = SearchAgentEnv(retriever, score, DOCS, max_turns=3)
        env.reset([gaia_task])
        assert env.step(["<answer>17.0</answer>"])[1] == [want]
    env = SearchAgentEnv(retriever, gaia_score, DOCS, max_turns=3, format_reward=0.1)
    env.reset([gaia_task, gaia_task])
    _, rew, _, _ = env.step(["<answer>18</answer>", "<think>open<answer>17</answer>"])
    assert rew == [0.1, 0.0]  # a well-formed wrong answer; an unbalanced tag scores nothing


def test_the_expert_opens_the_gold_document_and_answers(retriever):
    env = env_of(retriever, max_turns=6)
    env.reset([TASK])
    replies, done, turn = [], [False], 0
    while not done[0]:
        replies.append(env.expert(0, turn))
        obs, rew, done, info = env.step([replies[-1]])
        turn += 1
    assert [parse_action(r, TOOLS).kind for r in replies] == ["search", "open", "answer"]
    assert f"<search>{QUESTION}</search>" in replies[0] and "<open>d2</open>" in replies[1]
    assert rew == [1.0] and info[0]["opens"] == 1
    env = env_of(retriever, max_turns=2)  # no room for the tool calls: it answers at once
    env.reset([TASK])
    assert "<answer>1821</answer>" in env.expert(0, 0)
    env.reset([{**TASK, "gold_docs": [], "evidence_docs": ["d7"]}])  # none in the corpus
    with pytest.raises(ValueError, match="no gold document in the corpus"):
        env.expert(0, 0)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _data(**fields):
    return ml_collections.ConfigDict({"data": {"n_tasks": 5, "max_turns": 10, "retrieval_topk": 2, **fields}})


def test_the_registry_builds_the_environment_for_browsecomp_plus(tmp_path):
    queries = _jsonl(tmp_path / "queries.jsonl", [
        {"query_id": "7", "query": QUESTION, "answer": "1821", "gold_docs": [{"docid": "d2"}],
         "evidence_docs": [{"docid": "d1"}, {"docid": "d2"}]}])
    corpus = _jsonl(tmp_path / "corpus.jsonl", DOCS)
    ts = build_tasks(_data(name="browsecomp_plus", queries=queries, corpus=corpus))
    env = ts.make_env()
    assert isinstance(env, SearchAgentEnv) and env.max_turns == 10 and ts.make_env(7).max_turns == 7
    assert ts.tasks[0]["gold_docs"] == ["d2"] and ts.tasks[0]["evidence_docs"] == ["d1", "d2"]
    env.reset(ts.tasks)
    for turn in range(3):
        _, rew, done, info = env.step([env.expert(0, turn)])
    assert done == [True] and rew == [1.0] and info[0]["tool_calls"] == 2
    with pytest.raises(ValueError, match="needs a search backend"):  # no corpus, no retrieval server
        build_tasks(_data(name="browsecomp_plus", queries=queries))


def test_the_registry_builds_the_environment_for_gaia_with_a_search_backend(tmp_path):
    (tmp_path / "t2.txt").write_text("attachment")
    _jsonl(tmp_path / "metadata.jsonl", [
        {"task_id": "t1", "Question": "How many moons?", "Level": 1, "Final answer": "17", "file_name": ""},
        {"task_id": "t2", "Question": "What does the file say?", "Level": 2, "Final answer": "x",
         "file_name": "t2.txt"}])
    url = "http://127.0.0.1:9"  # never contacted: the episode only answers
    ts = build_tasks(_data(name="gaia", path=str(tmp_path), retrieval_url=url, text_only="no_attachment"))
    env = ts.make_env()
    assert isinstance(env, SearchAgentEnv) and [t["id"] for t in ts.tasks] == ["t1"]
    env.reset(ts.tasks)
    assert env.step(["<answer>17.0</answer>"])[1] == [1.0]  # GAIA's scorer
    with pytest.raises(ValueError, match="no gold document"):
        env.expert(0, 0)
    with_files = build_section(_data(name="gaia", path=str(tmp_path), retrieval_url=url).data)
    with pytest.raises(ValueError, match="text_only='no_attachment'"):
        with_files.make_env().reset(with_files.tasks)
    with pytest.raises(ValueError, match="data.retrieval_url"):
        build_tasks(_data(name="gaia", path=str(tmp_path)))
