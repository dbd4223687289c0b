"""Every source the code cites is inside the repository.

Scans the Python files of every package, the tests and the benchmarks (docstrings, comments and
the claims' ``where`` strings alike), ``README.md`` and ``docs/**.md`` for

- repository paths (``docs/papers/fp4.md``, ``theory/sgd.py``, ``dynamics/acavp/augment.py``):
  each must exist, and a ``#anchor`` after a Markdown path must be one of that page's headings;
- citations of material outside the repository: ``../shared/``, ``shared/papers/`` and bare
  ``<note>.md`` names that are not files at the repository root;
- (Python files and ``docs/`` only) phrases that cite an unnamed note ("the note", "research
  note", "note §4"): a citation names a paper's section or a page under ``docs/papers/``.
"""

from __future__ import annotations

import re
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
    "benchmarks",
    "theorylab",
    "tests",
)
#: top-level folders whose paths a citation may name (``docs`` for the pages)
TOP = frozenset((*PACKAGES, "docs"))
#: ``.md`` files the command writes into its output folder, named in messages and docstrings
GENERATED = frozenset({"report.md", "verify.md"})
#: folders of the notes kept outside the repository, cited without their ``../shared/`` prefix
NOTE_DIRS = frozenset({"papers", "shared"})

PATH = re.compile(r"(?<![\w/.-])((?:[A-Za-z_][\w.-]*/)+[\w.-]+\.(?:py|md))(#[\w-]+)?")
BARE_MD = re.compile(r"(?<![\w/.<{-])([A-Za-z_][\w-]*\.md)\b")
OUTSIDE = re.compile(r"\.\./shared\b|\bshared/papers\b")
NOTE = re.compile(
    r"\b(?:the|paper|research|package's)\s+notes?\b(?!book)"
    r"|\bnotes?\s+(?:§|Sec\b|sec\b|section\b|[A-Z]\d)",
    re.I,
)


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings (outside fenced code)."""
    out, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*)", line)):
            out.add(slug(m.group(1)))
    return out


def problems(text: str, *, notes: bool = True, here: Path | None = None) -> list[str]:
    """What in ``text`` names a source that is not in the repository: a missing path, a missing
    heading anchor, a citation of ``../shared/`` or of a bare note, and (with ``notes``) a phrase
    citing an unnamed note. A bare ``x.md`` may also be a sibling in ``here`` (a page's folder)."""
    found = []
    for m in PATH.finditer(text):
        path, anchor = m.group(1), m.group(2)
        first = path.split("/", 1)[0]
        if first not in TOP | NOTE_DIRS or path.split("/")[-1] in GENERATED:
            continue  # an official code's own path (``models/prompters.py``) or an output file
        target = ROOT / path
        if not target.is_file():
            found.append(f"missing path {path}")
        elif anchor and path.endswith(".md") and anchor[1:] not in anchors(target):
            found.append(f"missing anchor {path}{anchor}")
    for m in BARE_MD.finditer(text):
        name = m.group(1)
        if name not in GENERATED and not any((d / name).is_file() for d in (ROOT, here) if d):
            found.append(f"bare note {name}")
    found += [f"outside the repository: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    if notes:
        found += [f"unnamed note: {m.group(0)!r}" for m in NOTE.finditer(text)]
    return found


def sources() -> list[Path]:
    """The files scanned: Python under the packages, README.md, docs/**.md."""
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    files += [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in files if p.resolve() != Path(__file__).resolve()]


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_source_is_in_the_repository(path):
    # the README's phrases are left to its own rewrite; its paths are checked here
    text = path.read_text(encoding="utf-8")
    bad = problems(text, notes=path != ROOT / "README.md", here=path.parent)
    assert not bad, f"{path.relative_to(ROOT)}: {bad}"


#: the sections every paper's page has (docs/papers/README.md); the package's own extensions
#: (not papers) are organised by route instead
SECTIONS = (
    "what-the-paper-claims",
    "as-implemented-here",
    "departures-and-why",
    "open-readings-as-options",
    "where-it-is-checked",
)
EXTENSIONS = frozenset({"ecc_unknown_covariance.md"})


@pytest.mark.parametrize(
    "page",
    sorted(p for p in (ROOT / "docs" / "papers").glob("*.md") if p.name != "README.md"),
    ids=lambda p: p.name,
)
def test_every_paper_page_has_the_sections(page):
    wanted = ("where-it-is-checked",) if page.name in EXTENSIONS else SECTIONS
    missing = [a for a in wanted if a not in anchors(page)]
    assert not missing, f"{page.name} lacks the sections {missing}"


def test_papers_index_lists_every_page():
    index = (ROOT / "docs" / "papers" / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in (ROOT / "docs" / "papers").glob("*.md") if p.name != "README.md")
    assert len(pages) >= 19, pages
    missing = [p for p in pages if f"]({p})" not in index]
    assert not missing, f"docs/papers/README.md does not link {missing}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see ``docs/papers/no_such_paper.md``", "missing path docs/papers/no_such_paper.md"),
        ("in ``theory/no_such_module.py``", "missing path theory/no_such_module.py"),
        ("read in ``papers/mixprompt.md`` section 2", "missing path papers/mixprompt.md"),
        ("see docs/papers/fp4.md#no-such-heading", "missing anchor docs/papers/fp4.md#no-such"),
        ("from ``fp4.md`` Sec. 4", "bare note fp4.md"),
        ("read through " + "../" + "shared/papers/d2sa.md", "outside the repository"),
        ("derived in " + "the note", "unnamed note"),
        ("(note " + "§4.2)", "unnamed note"),
    ],
)
def test_checker_flags_a_planted_bad_citation(text, expected):
    assert any(p.startswith(expected) for p in problems(text)), problems(text)


@pytest.mark.parametrize(
    "text",
    [
        "see ``docs/papers/fp4.md`` and ``theory/sgd.py``",
        "the page docs/papers/fp4.md#departures-and-why",
        "official ``models/prompters.py``, ``module/hyperconv.py`` and ``X-EcoMLA/README.md``",
        "writes ``report.md`` beside ``README.md``; Note that x is positive",
    ],
)
def test_checker_passes_good_citations(text):
    assert problems(text) == []
