"""Write an offline environment's generated data to disk (what the env builds in memory when ``data_dir`` is
empty); outside ``data_gen/`` because it reads the config through the loader, which sits above the envs.

    python -m seed_core.data_gen.generate search_qa --config params.yaml --out data/search_qa
    python -m seed_core.data_gen.generate webshop --config params.yaml --out data/webshop
    python -m seed_core.data_gen.generate panels --config params.yaml --set env.name=sokoban   # data/panels/sokoban-test.json

``panels`` writes the fixed evaluation panels of the config's environment (``seed_core.data_gen.task_sets``; default
``--out`` is the project's committed ``data/panels``; ``--seed`` does not apply: a panel's order is fixed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from seed_core.config import SeedConfig
from seed_core.data_gen.qa_corpus import QAGenSpec, generate_qa, write_qa
from seed_core.data_gen.webshop_catalog import CatalogSpec, generate_catalog
from seed_core.loader import config_from_args, stage_parser
from seed_core.registry import Registry
from seed_core.data_gen.task_sets import PANELS_DIR, write_panels
from seed_core.webshop.catalog import write_catalog

GENERATORS: Registry[Callable[[SeedConfig, int, Path], Any]] = Registry("data generator")


@GENERATORS.register("search_qa")
def _search_qa(cfg: SeedConfig, seed: int, out: Path) -> Any:
    qa = cfg.env.search_qa
    return write_qa(generate_qa(QAGenSpec(num_people=qa.num_people, num_test=qa.num_test, seed=seed)), out)


@GENERATORS.register("webshop")
def _webshop(cfg: SeedConfig, seed: int, out: Path) -> Any:
    catalog = generate_catalog(CatalogSpec(num_products=cfg.env.webshop.num_products, seed=seed))
    write_catalog(catalog, out)
    return {"products": len(catalog.products), "goals": len(catalog.goals)}


@GENERATORS.register("panels")
def _panels(cfg: SeedConfig, seed: int, out: Path) -> Any:
    if seed:
        raise SystemExit("panels take no --seed: a panel's order is fixed (seed_core.data_gen.task_sets)")
    return write_panels(cfg, None if out == PANELS_DIR else out)


def main() -> None:
    parser = stage_parser("Generate an offline environment's data (Search-QA corpus and questions, WebShop "
                          "catalogue) or the fixed evaluation panels of the config's environment")
    parser.add_argument("env", choices=GENERATORS.names())
    parser.add_argument("--out", type=Path, default=None, help="default: data/<env>")
    parser.add_argument("--seed", type=int, default=0, help="world seed (0 = what the env builds in memory)")
    args = parser.parse_args()
    print(GENERATORS.get(args.env)(config_from_args(args), args.seed, args.out or Path("data") / args.env))


if __name__ == "__main__":
    main()
