"""The closed-answer families (gpqa, aqua: multiple choice; fever: three labels with
retrieval) and the named TriviaQA / PopQA configs, from fixture files written here in each
dataset's published format."""

import csv
import json
import logging
import random

import ml_collections
import pytest

from activemem_jax.data.choice_loaders import fever_evidence_sets, load_aqua, load_fever, load_gpqa, shuffle_options
from activemem_jax.envs.choice import ChoiceEnv, choice_score, parse_choice
from activemem_jax.envs.fever import FeverEnv, fever_score, fever_summary, page_key, parse_label, predicted_pages
from activemem_jax.tasks import BUILDERS, build_section, build_tasks

# GPQA's CSV has many more columns than the loader reads; a few of them, to be ignored
GPQA_HEADER = ["Pre-Revision Question", "Pre-Revision Correct Answer", "Question", "Correct Answer",
               "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3", "Explanation", "Subdomain",
               "Record ID", "High-level domain"]
GPQA_ROWS = [
    {"Question": "Which particle mediates the electromagnetic force?", "Correct Answer": "The photon",
     "Incorrect Answer 1": "The gluon", "Incorrect Answer 2": "The W boson", "Incorrect Answer 3": "The Higgs boson",
     "Explanation": "Electromagnetism is a U(1) gauge theory;\nits gauge boson is the photon.",
     "Record ID": "recA1", "Subdomain": "Physics (general)", "High-level domain": "Physics"},
    {"Question": "What is the oxidation state of Mn in KMnO4?", "Correct Answer": "+7", "Incorrect Answer 1": "+2",
     "Incorrect Answer 2": "+4", "Incorrect Answer 3": "+6", "Explanation": "", "Record ID": "recB2",
     "Subdomain": "Inorganic Chemistry", "High-level domain": "Chemistry"},
    {"Question": "Which organelle holds its own circular genome?", "Correct Answer": "Mitochondrion",
     "Incorrect Answer 1": "Golgi apparatus", "Incorrect Answer 2": "Lysosome",
     "Incorrect Answer 3": "Peroxisome", "Explanation": "Mitochondria carry mtDNA.", "Record ID": "recC3",
     "Subdomain": "Molecular Biology", "High-level domain": "Biology"},
]
AQUA_ROWS = [
    {"question": "A car covers 43 km in 2 hours. What is its speed in km/h?",
     "options": ["A)21", "B)21.5", "C)22", "D)22.5", "E)23"], "rationale": "Speed = 43 / 2 = 21.5 km/h\nANSWER:B",
     "correct": "B"},
    {"question": "What is 15% of 60?", "options": ["A) 6", "B) 7.5", "C) 9", "D) 10", "E) 12"],
     "rationale": "0.15 * 60 = 9. Answer C.", "correct": "C"},
]
FEVER_ROWS = [
    {"id": 75397, "verifiable": "VERIFIABLE", "label": "SUPPORTS",
     "claim": "Nikolaj Coster-Waldau worked with the Fox Broadcasting Company.",
     "evidence": [[[92206, 104971, "Nikolaj_Coster-Waldau", 7], [92206, 104971, "Fox_Broadcasting_Company", 0]]]},
    {"id": 150448, "verifiable": "VERIFIABLE", "label": "REFUTES", "claim": "Savages was released in 1995.",
     "evidence": [[[174367, 187626, "Savages_-LRB-2012_film-RRB-", 3]],
                  [[174368, 187627, "Savages_-LRB-2012_film-RRB-", 3]],  # a second annotator, the same set
                  [[174369, 187628, "Oliver_Stone", 0], [174369, 187628, "Savages_-LRB-2012_film-RRB-", 0]]]},
    {"id": 214861, "verifiable": "NOT VERIFIABLE", "label": "NOT ENOUGH INFO",
     "claim": "Ostra has a famous lighthouse.", "evidence": [[[174271, None, None, None]]]},
]
FEVER_DOCS = [
    {"docid": "Nikolaj_Coster-Waldau", "title": "Nikolaj Coster-Waldau",
     "text": "Nikolaj Coster-Waldau is a Danish actor. He appeared in the Fox Broadcasting Company series "
             "New Amsterdam."},
    {"docid": "Fox_Broadcasting_Company", "title": "Fox Broadcasting Company",
     "text": "The Fox Broadcasting Company is an American television network."},
    {"docid": "Savages_(2012_film)", "title": "Savages (2012 film)",
     "text": "Savages is a 2012 crime thriller film directed by Oliver Stone."},
    {"docid": "Oliver_Stone", "title": "Oliver Stone", "text": "Oliver Stone is an American film director."},
]


def jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def gpqa_csv(path, rows, header=GPQA_HEADER):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


@pytest.fixture
def files(tmp_path):
    return {"gpqa": gpqa_csv(tmp_path / "gpqa_diamond.csv", GPQA_ROWS),
            "gpqa_jsonl": jsonl(tmp_path / "gpqa_main.jsonl", GPQA_ROWS),
            "aqua": jsonl(tmp_path / "aqua_test.json", AQUA_ROWS),
            "fever": jsonl(tmp_path / "shared_task_dev.jsonl", FEVER_ROWS),
            "corpus": jsonl(tmp_path / "wiki_pages.jsonl", FEVER_DOCS)}


def section(**kw):
    return ml_collections.ConfigDict({"n_tasks": 0, "max_turns": 4, "retrieval_topk": 2, **kw})


# ----------------------------------------------------------------------------- loaders
def test_gpqa_reads_the_published_csv_and_the_same_columns_as_jsonl(files):
    items = load_gpqa(files["gpqa"], seed=0)
    assert [t["id"] for t in items] == ["recA1", "recB2", "recC3"]
    for item, row in zip(items, GPQA_ROWS):
        assert item["question"] == row["Question"]
        assert sorted(item["options"]) == sorted(row[k] for k in ("Correct Answer", "Incorrect Answer 1",
                                                                   "Incorrect Answer 2", "Incorrect Answer 3"))
        assert item["options"]["ABCD".index(item["gold"])] == row["Correct Answer"]  # the gold follows the answer
    assert items[0]["explanation"] == "Electromagnetism is a U(1) gauge theory;\nits gauge boson is the photon."
    assert items[1]["explanation"] == ""
    assert load_gpqa(files["gpqa_jsonl"], seed=0) == items


def test_gpqa_shuffle_is_deterministic_per_seed_and_differs_across_seeds(files):
    first, again = load_gpqa(files["gpqa"], seed=3), load_gpqa(files["gpqa"], seed=3)
    assert first == again
    orders = {s: [tuple(t["options"]) for t in load_gpqa(files["gpqa"], seed=s)] for s in range(4)}
    assert len(set(map(tuple, orders.values()))) > 1  # another seed, another order
    # the rule, spelled out: random.Random("<seed>:<record id>") deals [correct, incorrect 1-3]
    order = list(range(4))
    random.Random("3:recA1").shuffle(order)
    row = GPQA_ROWS[0]
    dealt = [[row["Correct Answer"], row["Incorrect Answer 1"], row["Incorrect Answer 2"],
              row["Incorrect Answer 3"]][k] for k in order]
    assert first[0]["options"] == dealt and first[0]["gold"] == "ABCD"[order.index(0)]
    assert shuffle_options("right", ["w1", "w2", "w3"], 3, "recA1") == (
        [["right", "w1", "w2", "w3"][k] for k in order], "ABCD"[order.index(0)])
    golds = {load_gpqa(files["gpqa"], seed=s)[0]["gold"] for s in range(12)}
    assert len(golds) > 1  # the correct answer is not always in one place


def test_aqua_reads_the_published_jsonl_in_its_order(files):
    items = load_aqua(files["aqua"])
    assert items[0] == {"id": "0", "question": AQUA_ROWS[0]["question"], "options": ["21", "21.5", "22", "22.5", "23"],
                        "gold": "B", "rationale": "Speed = 43 / 2 = 21.5 km/h\nANSWER:B"}
    assert items[1]["options"] == ["6", "7.5", "9", "10", "12"] and items[1]["gold"] == "C"  # "A) 6": a space


def test_fever_reads_the_published_jsonl_with_its_evidence_sets(files):
    items = load_fever(files["fever"])
    assert [(t["id"], t["label"]) for t in items] == [("75397", "SUPPORTS"), ("150448", "REFUTES"),
                                                      ("214861", "NOT ENOUGH INFO")]
    assert items[0]["evidence"] == [[["Fox_Broadcasting_Company", 0], ["Nikolaj_Coster-Waldau", 7]]]
    assert items[1]["evidence"] == [[["Savages_-LRB-2012_film-RRB-", 3]],  # the repeated set once, in file order
                                    [["Oliver_Stone", 0], ["Savages_-LRB-2012_film-RRB-", 0]]]
    assert items[2]["evidence"] == [] and fever_evidence_sets([[[174271, None, None, None]]]) == []


