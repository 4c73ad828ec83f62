"""Generate the WebShop catalogue (products) and shopping goals drawn from it.

    python -m seed_core.data_gen.generate webshop --config params.yaml --out data/webshop

Products: for each of WebShop's five categories (beauty, electronics, fashion, food, furniture) a few
product types, each with a ``›`` category path, head nouns, buying options (name -> values, e.g.
colour and size) and a price range. A product gets a made-up brand, 2-4 attributes from its
category's pool (stated in its bullet points), 2-4 values per option and a price ending in .99; its
title is ``Brand <one attribute> <Type>``.

Goals follow WebShop's ``get_synthetic_goals``: one goal per product with 1-3 of its attributes, one
value per option, and a price cap drawn like WebShop's (two of the next four multiples of 10 above
the price, keep the larger); instruction ``i am looking for <type>: <attrs>, with <name>: <value>, and
<name>: <value>, and price lower than <cap> dollars``. Goals are shuffled with a fixed seed; the
environment uses the first ``num_test_goals`` as ``test`` and the rest as ``train`` (verl-agent:
goals 0-499 validate, 500+ train).

Output: ``products.json``, ``goals.json`` (``seed_core.webshop.catalog`` layout).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from pathlib import Path

from seed_core.data_gen.names import NameMaker
from seed_core.webshop.catalog import Catalog, Goal, Product, write_catalog

COLORS = ("black", "white", "navy blue", "forest green", "burgundy", "light grey", "rose gold")
APPAREL_SIZES = ("small", "medium", "large", "x-large")
PACKS = ("pack of 6", "pack of 12", "pack of 24")
VOLUMES = ("2 ounce", "4 ounce", "8 ounce")


@dataclass(frozen=True)
class ProductType:
    name: str
    nouns: tuple[str, ...]
    path: str
    options: dict[str, tuple[str, ...]]
    price: tuple[float, float]


_T = ProductType
CATEGORIES: dict[str, tuple[tuple[str, ...], tuple[ProductType, ...]]] = {
    "beauty": (
        ("paraben free", "cruelty free", "long lasting", "natural ingredients", "sensitive skin", "travel size"),
        (_T("face moisturizer", ("face", "moisturizer"), "beauty & personal care › skin care › face", {
            "scent": ("lavender", "unscented", "citrus", "vanilla"), "size": VOLUMES}, (8, 45)),
         _T("shampoo", ("shampoo",), "beauty & personal care › hair care › shampoo", {
             "scent": ("coconut", "mint", "argan oil", "rosemary"), "size": VOLUMES}, (6, 30)),
         _T("lip balm", ("lip", "balm"), "beauty & personal care › skin care › lips", {
             "flavor": ("cherry", "honey", "peppermint", "strawberry")}, (3, 15)))),
    "electronics": (
        ("wireless", "noise cancelling", "fast charging", "water resistant", "long battery life", "high definition"),
        (_T("earbuds", ("earbuds",), "electronics › headphones › earbud headphones", {"color": COLORS}, (15, 90)),
         _T("bluetooth speaker", ("bluetooth", "speaker"), "electronics › audio › portable speakers",
            {"color": COLORS}, (20, 120)),
         _T("phone case", ("phone", "case"), "electronics › cell phones › cases", {
             "color": COLORS, "size": ("iphone 13", "iphone 14", "galaxy s22")}, (8, 35)))),
    "fashion": (
        ("machine wash", "slim fit", "moisture wicking", "button closure", "long sleeve", "quick drying"),
        (_T("crew neck shirt", ("crew", "neck", "shirt"), "clothing, shoes & jewelry › men › shirts",
            {"color": COLORS, "size": APPAREL_SIZES}, (10, 40)),
         _T("running shoes", ("shoes",), "clothing, shoes & jewelry › women › shoes › athletic",
            {"color": COLORS, "size": ("7", "8", "9", "10", "11")}, (30, 120)),
         _T("winter jacket", ("winter", "jacket"), "clothing, shoes & jewelry › women › coats & jackets",
            {"color": COLORS, "size": APPAREL_SIZES}, (40, 160)))),
    "food": (
        ("gluten free", "sugar free", "non gmo", "keto friendly", "low calorie", "high protein"),
        (_T("herbal tea", ("tea",), "grocery & gourmet food › beverages › tea", {
            "flavor": ("chamomile", "peppermint", "ginger", "hibiscus"), "size": PACKS}, (5, 25)),
         _T("protein bar", ("protein", "bar"), "grocery & gourmet food › snacks › bars", {
             "flavor": ("peanut butter", "chocolate chip", "almond", "blueberry"), "size": PACKS}, (10, 45)),
         _T("coffee beans", ("coffee", "beans"), "grocery & gourmet food › beverages › coffee", {
             "flavor": ("dark roast", "medium roast", "hazelnut", "vanilla"), "size": PACKS}, (9, 40)))),
    "furniture": (
        ("easy assemble", "space saving", "solid wood", "easy clean", "storage space", "mid century"),
        (_T("bookshelf", ("bookshelf",), "home & kitchen › furniture › bookcases", {
            "color": ("oak", "walnut", "white", "black")}, (40, 200)),
         _T("office chair", ("office", "chair"), "home & kitchen › furniture › home office chairs", {
             "color": ("black", "grey", "white", "blue")}, (60, 250)),
         _T("side table", ("table",), "home & kitchen › furniture › living room tables", {
             "color": ("oak", "walnut", "white", "black")}, (50, 220)))),
}
PRICE_STEPS = tuple(10.0 * i for i in range(1, 100))


@dataclass(frozen=True)
class CatalogSpec:
    num_products: int = 200
    seed: int = 0


def _asin(rng: random.Random) -> str:
    return "B0" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(8))


def _product(rng: random.Random, names: NameMaker, category: str, pool: tuple[str, ...], kind: ProductType) -> Product:
    brand = names.word(2)
    attributes = tuple(rng.sample(pool, rng.randint(2, 4)))
    options = {name: tuple(rng.sample(values, rng.randint(2, min(4, len(values)))))
               for name, values in kind.options.items()}
    headline = attributes[0].title()
    bullets = tuple(f"{a.capitalize()}: built to be {a} for everyday use." for a in attributes)
    return Product(
        asin=_asin(rng), category=category, query=kind.name, product_category=kind.path,
        title=f"{brand} {headline} {kind.name.title()}", title_nouns=(brand.lower(), *kind.nouns),
        attributes=attributes, bullet_points=bullets,
        description=f"The {brand} {kind.name} is {', '.join(attributes)}. Made by {brand}.",
        options=options, price=round(rng.uniform(*kind.price)) + 0.99)


def _goal(rng: random.Random, product: Product) -> Goal:
    attributes = tuple(rng.sample(product.attributes, rng.randint(1, min(3, len(product.attributes)))))
    chosen = {name: rng.choice(values) for name, values in sorted(product.options.items())}
    above = [p for p in PRICE_STEPS if p > product.price][:4]
    price_upper = max(rng.sample(above, 2))
    option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
    text = (f"i am looking for {product.query}: {' and '.join(attributes)}, with {option_text}, "
            f"and price lower than {price_upper:.2f} dollars")
    return Goal(asin=product.asin, category=product.category, query=product.query, name=product.title,
                name_nouns=product.title_nouns, product_category=product.product_category,
                instruction_text=text, attributes=attributes, goal_options=chosen, price_upper=price_upper)


def generate_catalog(spec: CatalogSpec = CatalogSpec()) -> Catalog:
    """``spec.num_products`` products spread evenly over the product types, one goal each; deterministic."""
    if spec.num_products < 5:
        raise ValueError(f"the WebShop catalogue needs num_products >= 5, got {spec.num_products}")
    rng = random.Random(f"webshop:{spec.seed}")
    names = NameMaker(rng)
    kinds = [(cat, pool, kind) for cat, (pool, types) in CATEGORIES.items() for kind in types]
    products = tuple(_product(rng, names, *kinds[i % len(kinds)]) for i in range(spec.num_products))
    goals = [_goal(rng, p) for p in products]
    random.Random(233).shuffle(goals)  # WebShop shuffles its goals with seed 233
    return Catalog(products, tuple(goals))
