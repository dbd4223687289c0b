"""Each top-level package imports from this distribution (PyPI has packages named `spectral`,
`estimators`, `dynamics` and `figures`: a stray one must not shadow ours)."""

import importlib
import importlib.metadata
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [
    "_core",
    "theory",
    "estimators",
    "spectral",
    "dynamics",
    "nn",
    "paper_checks",
    "figures",
    "theorylab",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_package_comes_from_this_distribution(name):
    mod = importlib.import_module(name)
    here = Path(mod.__file__).resolve()
    dist = importlib.metadata.distribution("theorylab")
    installed = {
        Path(dist.locate_file(f)).resolve() for f in dist.files or () if f.name == "__init__.py"
    }
    # editable install / source tree, or the files this distribution installed
    assert here == ROOT / name / "__init__.py" or here in installed, here


def test_every_registered_claim_and_figure_is_well_formed():
    from figures import figure_modules
    from paper_checks import REGISTRY

    # areas are discovered: a claim's area names the claims module (or package) defining it,
    # e.g. ecc.* in paper_checks/ecc.py or ecc_ols.py, adapters.* in paper_checks/adapters/
    claims = list(REGISTRY)
    assert claims, "no claim registered"
    for c in claims:
        area, module = c.id.split(".")[0], c.check.__module__.split(".")[1]
        assert module == area or module.startswith(area + "_"), (c.id, c.check.__module__)
        assert c.paper and c.statement and c.where
    areas = {c.id.split(".")[0] for c in claims}
    for mod in figure_modules():
        assert mod.ID.split(".")[0] in areas and callable(mod.make) and mod.TITLE
        # the ID names the output files: no glob or path characters (``fp4.s*`` once wrote
        # ``fp4_s*.png``)
        assert re.fullmatch(r"[a-z0-9]+\.[a-z0-9_]+", mod.ID), mod.ID
