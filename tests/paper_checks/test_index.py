"""The static index that ``theorylab list`` reads equals the live registries, and reading it
imports no JAX."""

import subprocess
import sys

from paper_checks import PROPERTIES, REGISTRY, _index


def test_index_matches_registries():
    live = _index.entries(REGISTRY, PROPERTIES)
    stale = {r["id"] for r in _index.load()} ^ {r["id"] for r in live}
    assert _index.load() == live, (
        f"paper_checks/index.json is stale (ids differing: {sorted(stale)}); "
        "rebuild it with `python -m paper_checks._index`"
    )


def test_list_imports_no_jax():
    code = (
        "import sys, io, contextlib\n"
        "from theorylab._cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    assert main(['list']) == 0\n"
        "assert len(buf.getvalue().splitlines()) == len(__import__('paper_checks')._index.load())\n"
        "assert 'jax' not in sys.modules, 'theorylab list imported jax'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
