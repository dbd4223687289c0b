"""Every mutant's dotted target names an attribute that exists, in the default run.

A mutant (``paper_checks.patch``/``wrap``) names what it replaces by a dotted string such as
``"dynamics.sgd._kernel.quadratic_paths"``; a module moved or a function renamed leaves the
string pointing nowhere, and before this test only the ``slow`` run, which applies every
mutant, noticed. The resolution here imports the longest importable module prefix and walks
the rest as attributes, independently of ``paper_checks``' own resolver.
"""

import importlib

import pytest

from paper_checks import PROPERTIES, REGISTRY

MUTANTS = [(x.id, m) for pool in (REGISTRY, PROPERTIES) for x in pool for m in x.mutants]


def _resolves(target: str) -> bool:
    parts = target.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_resolver_rejects_a_moved_name():
    assert _resolves("dynamics.sgd.expected_excess_risk")
    assert _resolves("estimators._ridge._RidgePath.coef")
    assert not _resolves("dynamics.sgd.no_such_function")
    assert not _resolves("no_such_package.f")


def test_there_are_mutants_to_check():
    assert len(MUTANTS) >= 100


@pytest.mark.parametrize("owner", sorted({owner for owner, _ in MUTANTS}))
def test_every_mutant_target_resolves(owner):
    targets = [m.target for o, m in MUTANTS if o == owner]
    assert all(targets), f"{owner}: a mutant without a target"
    dangling = [t for t in targets if not _resolves(t)]
    assert dangling == [], f"{owner}: mutant targets that name nothing: {dangling}"