# ----------------------------------------------------------------------------- bad input
def test_bad_rows_name_the_file_and_the_row_or_the_column(files, tmp_path, caplog):
    bad = jsonl(tmp_path / "aqua_bad.json", [AQUA_ROWS[0], {**AQUA_ROWS[1], "correct": "F"}])
    with pytest.raises(ValueError, match=r"aqua_bad.json: row 2 has correct='F', not one of its options' "
                                         r"letters A, B, C, D, E"):
        load_aqua(bad)
    with caplog.at_level(logging.WARNING):
        assert [t["id"] for t in load_aqua(bad, bad_rows="skip")] == ["0"]
    assert "skipped 1 row (gold letter outside the options): row 2" in caplog.text
    unlettered = jsonl(tmp_path / "aqua_unlettered.json", [{**AQUA_ROWS[0], "options": ["A)21", "C)22"]}])
    with pytest.raises(ValueError, match=r"aqua_unlettered.json: row 1 has options \['A\)21', 'C\)22'\]"):
        load_aqua(unlettered)
    no_col = gpqa_csv(tmp_path / "gpqa_cut.csv", GPQA_ROWS, [h for h in GPQA_HEADER if h != "Incorrect Answer 2"])
    with pytest.raises(KeyError, match=r"gpqa_cut.csv: no 'Incorrect Answer 2' column"):
        load_gpqa(no_col, bad_rows="skip")  # a column, not a row: no policy reads around it
    cut = {k: v for k, v in GPQA_ROWS[1].items() if k != "Incorrect Answer 3"}
    with pytest.raises(KeyError, match=r"gpqa_rows.jsonl: row 2 has no 'Incorrect Answer 3' field"):
        load_gpqa(jsonl(tmp_path / "gpqa_rows.jsonl", [GPQA_ROWS[0], cut]))
    empty = gpqa_csv(tmp_path / "gpqa_empty.csv", [GPQA_ROWS[0], {**GPQA_ROWS[2], "Correct Answer": " "}])
    with pytest.raises(ValueError, match=r"gpqa_empty.csv: row 2 has an empty 'Correct Answer'"):
        load_gpqa(empty)
    assert [t["id"] for t in load_gpqa(empty, bad_rows="skip")] == ["recA1"]
    label = jsonl(tmp_path / "fever_bad.jsonl", [FEVER_ROWS[0], {**FEVER_ROWS[1], "label": "REFUTED"}])
    with pytest.raises(ValueError, match=r"fever_bad.jsonl: row 2 has label 'REFUTED'; FEVER's labels are "
                                         r"SUPPORTS, REFUTES, NOT ENOUGH INFO"):
        load_fever(label)
    with pytest.raises(ValueError, match="gold 'E' is not the letter of one of its 4 options"):
        ChoiceEnv().reset([{"id": "x", "question": "q", "options": ["a", "b", "c", "d"], "gold": "E"}])


# ----------------------------------------------------------------------------- the letter
@pytest.mark.parametrize("reply, expected", [
    ("Answer: B", "B"),
    ("The speed is 21.5 km/h.\nAnswer: B", "B"),
    ("The answer is (C).", "C"),
    ("The answer is: C", "C"),
    ("so the result is \\boxed{D}", "D"),
    ("**Answer:** A", "A"),
    ("Answer: B) 21.5", "B"),                            # the option's label, then its text
    ("Let me think.\n(D)\n", "D"),                       # a lone letter line
    ("Answer: A\nOn reflection, answer: C", "C"),        # the last mark
    ("Answer: F", None),                                 # no option F among four
    ("The answer is B.\nAnswer: F", "B"),                # F does not count; B does
    ("Answer: A or B", None),                            # two letters: none
    ("Answer: A, B", None),
    ("\\boxed{AB}", None),
    ("The answer is a rational number.", None),          # the article, not a letter
    ("The answer is A rational number.", None),          # a word follows the letter
    ("I am not sure.", None),
])
def test_the_letter_parser(reply, expected):
    assert parse_choice(reply, 4) == expected


