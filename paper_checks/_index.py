"""A static index of the registered claims and properties (``index.json`` beside this file).

``theorylab list`` reads it instead of importing every claim module (and with them JAX), so it
answers in a fraction of a second. Rebuild it after adding or changing a claim or a property::

    python -m paper_checks._index

``tests/paper_checks/test_index.py`` fails, naming this command, when the file and the live
registries differ.
"""

from __future__ import annotations

import json
from pathlib import Path

PATH = Path(__file__).with_name("index.json")
FIELDS = ("id", "kind", "mutants", "paper", "where", "statement")


def entries(registry, properties) -> list[dict]:
    """One row per claim, then per property, each sorted by id (a registry's own order depends
    on which module was imported first)."""
    rows = [
        dict(
            id=x.id,
            kind=kind,
            mutants=len(x.mutants),
            paper=x.paper,
            where=x.where,
            statement=x.statement,
        )
        for kind, pool in (("claim", registry), ("property", properties))
        for x in pool
    ]
    return sorted(rows, key=lambda r: (r["kind"] != "claim", r["id"]))


def load() -> list[dict]:
    """The rows written by :func:`write`."""
    return json.loads(PATH.read_text(encoding="utf-8"))


def write() -> None:
    """Rebuild ``index.json`` from the live registries (imports every claim module)."""
    from . import PROPERTIES, REGISTRY

    text = json.dumps(entries(REGISTRY, PROPERTIES), indent=1, ensure_ascii=False)
    PATH.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    write()
