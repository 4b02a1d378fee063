"""The built site, as a reader sees it: every docstring role a link, no internal jargon anywhere.

The site is built once per run (``mkdocs build --strict`` into a temporary folder: the tests
that read it form one xdist group, so one worker builds it); the
words readers see are also read from ``src/``, ``docs/``, the README and the CLI/demo output.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|mod|exc|obj|data):(`|<code>)")
# the source listings mkdocstrings adds under each object, and a module of src/ shown whole on a
# tutorial, show the file as it is (roles too)
SOURCE = re.compile(
    r'<details class="mkdocstrings-source".*?</details>'
    r'|<div class="highlight"><span class="filename">src/distsampling/.*?</pre></div>',
    re.S,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env.pop("DISTSAMPLING_REPO_URL", None)  # the default site: no repository link
    # the loop matrix's results are written when this run ends: the page may say they are due
    env["DISTSAMPLING_LOOPS_PENDING"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.xdist_group("site")
def test_no_docstring_role_is_left_as_literal_text(site: Path):
    """Invariant: every ``:class:``/``:func:``/``:meth:``/``:attr:`` role of a rendered
    docstring became a link; none shows as literal text on any page."""
    literal = []
    for page in sorted(site.rglob("*.html")):
        text = SOURCE.sub("", page.read_text())
        literal += [f"{page.relative_to(site)}: {m.group(0)}" for m in ROLE.finditer(text)]
    assert not literal, "literal roles in the built pages:\n" + "\n".join(literal)


@pytest.mark.xdist_group("site")
def test_no_page_links_to_a_repository_unless_one_is_given(site: Path):
    """Invariant: the project has no public repository, so by default no page carries the
    header's repository link (``repo_url`` comes only from ``DISTSAMPLING_REPO_URL``)."""
    linked = [p.relative_to(site) for p in site.rglob("*.html") if "md-source" in p.read_text()]
    assert not linked, f"pages with a repository link: {linked[:5]}"


@pytest.mark.xdist_group("site")
def test_docstring_roles_become_links_to_their_objects(site: Path):
    """Invariant: a role renders as a link to the anchor of the object it names."""
    api = (site / "api" / "index.html").read_text()
    # wrapper.py's docstrings say :meth:`set_epoch` and :class:`~distsampling.WeightedBalanceClassSampler`
    assert (
        'href="#distsampling.WeightedBalanceClassSampler"><code>WeightedBalanceClassSampler' in api
    )
    assert re.search(r'href="#distsampling\.\w+\.set_epoch"><code>set_epoch\(\)', api)


def test_a_role_naming_nothing_fails_the_strict_build(tmp_path, caplog):
    """Invariant: the roles extension warns (so ``mkdocs build --strict`` fails) on a role that
    resolves to no object, naming it, and rewrites the roles that do resolve."""
    import griffe

    pkg = tmp_path / "tinypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        '"""See :class:`Thing` and :func:`nothing_here`."""\n\n'
        'class Thing:\n    """Call :meth:`go`."""\n\n    def go(self):\n        pass\n'
    )
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from sphinx_roles import SphinxRoles
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    with caplog.at_level(logging.WARNING, logger="mkdocs.plugins.sphinx_roles"):
        loaded = griffe.load(
            "tinypkg", search_paths=[tmp_path], extensions=griffe.load_extensions(SphinxRoles)
        )
    assert loaded.docstring.value == "See [`Thing`][tinypkg.Thing] and :func:`nothing_here`."
    assert loaded["Thing"].docstring.value == "Call [`go()`][tinypkg.Thing.go]."
    assert ["tinypkg: :func:`nothing_here` names nothing the docs know"] == [
        r.getMessage() for r in caplog.records
    ]


# --- words for readers -------------------------------------------------------------------
# "seed 003", "seeds 000, 002", "issue 12", "pytorch issue 25162": words of this project's
# workshop that a reader cannot place. An upstream issue is a link instead.
JARGON = re.compile(r"\bseeds? \d{3}\b|\bthe seeds'|\bissues? #?\d+\b", re.I)
# owner/repo#N outside the text of a markdown link, or a bare #N after "pytorch"/"torch"
BARE_ISSUE = re.compile(r"(?<![\[\w.-])[\w.-]+/[\w.-]+#\d+(?![\]\d])|\b(?:py)?torch #\d+")


def reader_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "src").rglob("*.py"))]
    files += sorted(p for p in (ROOT / "docs").rglob("*") if p.suffix in {".md", ".py"})
    return [p for p in files if "generated" not in p.parts]


def cli_and_demo_output() -> str:
    from distsampling.tools import cli
    from distsampling.tools.demo import BUILDERS, EXAMPLES

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for argv in (["--help"], ["split", "--help"], ["split", "--size", "10", "--window", "3"]):
            with contextlib.suppress(SystemExit):
                cli.main(argv)
        for title, kind, kwargs in EXAMPLES:  # the tour make demo prints before going live
            print(title, BUILDERS[kind][1](**kwargs), sep="\n")
    return out.getvalue()


def test_readers_never_see_internal_jargon():
    """Invariant: no page, module, docstring, CLI or demo output says "seed 00N" or "issue N";
    an upstream issue is written as a link."""
    found = []
    for path in reader_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if JARGON.search(line) or BARE_ISSUE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    for line in cli_and_demo_output().splitlines():
        if JARGON.search(line) or BARE_ISSUE.search(line):
            found.append(f"CLI/demo output: {line.strip()}")
    assert not found, "internal jargon where users read:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "a split (seeds 000, 002)",
        "the padding (pytorch issue 25162)",
        "see pytorch/pytorch#25162",
        "see Lightning-AI/litData#694",
        "print the seeds' examples",
    ],
)
def test_the_jargon_check_catches_what_it_forbids(line: str):
    """Invariant: each form of jargon the check forbids is caught (the check can fail)."""
    assert JARGON.search(line) or BARE_ISSUE.search(line)


def test_the_jargon_check_allows_a_linked_upstream_issue():
    """Invariant: ``[pytorch/pytorch#25162](https://github.com/...)`` is the allowed form."""
    line = "([pytorch/pytorch#25162](https://github.com/pytorch/pytorch/issues/25162))"
    assert not (JARGON.search(line) or BARE_ISSUE.search(line))
    hyphenated = "[Lightning-AI/litData#694](https://github.com/Lightning-AI/litData/issues/694)"
    assert not BARE_ISSUE.search(hyphenated)  # an owner with a hyphen is one name
