"""Figure discovery: every public module of ``figures`` defines ``ID``, ``TITLE`` and
``make(scale, seed=0) -> matplotlib.figure.Figure`` (theory drawn beside simulation), with
``scale`` one of ``paper_checks.SCALES`` (sizes from the claim module's size table).

``ID`` follows the claim ids (``AREA.NAME``) so that ``--only GLOB`` selects claims and figures
alike.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from paper_checks import matches

__all__ = ["figure_modules", "save"]


def figure_modules(pattern: str | None = None, package: str = "figures") -> list[ModuleType]:
    """The figure modules whose ``ID`` matches the glob ``pattern`` (all when None).

    A module that fails to import is stood in for by one whose ``make`` raises that error, with
    the ``ID`` its file name gives (``area_name.py`` -> ``area.name``), so one broken figure is
    reported and the others still run.
    """
    pkg = importlib.import_module(package)
    mods = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        name = f"{package}.{info.name}"
        try:
            mod = importlib.import_module(name)
        except Exception as err:
            mod = _broken(name, info.name.replace("_", ".", 1), err)
        if matches(mod.ID, pattern):
            mods.append(mod)
    return mods


def _broken(name: str, fig_id: str, err: Exception) -> ModuleType:
    mod = ModuleType(name)
    mod.ID, mod.TITLE = fig_id, f"{name} (does not import)"

    def make(scale, seed=0):
        raise err

    mod.make = make
    return mod


def save(fig, out_dir, fig_id: str) -> list[str]:
    """Write ``fig`` as PNG and PDF (PDF without a creation date, so it is byte-stable)."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = fig_id.replace(".", "_")
    paths = [out / f"{stem}.png", out / f"{stem}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight", metadata={"CreationDate": None})
    plt.close(fig)
    return [str(p) for p in paths]
