"""Generate the offline Search-QA data: a corpus about fictional entities and questions answered by it.

    python -m seed_core.data_gen.generate search_qa --config params.yaml --out data/search_qa

World: ``num_people`` people, about a third as many cities, a quarter as many companies and a tenth
as many countries, all with made-up names (``names.NameMaker``). Facts come from fixed templates:
a person was born in a city in a year, has an occupation and works for a company (a founder works
for the company they founded); a company has an industry, a founding year, a founder and a
headquarters city; a city lies in a country and on a river; a country has a capital and an
independence year. One passage per entity (title = its name) states that entity's facts only.

Questions (``data_source`` = label): ``single_hop`` ask for a fact of the named entity (gold path =
its passage); ``multi_hop`` chain two facts through an unnamed bridge entity ("In which country
was X born?" = X's passage, then the passage of X's birth city). Every answer is stated in the
corpus. The questions are shuffled and the first ``num_test`` form the ``test`` split, the rest
``train``; both share one corpus, as Search-R1's splits share wiki-18.

Output: ``corpus.jsonl`` (Search-R1 corpus format), ``train.parquet``, ``test.parquet``
(``seed_core.data_gen.qa_files`` layout) and ``qa_report.json`` (counts per split and label).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from seed_core.data_gen.names import NameMaker
from seed_core.data_gen.qa_files import QAItem, write_split
from seed_core.retrieval.corpus import Passage, make_contents, write_corpus
from seed_core.runtime.io import write_json

OCCUPATIONS = ("architect", "botanist", "cartographer", "chemist", "composer", "engineer", "geologist",
               "historian", "journalist", "linguist", "painter", "physician", "poet", "sculptor", "violinist")
INDUSTRIES = ("shipbuilding", "software", "textiles", "mining", "publishing", "aviation", "pharmaceuticals",
              "brewing", "robotics", "glassmaking")
LANDMARKS = ("harbour", "old bridges", "spice market", "observatory", "clock tower", "botanical garden")


@dataclass(frozen=True)
class QAGenSpec:
    num_people: int = 60
    num_test: int = 64
    seed: int = 0


@dataclass(frozen=True)
class QADataset:
    passages: list[Passage]
    splits: dict[str, list[QAItem]] = field(default_factory=dict)


@dataclass
class _World:
    countries: dict[str, dict] = field(default_factory=dict)
    cities: dict[str, dict] = field(default_factory=dict)
    companies: dict[str, dict] = field(default_factory=dict)
    people: dict[str, dict] = field(default_factory=dict)


def _build_world(spec: QAGenSpec, rng: random.Random) -> _World:
    names, world = NameMaker(rng), _World()
    n_countries, n_cities = max(3, spec.num_people // 10), max(6, spec.num_people // 3)
    n_companies = max(4, spec.num_people // 4)
    countries = [names.word(2, suffix="ia") for _ in range(n_countries)]
    for i in range(n_cities):
        country = countries[i % n_countries] if i < n_countries else rng.choice(countries)
        world.cities[names.word(rng.choice((2, 3)))] = {
            "country": country, "year": rng.randint(1100, 1800), "river": names.word(2),
            "landmark": rng.choice(LANDMARKS)}
    cities = list(world.cities)
    for i, country in enumerate(countries):
        world.countries[country] = {"capital": cities[i], "year": rng.randint(1800, 1990)}
    people = [names.person() for _ in range(spec.num_people)]
    founders = people[:n_companies]
    for founder in founders:
        world.companies[f"{names.word(2)} {rng.choice(('Works', 'Industries', 'Labs', 'Company'))}"] = {
            "founder": founder, "industry": rng.choice(INDUSTRIES), "year": rng.randint(1850, 2000),
            "city": rng.choice(cities)}
    companies = list(world.companies)
    for i, person in enumerate(people):
        world.people[person] = {
            "city": rng.choice(cities), "year": rng.randint(1900, 1995), "occupation": rng.choice(OCCUPATIONS),
            "employer": companies[i] if i < n_companies else rng.choice(companies), "founder": i < n_companies}
    return world


def _article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _passages(world: _World) -> list[Passage]:
    texts: list[tuple[str, str]] = []
    for name, p in world.people.items():
        surname = name.split()[-1]
        work = (f"In {p['year'] + 30} {surname} founded {p['employer']}." if p["founder"]
                else f"{surname} works for {p['employer']}.")
        born = f"who was born in {p['city']} in {p['year']}"
        texts.append((name, f"{name} is {_article(p['occupation'])} {born}. {work}"))
    for name, c in world.companies.items():
        texts.append((name, f"{name} is {_article(c['industry'])} company headquartered in {c['city']}. "
                            f"It was founded in {c['year']} by {c['founder']}."))
    for name, c in world.cities.items():
        texts.append((name, f"{name} is a city in {c['country']}, founded in {c['year']}. It lies on the "
                            f"{c['river']} River and is known for its {c['landmark']}."))
    for name, k in world.countries.items():
        texts.append((name, f"{name} is a country whose capital is {k['capital']}. "
                            f"{name} became independent in {k['year']}."))
    return [Passage(id=str(i), contents=make_contents(title, text)) for i, (title, text) in enumerate(texts)]


def _questions(world: _World) -> list[tuple[str, tuple[str, ...], str, tuple[str, ...]]]:
    """(question, answers, label, gold_docs) for every template and entity."""
    out: list[tuple[str, tuple[str, ...], str, tuple[str, ...]]] = []

    def add(question: str, answer: str | tuple[str, ...], label: str, *docs: str) -> None:
        out.append((question, (answer,) if isinstance(answer, str) else answer, label, docs))

    for name, p in world.people.items():
        city, company = p["city"], p["employer"]
        add(f"In which city was {name} born?", city, "single_hop", name)
        add(f"In what year was {name} born?", str(p["year"]), "single_hop", name)
        add(f"What is the occupation of {name}?", p["occupation"], "single_hop", name)
        add(f"In which country was {name} born?", world.cities[city]["country"], "multi_hop", name, city)
        if not p["founder"]:
            add(f"Who founded the company that {name} works for?", world.companies[company]["founder"],
                "multi_hop", name, company)
    for name, c in world.companies.items():
        founder = world.people[c["founder"]]
        add(f"Who founded {name}?", c["founder"], "single_hop", name)
        add(f"In which city is {name} headquartered?", c["city"], "single_hop", name)
        add(f"In which city was the founder of {name} born?", founder["city"], "multi_hop", name, c["founder"])
        add(f"In what year was the founder of {name} born?", str(founder["year"]), "multi_hop", name, c["founder"])
        add(f"In which country is {name} headquartered?", world.cities[c["city"]]["country"], "multi_hop",
            name, c["city"])
    for name, c in world.cities.items():
        add(f"In which country is {name} located?", c["country"], "single_hop", name)
        add(f"On which river does {name} lie?", (f"{c['river']} River", c["river"]), "single_hop", name)
        add(f"What is the capital of the country where {name} is located?",
            world.countries[c["country"]]["capital"], "multi_hop", name, c["country"])
    for name, k in world.countries.items():
        add(f"What is the capital of {name}?", k["capital"], "single_hop", name)
        add(f"In what year did {name} become independent?", str(k["year"]), "single_hop", name)
    return out


def generate_qa(spec: QAGenSpec = QAGenSpec()) -> QADataset:
    """The whole data set, deterministic in ``spec`` (same spec -> identical corpus and splits)."""
    if spec.num_people < 10 or spec.num_test < 1:
        raise ValueError(f"Search-QA generator needs num_people >= 10 and num_test >= 1, got {spec}")
    rng = random.Random(f"search_qa:{spec.seed}")
    world = _build_world(spec, rng)
    rows = _questions(world)
    if spec.num_test >= len(rows):
        raise ValueError(f"num_test={spec.num_test} leaves no training questions out of {len(rows)}; "
                         "lower num_test or raise num_people")
    rng.shuffle(rows)
    items = [QAItem(id=f"gen_{i}", question=q, golden_answers=a, data_source=label, gold_docs=docs)
             for i, (q, a, label, docs) in enumerate(rows)]
    return QADataset(_passages(world), {"test": items[: spec.num_test], "train": items[spec.num_test:]})


def write_qa(dataset: QADataset, out_dir: str | Path) -> dict[str, float]:
    """Write the corpus and the splits into ``out_dir``; return the counts written."""
    out = Path(out_dir)
    write_corpus(dataset.passages, out / "corpus.jsonl")
    report: dict[str, float] = {"passages": float(len(dataset.passages))}
    for split, items in dataset.splits.items():
        write_split(items, out / f"{split}.parquet")
        report[f"{split}/questions"] = float(len(items))
        for label, count in Counter(i.data_source for i in items).items():
            report[f"{split}/{label}"] = float(count)
    write_json(out / "qa_report.json", report)
    return report