def test_the_choice_env_prompts_scores_and_gives_the_expert_text(files):
    tasks = [{**t, "answers": [[t["gold"]]]} for t in load_aqua(files["aqua"])]
    env = ChoiceEnv()
    prompts = env.reset(tasks)
    assert "A) 21\nB) 21.5\nC) 22\nD) 22.5\nE) 23" in prompts[0] and '"Answer: X"' in prompts[0]
    assert AQUA_ROWS[0]["question"] in prompts[0]
    obs, rewards, dones, infos = env.step(["Answer: B", "Answer: E"])
    assert rewards == [1.0, 0.0] and dones == [True, True] and obs == ["", ""]
    assert [(i["answer"], i["gold"], i["reward"]) for i in infos] == [("B", "B", 1.0), ("E", "C", 0.0)]
    assert sum(rewards) / len(rewards) == 0.5  # accuracy: the mean reward
    assert env.expert(0, 0) == "Speed = 43 / 2 = 21.5 km/h\nANSWER:B\n\nAnswer: B"
    env.reset(tasks)
    assert env.step([env.expert(0, 0), env.expert(1, 0)])[1] == [1.0, 1.0]  # the expert's text parses to gold
    gpqa = load_gpqa(files["gpqa"], seed=0)
    env.reset(gpqa)
    g0, g1 = gpqa[0]["gold"], gpqa[1]["gold"]
    assert env.expert(0, 0) == f"{GPQA_ROWS[0]['Explanation']}\n\nAnswer: {g0}"
    assert env.expert(1, 0) == f"Answer: {g1}"  # no explanation: the answer alone
    env.abort(2)
    assert env.step([env.expert(0, 0), env.expert(1, 0), env.expert(2, 0)])[1] == [1.0, 1.0, 0.0]  # aborted: 0
    assert choice_score(gpqa[0], f"Answer: {g0}") == 1.0 and choice_score(gpqa[0], "no idea") == 0.0


# ----------------------------------------------------------------------------- FEVER
@pytest.mark.parametrize("answer, label", [
    ("SUPPORTS", "SUPPORTS"), ("supports", "SUPPORTS"), ("Supported.", "SUPPORTS"), ("REFUTES", "REFUTES"),
    ("refuted", "REFUTES"), ("NOT ENOUGH INFO", "NOT ENOUGH INFO"), ("Not enough info", "NOT ENOUGH INFO"),
    ("not  enough information", "NOT ENOUGH INFO"), ("NEI", "NOT ENOUGH INFO"),
    ("not supported", None), ("SUPPORTS; REFUTES", None), ("true", None), ("", None)])
def test_fever_label_parsing(answer, label):
    assert parse_label(answer) == label


def test_the_fever_score_on_a_hand_computed_case():
    savages = [[["Oliver_Stone", 0], ["Savages_-LRB-2012_film-RRB-", 0]], [["Savages_-LRB-2012_film-RRB-", 3]]]
    fox = [[["Fox_Broadcasting_Company", 0], ["Nikolaj_Coster-Waldau", 7]]]
    assert page_key("Savages_-LRB-2012_film-RRB-") == page_key("Savages (2012 film)") == "savages (2012 film)"
    # REFUTES: the second gold set needs only the Savages page, found in the third document
    pages = predicted_pages([{"title": "Oliver Stone"}, {"title": "Blake Lively"}, {"title": "Savages (2012 film)"}])
    assert pages == ["oliver stone", "blake lively", "savages (2012 film)"]
    assert fever_score("REFUTES", "REFUTES", pages, savages) == 1.0
    assert fever_score("SUPPORTS", "REFUTES", pages, savages) == 0.0            # the label is wrong
    assert fever_score("REFUTES", "REFUTES", ["oliver stone"], savages) == 0.0  # no gold set complete
    # SUPPORTS whose one set spans two pages: both must be among the predicted pages
    assert fever_score("SUPPORTS", "SUPPORTS", ["nikolaj coster-waldau"], fox) == 0.0
    assert fever_score("SUPPORTS", "SUPPORTS", ["fox broadcasting company", "nikolaj coster-waldau"], fox) == 1.0
    assert fever_score("NOT ENOUGH INFO", "NOT ENOUGH INFO", [], []) == 1.0     # the label alone
    assert fever_score("SUPPORTS", "NOT ENOUGH INFO", [], []) == 0.0
    assert fever_score("SUPPORTS", "SUPPORTS", [], []) is None                  # no evidence ids: no score
    # predicted evidence is the first 5 distinct pages: a sixth does not count
    many = [{"title": f"Page {k}"} for k in range(5)] + [{"docid": "Savages_(2012_film)", "title": ""}]
    assert fever_score("REFUTES", "REFUTES", predicted_pages(many), savages) == 0.0
    assert fever_score("REFUTES", "REFUTES", predicted_pages(many, limit=6), savages) == 1.0
    infos = [{"label": "REFUTES", "gold_label": "REFUTES", "fever_score": 1.0},
             {"label": "REFUTES", "gold_label": "SUPPORTS", "fever_score": 0.0},
             {"label": "SUPPORTS", "gold_label": "SUPPORTS", "fever_score": None}]
    assert fever_summary(infos) == {"episodes": 3, "label_accuracy": 2 / 3, "fever_score": 0.5, "fever_scored": 2}


