"""Figures that stay true: measurements on pages come from ``make bench``'s results files,
and pictures are drawn from the code (docs/hooks/figures.py, docs/hooks/pictures.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from test_docs import fences

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import figures  # noqa: E402
import pictures  # noqa: E402

sys.path.remove(str(ROOT / "docs" / "hooks"))

# a number with a unit of time, throughput or ratio, in prose
MEASURE = re.compile(
    r"\b\d[\d,.]*(?:\s?-\s?\d[\d,.]*)?\s?"
    r"(?:ms|µs|us|ns|s|sec|seconds|GB/s|MB/s|KB/s|GiB/s|MiB/s|x|×|%|times (?:faster|slower|the|as))"
    r"(?![\w/])"
)
# numbers with units that are not measurements, each with the reason it is typed
NOT_MEASURED = {
    "1x": "the definition of a ratio (below 1x: ours is faster)",
    "300-600 MB/s": "the throughput the user's question asks for",
    "8 KB/s": "a parameter of the example (the producer's rate cap)",
}


def prose(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside code blocks, with inline code and placeholders removed."""
    text = page.read_text()
    inside: set[int] = set()
    for f in fences(text):
        inside |= set(range(f.line, f.line + len(f.body.splitlines()) + 2))
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if n not in inside:
            out.append((n, re.sub(r"`[^`]*`", "", figures.PLACEHOLDER.sub("", line))))
    return out


def test_no_page_types_a_measurement_by_hand():
    """Invariant: every measured number in the docs' and README's prose is a placeholder filled
    from benchmarks/results at build time (or a table included from there), never typed."""
    typed = [
        f"{page.relative_to(ROOT)}:{n}: {m.group(0)!r} in: {line.strip()}"
        for page in PAGES
        for n, line in prose(page)
        for m in MEASURE.finditer(line)
        if m.group(0) not in NOT_MEASURED
    ]
    assert not typed, "measurements typed by hand (use {{ bench(...) }}):\n" + "\n".join(typed)


def test_the_typed_measurement_check_catches_a_typed_figure():
    """Invariant: the check above can fail: a typed figure in prose is found."""
    assert MEASURE.search("SnapshotDataset delivered about 3.8 GB/s without workers")
    assert MEASURE.search("which is about 0.33x of building the pass")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_placeholder_is_filled_from_the_results(page: Path):
    """Invariant: each placeholder of the page names a results file and key that exist, and
    renders to the number stored there."""
    rendered = figures.render(page.read_text(), str(page))
    assert "{{ bench(" not in rendered and "{{ ratio(" not in rendered


def test_a_placeholder_shows_the_stored_number():
    """Invariant: the figure shown is the results file's number, in the unit asked for."""
    mbs = figures.lookup("growing", ["medians", "distsampling", "0-sequential", "MB/s"])
    text = '{{ bench("growing", "medians", "distsampling", "0-sequential", "MB/s", unit="GB/s") }}'
    assert figures.render(text) == f"{mbs / 1000:.1f} GB/s"


def test_a_placeholder_naming_a_missing_key_stops_the_build_naming_it():
    """Invariant: a stale placeholder is an error naming the page, the placeholder and the key."""
    with pytest.raises(
        ValueError, match=r"page\.md: .*growing\.json has no key \['medians', 'nope'\]"
    ):
        figures.render('{{ bench("growing", "medians", "nope") }}', "page.md")
    with pytest.raises(ValueError, match=r"no results file missing\.json"):
        figures.render('{{ bench("missing", "a") }}', "page.md")


def test_every_picture_on_a_page_is_drawn_from_the_code():
    """Invariant: each image a page shows is written by a docs/pictures module at build time
    (from the library or the benchmark results); no picture sits in docs/ by hand."""
    drawn = {p.name for p in pictures.render_all()}
    shown = {
        m.group(1)
        for page in PAGES
        for m in re.finditer(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text())
    }
    assert shown, "no pictures found: the check would be empty"
    for src in shown:
        assert "generated/" in src and Path(src).name in drawn, f"{src} is not drawn from the code"
    by_hand = [
        p for p in (ROOT / "docs").rglob("*")
        if p.suffix in {".svg", ".png", ".jpg", ".gif"} and "generated" not in p.parts
    ]  # fmt: skip
    assert not by_hand, f"pictures not drawn from the code: {by_hand}"
