"""The test files whose properties ``make test-deep`` searches: those of the modules a change touches.

``python tests/deep_tests.py REF [PATHSPEC ...]`` prints them, one a line: for every file under
``src/distsampling`` changed since ``REF`` (committed or not, new files too; ``PATHSPEC``
narrows the change, as ``git diff`` reads it), the tests named after its module
(``tests/test_<module>.py``, ``tests/<folder>/test_<module>.py``) or after its folder
(``tests/test_<folder>.py``: ``resume/state.py`` is tested by ``tests/test_resume.py``), or,
where no file is named after either, the test files that import one of its public names; and
every test file the change touches itself.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS, SRC = ROOT / "tests", ROOT / "src" / "distsampling"


def changed(ref: str, paths: list[str]) -> list[Path]:
    """Files changed since ``ref`` (its merge base with HEAD) in the working tree, and new ones."""
    git = ["git", "-C", str(ROOT)]
    base = subprocess.run([*git, "merge-base", ref, "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    spec = ["--", *(paths or ["src", "tests"])]
    names = subprocess.run([*git, "diff", "--name-only", base, *spec], capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    names += subprocess.run([*git, "ls-files", "--others", "--exclude-standard", *spec],
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    return [ROOT / n for n in dict.fromkeys(names) if (ROOT / n).exists()]


def public_names(module: Path) -> set[str]:
    """The names in ``module``'s ``__all__``."""
    for node in ast.parse(module.read_text()).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return set(ast.literal_eval(node.value))
    return set()


def importers(names: set[str]) -> list[Path]:
    """The test files that import one of ``names`` from the package."""
    found = []
    for test in sorted(TESTS.rglob("test_*.py")):
        for node in ast.walk(ast.parse(test.read_text())):
            if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("distsampling")
                    and names & {a.name for a in node.names}):  # fmt: skip
                found.append(test)
                break
    return found


def deep_tests(ref: str, paths: list[str]) -> list[Path]:
    """The test files of the modules changed since ``ref``, and the test files changed."""
    out: list[Path] = []
    for path in changed(ref, paths):
        if path.suffix != ".py":
            continue
        if path.is_relative_to(TESTS):
            out += [path] if path.name.startswith("test_") else []
            continue
        if not path.is_relative_to(SRC) or path.name == "__init__.py":
            continue
        rel = path.relative_to(SRC)
        folder = rel.parts[0] if len(rel.parts) > 1 else ""
        named = [TESTS / f"test_{path.stem}.py", TESTS / folder / f"test_{path.stem}.py"]
        named += [TESTS / f"test_{folder}.py"] if folder else []
        found = [t for t in named if t.is_file()]
        out += found or importers(public_names(path))
    return list(dict.fromkeys(out))


if __name__ == "__main__":
    for test in deep_tests(sys.argv[1], sys.argv[2:]):
        print(test.relative_to(ROOT))
