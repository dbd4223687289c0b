"""The package's randomness conventions, checked rather than advised (issue 49, part 5).

(a) every public function or method whose parameter is named ``key`` takes it keyword-only;
(b) no ``jax.random.PRNGKey`` in code, doctests or tests: typed keys from ``jax.random.key``
    (a raw uint32 key, where a test means one, is ``jax.random.key_data(jax.random.key(s))``);
(c) no stream arithmetic on a seed (``seed * 1000 + k``): streams come from
    ``jax.random.fold_in`` or ``np.random.SeedSequence(...).spawn`` (``_core.streams``).

(a) and (c) scan the distribution's packages and ``benchmarks/``; (b) scans ``tests/`` as well.
"""

from __future__ import annotations

import ast
import doctest
from pathlib import Path

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
    "benchmarks",
)
#: functions whose ``key`` is the value they inspect, not a source of randomness
KEY_SUBJECT = {("_core/validation.py", "check_key")}
LEGACY = "PRNG" + "Key"  # spelled so that this file passes its own check


def _files(*homes):
    return sorted(
        p for home in homes for p in (ROOT / home).rglob("*.py") if "__pycache__" not in p.parts
    )


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def positional_keys(tree: ast.Module, rel: str) -> list[str]:
    """``file:line name`` of each public function or method taking ``key`` positionally (nested
    functions and members of underscore classes are not public)."""
    found = []

    def visit(node, public):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.FunctionDef | ast.AsyncFunctionDef):
                pos = [a.arg for a in ch.args.posonlyargs + ch.args.args]
                if public and not ch.name.startswith("_") and "key" in pos:
                    if (rel, ch.name) not in KEY_SUBJECT:
                        found.append(f"{rel}:{ch.lineno} {ch.name}")
            elif isinstance(ch, ast.ClassDef):
                visit(ch, public and not ch.name.startswith("_"))
            else:
                visit(ch, public)

    visit(tree, True)
    return found


def legacy_keys(tree: ast.Module, rel: str) -> list[str]:
    """Lines that use the legacy key constructor, in code or in doctest examples."""
    hits = [
        f"{rel}:{n.lineno}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and n.attr == LEGACY
        or isinstance(n, ast.Name)
        and n.id == LEGACY
    ]
    parser = doctest.DocTestParser()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            doc = ast.get_docstring(n, clean=False)
            for ex in parser.get_examples(doc or ""):
                if f"{LEGACY}(" in ex.source:
                    hits.append(f"{rel}: doctest `{ex.source.strip()}`")
    return hits


def _seedish(node) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return isinstance(node, ast.Name | ast.Attribute) and "seed" in name.lower()


def _int_constant(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 2


def seed_arithmetic(tree: ast.Module, rel: str) -> list[str]:
    """``file:line expr`` of each product of a seed and an integer constant (a derived stream)."""
    return [
        f"{rel}:{n.lineno} {ast.unparse(n)}"
        for n in ast.walk(tree)
        if isinstance(n, ast.BinOp)
        and isinstance(n.op, ast.Mult)
        and (
            _seedish(n.left)
            and _int_constant(n.right)
            or _seedish(n.right)
            and _int_constant(n.left)
        )
    ]


def test_the_checks_catch_what_they_forbid():
    src = (
        "import jax\n"
        "def draw(x, key, n=1): ...\n"
        f"def fine(x, *, key): ...\n"
        f"class Corpus:\n"
        f"    def sample(self, key, n): ...\n"
        f"    def _helper(self, key): ...\n"
        f"class _Private:\n"
        f"    def sample(self, key): ...\n"
        f"k = jax.random.{LEGACY}(0)\n"
        f"s = seed * 1000 + 3\n"
        f"t = 100 * self.seed\n"
        f"u = seed + 1\n"
        f"def doc():\n"
        f"    '''>>> jax.random.{LEGACY}(1)'''\n"
    )
    tree = ast.parse(src)
    assert positional_keys(tree, "m.py") == ["m.py:2 draw", "m.py:5 sample"]
    assert sorted(s.split()[1:] for s in seed_arithmetic(tree, "m.py")) == [
        ["100", "*", "self.seed"],
        ["seed", "*", "1000"],
    ]
    assert len(legacy_keys(tree, "m.py")) == 2


def test_public_functions_take_key_keyword_only():
    found = [
        hit
        for p in _files(*PACKAGES)
        for hit in positional_keys(_tree(p), str(p.relative_to(ROOT)))
    ]
    assert found == [], "take `key` keyword-only (after `*`):\n" + "\n".join(found)


def test_no_legacy_prng_keys():
    found = [
        hit
        for p in _files(*PACKAGES, "tests")
        for hit in legacy_keys(_tree(p), str(p.relative_to(ROOT)))
    ]
    assert found == [], f"use jax.random.key(seed), not jax.random.{LEGACY}(seed):\n" + "\n".join(
        found
    )


def test_no_seed_arithmetic():
    found = [
        hit
        for p in _files(*PACKAGES)
        for hit in seed_arithmetic(_tree(p), str(p.relative_to(ROOT)))
    ]
    assert found == [], (
        "derive streams with _core.streams (SeedSequence spawn / fold_in), not arithmetic on a "
        "seed:\n" + "\n".join(found)
    )
