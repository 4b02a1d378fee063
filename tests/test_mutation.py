"""The mutation-testing set-up (mutation/run.py): every sampler module has its tests, every
reviewed equivalent mutant is well-formed, and the results the docs quote cover every module."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def driver():
    spec = importlib.util.spec_from_file_location("mutation_run", ROOT / "mutation" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_mutated_module_has_its_source_and_same_stem_tests():
    """Invariant: MODULES is every module of src/distsampling/ but the launcher, the command line
    (``cli.py`` and the mixture's subcommand, ``cli_mixture.py``) and its text rendering (the
    growing package is a folder of its own), each tested by its
    same-stem tests/test_<module>.py (``_validate`` by tests/test_validate.py)."""
    run = driver()
    files = {p.stem for p in (ROOT / "src" / "distsampling").glob("*.py")}
    not_samplers = {"launch", "cli", "cli_mixture", "demo", "render", "__init__", "__main__"}
    assert set(run.MODULES) == files - not_samplers
    for module, (tests, _multiprocess) in run.MODULES.items():
        assert f"tests/test_{module.lstrip('_')}.py" in tests
        assert all((ROOT / t).is_file() for t in tests)


def test_every_equivalent_mutant_names_a_mutated_module_and_says_why():
    """Invariant: each bullet of mutation/equivalent.md parses (module.function, the mutated
    line, the reason) and names a module that is mutated."""
    run = driver()
    entries = run.equivalents()
    bullets = [ln for ln in (ROOT / "mutation" / "equivalent.md").read_text().splitlines()]
    assert len(entries) == sum(ln.startswith("- ") for ln in bullets)
    for (function, line), why in entries.items():
        assert function.split(".")[0] in run.MODULES and line and len(why) > 10


def test_the_results_the_docs_quote_have_a_row_per_module():
    """Invariant: mutation/results.md (included by the docs) lists every module, and matches
    results.json for the modules that were run."""
    run = driver()
    table = (ROOT / "mutation" / "results.md").read_text().splitlines()
    results = json.loads((ROOT / "mutation" / "results.json").read_text())
    for module in run.MODULES:
        (row,) = [r for r in table if r.startswith(f"| `{module}.py`")]
        # a run of the changed functions alone says which (make mutate MUTATE_FLAGS=--functions)
        only = results.get(module, {}).get("functions")
        name = f"`{module}.py`" + (f" (the changed: {', '.join(only)})" if only else "")
        if module in results and "failed" in results[module]:
            assert row.startswith(f"| {name} | run failed: ")
        elif module in results:
            r = results[module]
            cells = [r[k] for k in ("mutants", "killed", "equivalent", "timeout", "survived")]
            assert row == f"| {name} | " + " | ".join(map(str, cells)) + " |"
            assert r["survived"] == len(r["unexplained"])
