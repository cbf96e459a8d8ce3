"""A deterministic synthetic multi-hop world: the embedded default benchmark.

Entities of five types (person, city, company, film, university) with attributes and
relations; one natural-language document per entity, with distractor sentences and
near-duplicate names. Questions: hop chains of 1-4 hops ("In which country is the
birth city of the founder of X located?") and BrowseComp-style constraint questions.
MEM1-style N-objective tasks join N questions with "; ".

    world = generate(seed=0, n_entities=2000)
    world.documents          # [{"docid", "title", "text"}]
    tasks = make_tasks(world, split="dev", n_objectives=4, n_tasks=100, seed=0)
    # task: {"id", "questions", "answers": [[gold, *aliases]], "hops": [[{...}], ...]}

    python -m activemem_jax.data.synthetic_world --out data/world --n-entities 2000
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import re
from typing import Optional

TYPES = ("person", "city", "company", "film", "university")
SPLITS = {"train": (0, 80), "dev": (80, 90), "test": (90, 100)}  # by question hash % 100

_SYL = ("ka", "ro", "vel", "tan", "mir", "los", "dra", "fen", "gal", "hor", "ist", "jun", "kel",
        "lum", "nor", "ost", "pra", "quel", "ras", "sol", "tur", "ul", "vik", "wen", "yar", "zem",
        "bar", "cor", "del", "eth", "fal", "gor", "han", "ivo", "jor", "kas", "lir", "mon", "nev")
_CITY_SUFFIX = ("holm", "ford", "vik", "bury", "stad", "mouth", "gate", "dale", "port", "field")
_COUNTRIES = ("Arvenia", "Belmora", "Castrelle", "Dunmark", "Elvaria", "Fenwick Isles", "Galdora",
              "Hestria", "Ithmar", "Jorvale", "Kestland", "Lunavia")
_OCCUPATIONS = ("architect", "chemist", "novelist", "economist", "sculptor", "engineer",
                "physician", "historian", "composer", "journalist", "astronomer", "lawyer")
_INDUSTRIES = ("shipping", "software", "textiles", "pharmaceuticals", "aerospace", "mining",
               "publishing", "robotics", "agriculture", "banking")
_COMPANY_SUFFIX = ("Systems", "Holdings", "Works", "Group", "Industries", "Labs", "Partners")
_GENRES = ("thriller", "comedy", "documentary", "drama", "western", "musical", "horror",
           "science fiction")
_FILM_ADJ = ("Silent", "Crimson", "Last", "Hidden", "Broken", "Golden", "Distant", "Frozen",
             "Burning", "Quiet", "Wandering", "Hollow")
_FILM_NOUN = ("Harbor", "Orchard", "Lantern", "Frontier", "Mirror", "Tide", "Citadel", "Meadow",
              "Signal", "Voyage", "Garden", "Ember")
_UNI = ("Institute of Technology", "University", "College", "Polytechnic")

# relation -> (source type, target type or None for a literal attribute)
RELATIONS = {
    "birth_city": ("person", "city"), "employer": ("person", "company"),
    "alma_mater": ("person", "university"), "birth_year": ("person", None),
    "occupation": ("person", None), "country": ("city", None), "population": ("city", None),
    "city_founded": ("city", None), "founder": ("company", "person"),
    "headquarters": ("company", "city"), "company_founded": ("company", None),
    "industry": ("company", None), "director": ("film", "person"), "studio": ("film", "company"),
    "release_year": ("film", None), "genre": ("film", None), "location": ("university", "city"),
    "university_founded": ("university", None),
}
# How each fact is written; group "v" is the value (oracle solvers parse with these).
FACT_SENTENCES = {
    "birth_city": "{n} was born in the city of {v}.",
    "birth_year": "{n} was born in the year {v}.",
    "occupation": "By profession, {n} works as a {v}.",
    "employer": "{n} works for {v}.",
    "alma_mater": "{n} studied at {v}.",
    "country": "{n} is a city in the country of {v}.",
    "population": "{n} has a population of {v}.",
    "city_founded": "{n} was founded in the year {v}.",
    "founder": "{n} was founded by {v}.",
    "headquarters": "{n} is headquartered in {v}.",
    "company_founded": "{n} was established in the year {v}.",
    "industry": "{n} operates in the {v} industry.",
    "director": "{n} was directed by {v}.",
    "studio": "{n} was produced by the studio {v}.",
    "release_year": "{n} was released in the year {v}.",
    "genre": "{n} is a {v} film.",
    "location": "{n} is located in {v}.",
    "university_founded": "{n} opened its doors in the year {v}.",
}
FACT_PATTERNS = {
    rel: re.compile(re.escape(t).replace(re.escape("{n}"), "(?P<n>.+?)").replace(re.escape("{v}"), "(?P<v>.+?)") + "$")
    for rel, t in FACT_SENTENCES.items()
}
# Question text: the final relation asks; inner relations are noun phrases.
_ASK = {
    "birth_city": "In which city was {x} born?", "birth_year": "In what year was {x} born?",
    "occupation": "What is the occupation of {x}?", "employer": "Which company does {x} work for?",
    "alma_mater": "Which university did {x} attend?", "country": "In which country is {x}?",
    "population": "What is the population of {x}?", "city_founded": "In what year was {x} founded?",
    "founder": "Who founded {x}?", "headquarters": "In which city is {x} headquartered?",
    "company_founded": "In what year was {x} established?",
    "industry": "In which industry does {x} operate?", "director": "Who directed {x}?",
    "studio": "Which studio produced {x}?", "release_year": "In what year was {x} released?",
    "genre": "What is the genre of {x}?", "location": "In which city is {x} located?",
    "university_founded": "In what year did {x} open?",
}
_PHRASE = {
    "birth_city": "the birth city of {x}", "employer": "the employer of {x}",
    "alma_mater": "the university attended by {x}", "founder": "the founder of {x}",
    "headquarters": "the headquarters city of {x}", "director": "the director of {x}",
    "studio": "the studio that produced {x}", "location": "the city where {x} is located",
}


@dataclasses.dataclass
class World:
    seed: int
    entities: list[dict]          # {"id", "type", "name", "facts": {relation: value}}
    documents: list[dict]         # {"docid", "title", "text"}
    questions: list[dict]         # the question pool (all splits)

    def entity(self, name: str) -> dict:
        return self._by_name[name]

    def __post_init__(self):
        self._by_name = {e["name"]: e for e in self.entities}


def _name(rng: random.Random, n_syl: int) -> str:
    return "".join(rng.choice(_SYL) for _ in range(n_syl)).capitalize()


def _unique(rng, make, taken: set) -> str:
    for _ in range(1000):
        name = make(rng)
        if name not in taken:
            taken.add(name)
            return name
    raise RuntimeError("name space exhausted; lower n_entities")


def _near_duplicate(rng: random.Random, name: str, taken: set) -> str:
    for _ in range(100):
        words = name.split()
        i = rng.randrange(len(words))
        w = words[i]
        j = rng.randrange(1, len(w)) if len(w) > 1 else 0
        w = w[:j] + rng.choice("aeiouy") + w[j + 1:] if rng.random() < 0.5 else w + rng.choice("aens")
        cand = " ".join(words[:i] + [w] + words[i + 1:])
        if cand not in taken:
            taken.add(cand)
            return cand
    return _unique(rng, lambda r: name + " " + _name(r, 1), taken)


def _make_names(rng: random.Random, etype: str, taken: set) -> str:
    makers = {
        "person": lambda r: f"{_name(r, 2)} {_name(r, 2 + r.randrange(2))}",
        "city": lambda r: _name(r, 1 + r.randrange(2)) + r.choice(_CITY_SUFFIX),
        "company": lambda r: f"{_name(r, 2)} {r.choice(_COMPANY_SUFFIX)}",
        "film": lambda r: f"The {r.choice(_FILM_ADJ)} {r.choice(_FILM_NOUN)} of {_name(r, 2)}",
        "university": lambda r: f"{_name(r, 2)} {r.choice(_UNI)}",
    }
    return _unique(rng, makers[etype], taken)


def generate(seed: int = 0, n_entities: int = 2000, near_duplicate_fraction: float = 0.1,
             distractors_per_doc: int = 2, questions_per_entity: int = 3) -> World:
    """Build the world: entities, documents and the question pool (deterministic)."""
    if n_entities < 50:
        raise ValueError(f"n_entities={n_entities}: use at least 50")
    rng = random.Random(seed)
    weights = {"person": 0.4, "city": 0.15, "company": 0.2, "film": 0.15, "university": 0.1}
    taken: set = set()
    entities = []
    for etype in TYPES:
        for _ in range(max(5, int(n_entities * weights[etype] * (1 - near_duplicate_fraction)))):
            entities.append({"type": etype, "name": _make_names(rng, etype, taken), "facts": {}})
    for original in rng.sample(entities, int(len(entities) * near_duplicate_fraction / (1 - near_duplicate_fraction))):
        entities.append({"type": original["type"], "facts": {},
                         "name": _near_duplicate(rng, original["name"], taken)})
    rng.shuffle(entities)
    for i, e in enumerate(entities):
        e["id"] = f"{e['type'][0]}{i:05d}"
    by_type = {t: [e for e in entities if e["type"] == t] for t in TYPES}
    for e in entities:
        for rel, (src, dst) in RELATIONS.items():
            if src != e["type"]:
                continue
            e["facts"][rel] = rng.choice(by_type[dst])["name"] if dst else _literal(rng, rel)
    documents = [_document(rng, e, entities, distractors_per_doc) for e in entities]
    world = World(seed=seed, entities=entities, documents=documents, questions=[])
    if questions_per_entity > 0:
        world.questions = _question_pool(world, random.Random(seed + 1), questions_per_entity)
    return world


def _literal(rng: random.Random, rel: str):
    if rel.endswith("year") or rel.endswith("founded"):
        return str(rng.randrange(1850, 2020))
    return {"occupation": lambda: rng.choice(_OCCUPATIONS),
            "country": lambda: rng.choice(_COUNTRIES),
            "population": lambda: str(rng.randrange(5, 900) * 1000 + rng.randrange(1000)),
            "industry": lambda: rng.choice(_INDUSTRIES),
            "genre": lambda: rng.choice(_GENRES)}[rel]()


_DISTRACTORS = (
    "Some sources confuse {n} with {o}, which is unrelated.",
    "A local newspaper once mentioned {n} alongside {o}.",
    "Visitors sometimes ask about {o} when they come across {n}.",
    "{n} should not be mistaken for {o}.",
)


def _document(rng: random.Random, e: dict, entities: list, n_distractors: int) -> dict:
    n = e["name"]
    facts = [FACT_SENTENCES[rel].format(n=n, v=v) for rel, v in e["facts"].items()]
    rng.shuffle(facts)
    for _ in range(n_distractors):
        other = rng.choice(entities)["name"]
        facts.insert(rng.randrange(len(facts) + 1), rng.choice(_DISTRACTORS).format(n=n, o=other))
    intro = f"{n} is a {e['type']}."
    return {"docid": e["id"], "title": n, "text": " ".join([intro] + facts)}


def _hash100(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % 100


def split_of(question: str) -> str:
    h = _hash100(question)
    return next(s for s, (lo, hi) in SPLITS.items() if lo <= h < hi)


def _chain_question(world: World, rng: random.Random, start: dict, n_hops: int) -> Optional[dict]:
    """Follow n_hops - 1 entity relations from `start`, then ask a final relation."""
    hops, cur = [], start
    for _ in range(n_hops - 1):
        rels = [r for r, (src, dst) in RELATIONS.items() if src == cur["type"] and dst]
        if not rels:  # cities only have literal facts: the chain ends here
            break
        rel = rng.choice(rels)
        value = cur["facts"][rel]
        hops.append({"entity": cur["name"], "docid": cur["id"], "relation": rel, "value": value})
        cur = world.entity(value)
    rel = rng.choice([r for r, (src, _) in RELATIONS.items() if src == cur["type"]])
    hops.append({"entity": cur["name"], "docid": cur["id"], "relation": rel,
                 "value": cur["facts"][rel]})
    phrase = start["name"]
    for hop in hops[:-1]:
        phrase = _PHRASE[hop["relation"]].format(x=phrase)
    question = _ASK[hops[-1]["relation"]].format(x=phrase)
    return {"question": question, "answers": [hops[-1]["value"]], "hops": hops,
            "kind": "chain", "n_hops": len(hops)}


_CONSTRAINT_TEXT = {
    "release_year": "was released in {v}", "genre": "is a {v} film", "birth_year": "was born in {v}",
    "occupation": "works as a {v} by profession", "industry": "operates in the {v} industry",
    "company_founded": "was established in {v}", "country": "lies in {v}",
    "city_founded": "was founded in {v}", "university_founded": "opened in {v}",
    "birth_city": "was born in {v}", "director": "was directed by {v}", "founder": "was founded by {v}",
    "headquarters": "is headquartered in {v}", "location": "is located in {v}",
    "studio": "was produced by {v}", "employer": "works for {v}", "alma_mater": "studied at {v}",
    "population": "has a population of {v}",
}


def _constraint_question(world: World, rng: random.Random, target: dict) -> Optional[dict]:
    """'Which film was released in 1987, is a thriller and was directed by X?' (unique)."""
    rels = [r for r in target["facts"]]
    rng.shuffle(rels)
    for k in (2, 3):
        chosen = rels[:k]
        matches = [e for e in world.entities if e["type"] == target["type"]
                   and all(e["facts"].get(r) == target["facts"][r] for r in chosen)]
        if len(matches) == 1:
            parts = [_CONSTRAINT_TEXT[r].format(v=target["facts"][r]) for r in chosen]
            text = f"Which {target['type']} " + ", ".join(parts[:-1]) + f" and {parts[-1]}?"
            hop = {"entity": target["name"], "docid": target["id"], "relation": None,
                   "value": target["name"]}
            return {"question": text, "answers": [target["name"]], "hops": [hop],
                    "kind": "constraint", "n_hops": 1}
    return None


def _question_pool(world: World, rng: random.Random, per_entity: int) -> list[dict]:
    pool, seen = [], set()
    for e in world.entities:
        for i in range(per_entity):
            q = (_constraint_question(world, rng, e) if i == per_entity - 1 and e["type"] != "city"
                 else _chain_question(world, rng, e, 1 + (i + rng.randrange(4)) % 4))
            if q is None or q["question"] in seen:
                continue
            seen.add(q["question"])
            q["split"] = split_of(q["question"])
            pool.append(q)
    return pool


def make_tasks(world: World, split: str = "dev", n_objectives: int = 1, n_tasks: int = 100,
               seed: int = 0, kinds: tuple = ("chain", "constraint")) -> list[dict]:
    """N-objective tasks from one split's questions (no question repeats within a task)."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r}; choose one of {list(SPLITS)}")
    if not 1 <= n_objectives <= 32:  # MEM1 goes to 16; the long-horizon cost study to 32
        raise ValueError(f"n_objectives={n_objectives}: use 1..32")
    pool = [q for q in world.questions if q["split"] == split and q["kind"] in kinds]
    if len(pool) < n_objectives:
        raise ValueError(f"split {split!r} has {len(pool)} questions; need {n_objectives}")
    rng = random.Random(f"{world.seed}-{split}-{n_objectives}-{seed}")
    tasks = []
    for i in range(n_tasks):
        qs = rng.sample(pool, n_objectives)
        tasks.append({"id": f"{split}-{n_objectives}obj-{seed}-{i:05d}",
                      "question": "; ".join(q["question"] for q in qs),
                      "questions": [q["question"] for q in qs],
                      "answers": [list(q["answers"]) for q in qs],
                      "hops": [q["hops"] for q in qs],
                      "n_hops": [q["n_hops"] for q in qs]})
    return tasks


def write_jsonl(path: str, rows) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write the synthetic world's corpus and tasks as JSONL.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-entities", type=int, default=2000)
    ap.add_argument("--n-tasks", type=int, default=200)
    ap.add_argument("--objectives", default="1,2,4,8,16")
    args = ap.parse_args(argv)
    world = generate(seed=args.seed, n_entities=args.n_entities)
    write_jsonl(os.path.join(args.out, "corpus.jsonl"), world.documents)
    for split in SPLITS:
        for n in (int(x) for x in args.objectives.split(",")):
            tasks = make_tasks(world, split, n, args.n_tasks, seed=args.seed)
            write_jsonl(os.path.join(args.out, f"{split}_{n}obj.jsonl"), tasks)
    print(f"wrote {len(world.documents)} documents and tasks to {args.out}")


if __name__ == "__main__":
    main()
