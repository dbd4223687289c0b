"""The README and docs/usage.md: their Python examples run as written, the README's tables are the
generated ones, and the README stays a short guide."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
USAGE = ROOT.joinpath("docs/usage.md")


@pytest.mark.parametrize("path", [README, USAGE], ids=lambda p: p.name)
def test_python_blocks_run(path):
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)
    assert blocks, f"{path.name} has no python example"
    for code in blocks:
        exec(compile(code, path.name, "exec"), {})


def test_readme_tables_are_the_generated_ones():
    """`theorylab report --markdown` from the registry's recorded outcomes, not typed."""
    from paper_checks import REGISTRY
    from theorylab._report import readme_table

    text = README.read_text()
    block = re.search(
        r"<!-- generated: theorylab report --markdown -->\n(.*?)\n<!-- end generated -->",
        text,
        flags=re.S,
    )
    assert block, "README lost its generated block"
    assert block.group(1) == readme_table(REGISTRY), (
        "README's tables are stale: regenerate with `theorylab report --markdown`"
    )


def test_readme_is_a_short_guide():
    lines = README.read_text().splitlines()
    assert len(lines) <= 210, len(lines)
    assert "theorylab reproduce" in README.read_text()