def test_fever_family_searches_answers_a_label_and_scores_evidence(files):
    ts = build_section(section(name="fever", path=files["fever"], corpus=files["corpus"]))
    assert [t["answers"] for t in ts.tasks] == [[["SUPPORTS"]], [["REFUTES"]], [["NOT ENOUGH INFO"]]]
    assert ts.tasks[0]["question"] == FEVER_ROWS[0]["claim"]
    env = ts.make_env()
    prompts = env.reset(ts.tasks)
    assert isinstance(env, FeverEnv) and FEVER_ROWS[1]["claim"] in prompts[1] and "NOT ENOUGH INFO" in prompts[1]
    obs, rewards, dones, _ = env.step(["<think>look</think><search>Savages 2012 film</search>",
                                       "<think>look</think><search>Savages 2012 film</search>",
                                       "<think>no idea</think><answer>Not enough info</answer>"])
    assert "Oliver Stone" in obs[1] and dones == [False, False, True] and rewards == [0.0, 0.0, 1.0]
    _, rewards, dones, infos = env.step(["<think>it is</think><answer>supported</answer>",
                                         "<think>2012, not 1995</think><answer>Refuted</answer>", ""])
    assert rewards == [1.0, 1.0, 0.0] and all(dones)   # label accuracy
    assert infos[1]["pages"][0] == "savages (2012 film)" and infos[1]["fever_score"] == 1.0
    assert infos[0]["fever_score"] == 0.0              # the right label, not the Coster-Waldau / Fox pages
    assert infos[2]["fever_score"] == 1.0 and infos[1]["answer"] == "REFUTES"
    # the expert searches the first gold set's pages, then gives the label: full FEVER score
    env = ts.make_env(4)
    env.reset(ts.tasks[:1])
    replies = [env.expert(0, turn) for turn in range(3)]
    assert "<search>nikolaj coster-waldau</search>" in replies[1] and "<answer>SUPPORTS</answer>" in replies[2]
    for reply in replies:
        _, rewards, _, infos = env.step([reply])
    assert rewards == [1.0] and infos[0]["fever_score"] == 1.0
    assert ts.score(ts.tasks[1], "refuted") == 1.0 and ts.score(ts.tasks[1], "SUPPORTS") == 0.0


def test_the_choice_families_are_registered_and_build_from_data_path(files):
    assert {"gpqa", "aqua", "fever"} <= set(BUILDERS)
    gpqa = build_section(section(name="gpqa", path=files["gpqa"], choice_seed=5))
    assert gpqa.tasks == [{**t, "questions": [t["question"]], "answers": [[t["gold"]]]}
                          for t in load_gpqa(files["gpqa"], seed=5)]
    assert gpqa.search is None and gpqa.by_group() == {1: gpqa.tasks}
    env = gpqa.make_env()
    env.reset(gpqa.tasks)
    assert env.step([f"Answer: {t['gold']}" for t in gpqa.tasks])[1] == [1.0, 1.0, 1.0]
    aqua = build_section(section(name="aqua", path=files["aqua"], n_tasks=1))
    assert len(aqua.tasks) == 1 and aqua.tasks[0]["answers"] == [["B"]]
    assert aqua.score(aqua.tasks[0], "so \\boxed{B}") == 1.0
    with pytest.raises(FileNotFoundError, match=r"data.path='/nowhere/gpqa_main.csv'"):
        build_section(section(name="gpqa", path="/nowhere/gpqa_main.csv"))


