"""The mutation-testing set-up (mutation/run.py): every sampler module has its tests, every
reviewed equivalent mutant is well-formed, and the results the docs quote cover every module."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import given

from strategies import mutation_counts_by_function

ROOT = Path(__file__).resolve().parent.parent


def driver():
    spec = importlib.util.spec_from_file_location("mutation_run", ROOT / "mutation" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: the modules split out of a larger one (a folder's, or one module's), and the stem of that one,
#: whose tests prove them: the mixing folder was mixture.py; the sharded mixture's readers,
#: resume and sources were sharded_mixture.py; resume/state.py was resume.py; the exported
#: classes are the reference's, proven beside the guards (test_validate)
SPLIT_FROM = {"mixing": "mixture", "guarded": "validate", "resume/state": "resume"}
SPLIT_FROM |= {
    f"streaming/mixture_{m}": "sharded_mixture" for m in ("readers", "resume", "sources")
}


def test_every_mutated_module_has_its_source_and_same_stem_tests():
    """Invariant: MODULES is every module of src/distsampling/ and its family folders, keyed
    ``folder/stem``, but the tools that are no sampler (the launcher, the command line, the demo
    and its text rendering) and the growing package (a folder of its own), each tested by its
    same-stem tests/test_<stem>.py (a module split out of a larger one without a file of its
    own: the larger one's); the reference's helpers (``_checks``, ``_split``) and the
    framework guards (``guards``) by tests/test_validate.py."""
    run = driver()
    src = ROOT / "src" / "distsampling"
    files = {p.relative_to(src).with_suffix("").as_posix() for p in src.rglob("*.py")}
    not_samplers = {"tools/launch", "tools/cli", "tools/cli_mixture", "tools/demo", "tools/render"}
    not_samplers |= {f for f in files if f.startswith("growing/") or f.endswith("__init__")}
    assert set(run.MODULES) == files - not_samplers - {"__main__"}
    helpers = {"_checks", "_split", "guards"}
    for module, (tests, _multiprocess) in run.MODULES.items():
        stem = "validate" if module in helpers else module.rsplit("/", 1)[-1]
        # a module split out of a larger one keeps that one's tests (mixing/tree: test_mixture),
        # unless it has its own same-stem file (mixing/phases: test_phases)
        if not (ROOT / f"tests/test_{stem}.py").is_file():
            stem = SPLIT_FROM.get(module, SPLIT_FROM.get(module.split("/")[0], stem))
        assert f"tests/test_{stem}.py" in tests, (module, tests)
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


def _row(run, by_function: dict, functions: list[str] | None) -> dict:
    """A row of results.json with these counts per function, a survivor entry for each survived."""
    unexplained = [
        {"mutant": f"{f}#{i}", "function": f"m.{f}", "line": "", "diff": ""}
        for f, c in by_function.items()
        for i in range(c["survived"])
    ]
    row = {**run.total(by_function), "by_function": by_function, "unexplained": unexplained}
    return row if functions is None else {**row, "functions": functions}


@given(old=mutation_counts_by_function(), new=mutation_counts_by_function())
def test_a_run_of_some_functions_updates_only_their_counts_in_the_row(old, new):
    """Invariant: after a run of some functions (``--functions``), the module's row holds each
    function's counts from its latest run (the new run's for the functions it ran, the row's
    before for the others), each column the sum over the functions, and the survivors of the
    same runs; a row of some functions lists them all, a row of the whole module stays whole."""
    run = driver()
    latest = {**old, **new}
    for whole in (False, True):
        before = _row(run, old, None if whole else sorted(old))
        row = run.merge(before, _row(run, new, sorted(new)))
        assert row["by_function"] == latest
        for k in run.COLUMNS:
            assert row[k] == sum(c[k] for c in latest.values())
        survivors = sorted(u["mutant"] for u in _row(run, latest, None)["unexplained"])
        assert sorted(u["mutant"] for u in row["unexplained"]) == survivors
        assert row["survived"] == len(row["unexplained"])
        assert ("functions" not in row) if whole else sorted(row["functions"]) == sorted(latest)


def test_a_kept_survivor_listed_as_equivalent_since_its_run_counts_as_equivalent():
    """Invariant: a survivor kept from the last run of a function that did not run again counts
    as equivalent, no longer unexplained, once ``equivalent.md`` lists its line; one it does
    not list stays unexplained; the columns still add up."""
    run = driver()
    f = {"mutants": 4, "killed": 1, "equivalent": 0, "timeout": 1, "survived": 2}
    old = _row(run, {"f": f}, ["f"])
    old["unexplained"][0]["line"] = "x = 1"
    g = {"mutants": 2, "killed": 2, "equivalent": 0, "timeout": 0, "survived": 0}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run, "equivalents", lambda: {("m.f", "x = 1"): "the same x"})
        row = run.merge(old, _row(run, {"g": g}, ["g"]))
    assert row["by_function"]["f"] == {**f, "equivalent": 1, "survived": 1}
    assert [u["mutant"] for u in row["unexplained"]] == ["f#1"]
    assert (row["mutants"], row["equivalent"], row["survived"]) == (6, 1, 1)


def test_a_row_without_counts_per_function_is_kept_until_one_of_its_functions_runs_again():
    """Invariant: a row written before counts were kept per function (its totals and the
    functions they cover) stays in the sum while none of its functions runs again, and leaves
    it, whole, once one does; a failed row is replaced by the run."""
    run = driver()
    counts = {"mutants": 9, "killed": 6, "equivalent": 1, "timeout": 2, "survived": 0}
    legacy = {**counts, "unexplained": [], "functions": ["C.m", "g"]}
    new = _row(
        run,
        {"_f": {"mutants": 3, "killed": 3, "equivalent": 0, "timeout": 0, "survived": 0}},
        ["_f"],
    )
    row = run.merge(legacy, new)
    assert (row["mutants"], row["killed"], row["timeout"]) == (12, 9, 2)
    assert sorted(row["functions"]) == ["C.m", "_f", "g"]
    again = _row(run, {"g": dict(counts)}, ["g"])
    row = run.merge(row, again)
    assert row["by_function"] == {"_f": new["by_function"]["_f"], "g": counts}
    assert sorted(row["functions"]) == ["_f", "g"]
    failed = {"failed": "mutmut run exited with -15", "unexplained": []}
    assert run.merge(failed, new) == new


def test_a_run_cut_short_records_only_the_functions_whose_every_mutant_was_run(tmp_path):
    """Invariant: ``--collect`` reads a stopped run's mutmut results and counts exactly the
    functions all of whose mutants have a result (killed, or timed out), per function; a
    function with a mutant not yet run is left out, never counted as caught or survived."""
    run = driver()
    work = tmp_path / "m"
    meta = work / "mutants" / "src" / "distsampling" / "m.py.meta"
    meta.parent.mkdir(parents=True)
    (work / "pyproject.toml").write_text("[tool.mutmut]\n")
    codes = {
        "distsampling.m.x_f__mutmut_1": 1,
        "distsampling.m.x_f__mutmut_2": 36,  # a timeout
        "distsampling.m.xǁCǁm__mutmut_1": 1,
        "distsampling.m.xǁCǁm__mutmut_2": None,  # not run yet
        "distsampling.m.x_g__mutmut_1": None,
    }
    keys = ("hash_by_function_name", "durations_by_key", "estimated_durations_by_key")
    meta.write_text(json.dumps({"exit_code_by_key": codes, **{key: {} for key in keys}}))
    run.WORK = tmp_path
    row = run.collect("m")
    assert row["by_function"] == {
        "f": {"mutants": 2, "killed": 1, "equivalent": 0, "timeout": 1, "survived": 0}
    }
    assert (row["functions"], row["mutants"], row["unexplained"]) == (["f"], 2, [])
