"""WebShop data model: products and shopping goals, with the fields WebShop's reward reads.

Field names follow WebShop's ``items_*.json`` and ``goal.py``: a product has ``asin``, ``category``,
``query`` (the search that found it = its product type), ``product_category`` (``a › b › c``),
``title``, ``attributes``, ``bullet_points``, ``description``, ``options`` (name -> values) and
``price``; a goal has ``asin`` (the product it was drawn from), ``instruction_text``, ``attributes``,
``goal_options`` (name -> value), ``price_upper`` and the product's ``name``/``query``/``category``.

``title_nouns`` / ``name_nouns`` stand in for the spaCy part-of-speech pass of WebShop's type reward
(nouns and proper nouns of the title): the catalogue generator knows which title words are nouns
(the brand and the product type's head nouns), so no language model is needed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any



@dataclass(frozen=True)
class Product:
    asin: str
    category: str
    query: str
    product_category: str
    title: str
    title_nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    bullet_points: tuple[str, ...]
    description: str
    options: dict[str, tuple[str, ...]] = field(hash=False, compare=False)
    price: float = 0.0

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "Product":
        return cls(**{**row, "title_nouns": tuple(row["title_nouns"]), "attributes": tuple(row["attributes"]),
                      "bullet_points": tuple(row["bullet_points"]),
                      "options": {k: tuple(v) for k, v in row["options"].items()}})


@dataclass(frozen=True)
class Goal:
    asin: str
    category: str
    query: str
    name: str
    name_nouns: tuple[str, ...]
    product_category: str
    instruction_text: str
    attributes: tuple[str, ...]
    goal_options: dict[str, str] = field(hash=False, compare=False)
    price_upper: float = 1_000_000.0

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "Goal":
        """From seed's goals.json or a real WebShop goal dict (whose ``name_nouns`` are then the title words)."""
        options = row.get("goal_options") or {}
        if not isinstance(options, dict):  # human goals keep a plain list of option values
            options = {f"option {i + 1}": str(v) for i, v in enumerate(options)}
        nouns = row.get("name_nouns") or str(row.get("name", "")).lower().split()
        return cls(asin=str(row["asin"]), category=str(row.get("category", "")), query=str(row.get("query", "")),
                   name=str(row.get("name", "")), name_nouns=tuple(nouns),
                   product_category=str(row.get("product_category", "")),
                   instruction_text=str(row["instruction_text"]), attributes=tuple(row.get("attributes") or ()),
                   goal_options={str(k): str(v) for k, v in options.items()},
                   price_upper=float(row.get("price_upper", 1_000_000.0)))


@dataclass(frozen=True)
class Catalog:
    products: tuple[Product, ...]
    goals: tuple[Goal, ...]

    def product(self, asin: str) -> Product:
        for p in self.products:
            if p.asin == asin:
                return p
        raise KeyError(f"no product with asin {asin!r} in the catalogue")


def write_catalog(catalog: Catalog, out_dir: str | Path) -> None:
    from seed_core.runtime.io import write_json  # pyarrow-heavy module: import on write only

    out = Path(out_dir)
    write_json(out / "products.json", [asdict(p) for p in catalog.products])
    write_json(out / "goals.json", [asdict(g) for g in catalog.goals])


def read_catalog(data_dir: str | Path) -> Catalog:
    root = Path(data_dir)
    files = [root / "products.json", root / "goals.json"]
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"WebShop catalogue file {path} does not exist; generate it with "
                                    f"`python -m seed_core.data_gen.generate webshop --out {root}`")
    products = tuple(Product.from_dict(r) for r in json.loads(files[0].read_text()))
    goals = tuple(Goal.from_dict(r) for r in json.loads(files[1].read_text()))
    return Catalog(products, goals)
