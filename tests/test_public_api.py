"""The public surface, guarded, in the manner of scipy's ``test_public_api``.

Each top-level package keeps its implementation in underscore modules and re-exports the public
names in ``__init__`` with ``__all__``. Another package may use those public names only: an
import of another package's underscore module or underscore name (``from estimators._ridge
import ...``, ``from paper_checks.d2sa import _plan``, ``import nn.quant as Q; Q._uniform``)
fails this test. The one sanctioned exception is the bottom package ``_core`` (validation, the
float64 context, compiled-program release), as ``equinox.internal`` is for equinox's own
packages. Imports inside one top-level package (relative, or absolute into the same package)
are that package's own business.

``tests/`` is not scanned: a test may reach into the private modules of the package it tests,
as scipy's and equinox's tests do. ``benchmarks/`` is scanned: it measures the public functions
a user would call.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "_core",
    "theory",
    "estimators",
    "spectral",
    "dynamics",
    "nn",
    "paper_checks",
    "figures",
    "theorylab",
)
SCANNED = (*PACKAGES, "benchmarks")
BOTTOM = "_core"
ALLOWED: frozenset[tuple[str, str]] = frozenset()  # (file, dotted name): empty by design


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _foreign(dotted: str, home: str) -> bool:
    top = dotted.split(".")[0]
    return top in PACKAGES and top not in (home, BOTTOM)


def private_reaches(path: Path, home: str) -> list[str]:
    """Dotted names that ``path`` (in top-level package ``home``) takes from another package's
    underscore module or underscore name: in ``import``/``from ... import`` statements, and as
    attributes of a name such an import bound (``Q._uniform`` after ``import nn.quant as Q``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found, bound = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _foreign(a.name, home):
                    # `import theory.transformer` binds `theory`: the chain is checked below
                    root = a.name.split(".")[0]
                    bound[a.asname or root] = a.name if a.asname else root
                    if any(_private(p) for p in a.name.split(".")):
                        found.append(a.name)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if not _foreign(node.module, home):
                continue
            if any(_private(p) for p in node.module.split(".")):
                found.append(node.module)
            for a in node.names:
                full = f"{node.module}.{a.name}"
                bound[a.asname or a.name] = full
                if _private(a.name):
                    found.append(full)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, v = [node.attr], node.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id in bound:
                found.append(".".join([bound[v.id], *reversed(chain)]))
    return found


def _modules(home: str):
    return sorted(p for p in (ROOT / home).rglob("*.py") if "__pycache__" not in p.parts)


def test_scanner_sees_every_form_of_reach(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import nn.quant as Q\n"
        "import theory.transformer\n"
        "from estimators._ridge import Prepared\n"
        "from paper_checks.d2sa import _plan, SIZES\n"
        "from paper_checks import _index\n"
        "from _core.validation import check_int\n"
        "from figures._registry import x\n"
        "from . import _local\n"
        "Q._uniform(1)\n"
        "theory.transformer._check_kq(1)\n"
        "Q.__name__\n"
    )
    assert sorted(private_reaches(src, "figures")) == sorted(
        [
            "estimators._ridge",
            "paper_checks.d2sa._plan",
            "paper_checks._index",
            "nn.quant._uniform",
            "theory.transformer._check_kq",
        ]
    )


def test_no_package_imports_another_packages_private_modules():
    reaches = [
        f"{path.relative_to(ROOT)}: {name}"
        for home in SCANNED
        for path in _modules(home)
        for name in private_reaches(path, home)
        if (str(path.relative_to(ROOT)), name) not in ALLOWED
    ]
    assert reaches == [], (
        "imports of another package's underscore module or name (give the name a public "
        "place in that package's __init__/__all__, or move it to _core):\n" + "\n".join(reaches)
    )


_MODULE_ATTRS = {"annotations", "importlib", "pkgutil"}


def _packages() -> list[str]:
    return sorted(
        ".".join(init.parent.relative_to(ROOT).parts)
        for home in PACKAGES
        for init in (ROOT / home).rglob("__init__.py")
        if "__pycache__" not in init.parts
    )


@pytest.mark.parametrize("name", _packages())
def test_every_name_in_all_exists(name):
    mod = importlib.import_module(name)
    names = getattr(mod, "__all__", None)
    if names is None:  # a package that only holds modules (the claims' properties) exports none
        public = [
            n
            for n, v in vars(mod).items()
            if not n.startswith("_")
            and not (isinstance(v, types.ModuleType) and v.__name__.startswith(f"{name}."))
            and n not in _MODULE_ATTRS
        ]
        assert public == [], f"{name} defines public names {public} but no __all__"
        return
    assert len(set(names)) == len(names), f"{name}.__all__ repeats a name"
    missing = [n for n in names if not hasattr(mod, n)]
    assert missing == [], f"{name}.__all__ names what it does not define: {missing}"