# ----------------------------------------------------------------------------- named configs
def test_the_triviaqa_and_popqa_configs_load_and_build_their_tasks(tmp_path):
    from activemem_jax import schema
    from activemem_jax.config_files import load_config
    from configs.activemem_popqa_cpu import get_config as popqa
    from configs.activemem_triviaqa_cpu import get_config as triviaqa

    rows = [{"id": f"t{k}", "question": f"Who wrote book {k}?", "golden_answers": [f"Author {k}"]} for k in range(3)]
    train, dev, pop = (jsonl(tmp_path / f"{n}.jsonl", rows) for n in ("train", "dev", "popqa_test"))
    cfg = triviaqa()
    assert (cfg.data.name, tuple(cfg.data.qa_files), tuple(cfg.eval.qa_files)) == \
        ("single_qa", ("data/flashrag/triviaqa/train.jsonl",), ("data/flashrag/triviaqa/dev.jsonl",))
    run = schema.load(load_config("configs/activemem_triviaqa_cpu.py",
                                  [f"data.qa_files=('{train}',)", f"eval.qa_files=('{dev}',)"]))
    assert run.train.seeds == (0,) and run.model.path == "embedded"
    cfg.data.qa_files, cfg.eval.qa_files = (train,), (dev,)
    ts = build_tasks(cfg)
    gold = {r["question"]: [r["golden_answers"]] for r in rows}
    assert len(ts.tasks) == 3 and all(t["answers"] == gold[t["question"]] for t in ts.tasks)
    env = ts.make_env()
    env.reset(ts.tasks[:1])
    assert env.step([env.expert(0, 0)])[2] == [False]  # a search first (closed-book: nothing found)
    ev = popqa()
    assert ev.checkpoint == f"{cfg.out_dir}/checkpoints"  # the TriviaQA run's (one seed)
    assert ev.policy.to_dict() == cfg.policy.to_dict() and ev.model.path == cfg.model.path
    assert tuple(ev.data.qa_files) == ("data/flashrag/popqa/test.jsonl",)
    with pytest.raises(schema.ConfigError, match="checkpoint='runs/activemem_triviaqa_cpu/checkpoints': no such"):
        schema.load_eval(ev)  # before the training run there is nothing to evaluate
    (tmp_path / "checkpoints").mkdir()
    ev.checkpoint, ev.data.qa_files = str(tmp_path / "checkpoints"), (pop,)
    evrun = schema.load_eval(ev)
    assert evrun.data.name == "single_qa" and evrun.variants == ("activemem", "plain", "truncate")
    assert len(build_section(ev.data).tasks) == 3


def test_the_rules_that_need_no_learning_by_hand(files):
    """chance, always-A and the majority letter on the AQuA fixture (golds B, C); the three
    constant labels' accuracy and FEVER score on the FEVER fixture (one of each label)."""
    from activemem_jax.envs.choice import choice_baselines
    from activemem_jax.envs.fever import fever_baselines

    aqua = build_section(section(name="aqua", path=files["aqua"]), None, "data")
    b = aqua.baselines(aqua.tasks)
    assert b["chance"] == pytest.approx(0.2) and b["first"] == 0.0
    assert b["majority_letter"] == "B" and b["majority"] == 0.5  # a tie goes to the earlier letter
    assert b["units"]["majority"] == {aqua.tasks[0]["id"]: 1.0, aqua.tasks[1]["id"]: 0.0}
    three = [{"id": i, "gold": g, "options": ["x"] * n} for i, (g, n) in enumerate((("A", 4), ("C", 4), ("C", 5)))]
    b = choice_baselines(three)
    assert b["chance"] == pytest.approx((0.25 + 0.25 + 0.2) / 3) and b["first"] == pytest.approx(1 / 3)
    assert b["majority_letter"] == "C" and b["majority"] == pytest.approx(2 / 3)

    fever = build_section(section(name="fever", path=files["fever"], corpus=files["corpus"]), None, "data")
    b = fever.baselines(fever.tasks)
    assert b["chance"] == pytest.approx(1 / 3) and b["nei"] == pytest.approx(1 / 3)
    assert b["majority_label"] == "SUPPORTS" and b["majority"] == pytest.approx(1 / 3)  # a three-way tie: LABELS order
    # FEVER score with no page retrieved: SUPPORTS gets the label of the SUPPORTS claim but not its pages
    assert b["majority_fever_score"] == 0.0 and b["nei_fever_score"] == pytest.approx(1 / 3)
    skewed = [{"id": i, "label": lab, "evidence": []} for i, lab in enumerate(("REFUTES", "REFUTES", "NOT ENOUGH INFO"))]
    b = fever_baselines(skewed)
    assert b["majority_label"] == "REFUTES" and b["majority"] == pytest.approx(2 / 3)
    assert b["majority_fever_score"] == 0.0 and b["nei_fever_score"] == 1.0  # REFUTES without gold sets: unscored
